package group

import "github.com/fencestream/fencestream/processors/group/kitpb"

// MarshalEnvelope encodes e as the kit writes a group-table value (magic
// prefix, deterministic protobuf), so benchmarks can seed a table's changelog
// with what a group would have written.
func MarshalEnvelope(e *kitpb.Envelope) ([]byte, error) { return encodeEnvelope(e) }
