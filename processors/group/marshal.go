package group

import (
	"fmt"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// MarshalEnvelope encodes e as the kit writes a group-table value (magic
// prefix, deterministic protobuf), so benchmarks can seed a table's changelog
// with what a group would have written.
func MarshalEnvelope(e *kitpb.Envelope) ([]byte, error) { return encodeEnvelope(e) }

// TableState returns the application's state encoded in a group-table value as
// the kit writes it (an envelope, or bare state written before envelopes), so a
// tool that knows a table's message type only by name (fencectl topic read)
// can decode it. ok is false for a tombstone and for an envelope that holds no
// state (the key's state was deleted but its cursors are kept).
func TableState(value []byte) (state []byte, ok bool, err error) {
	if value == nil {
		return nil, false, nil
	}
	env, err := decodeEnvelope(value)
	if err != nil {
		return nil, false, fmt.Errorf("group table: not an envelope: %w", err)
	}
	return env.GetState(), env.GetHasState(), nil
}
