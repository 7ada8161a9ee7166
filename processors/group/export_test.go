package group

// EncodeEnvelope exposes the table encoding to the external tests, which seed
// a store before its processor starts.
var EncodeEnvelope = encodeEnvelope
