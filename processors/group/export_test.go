package group

// EncodeEnvelope exposes the table encoding to the external tests, which seed
// a store before its processor starts.
var EncodeEnvelope = encodeEnvelope

// FNV64a is the kit's inline FNV-1a (digests).
var FNV64a = fnv64a
