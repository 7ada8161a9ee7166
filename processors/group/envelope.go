package group

import (
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/internal/once"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
)

// The table encoding is once's (internal/once/envelope.go); these are the
// names the kit's stores and codecs call it by.
const envelopeMagic = once.Magic

func enveloped(b []byte) bool                          { return once.Enveloped(b) }
func encodeEnvelope(e *kitpb.Envelope) ([]byte, error) { return once.Encode(e) }
func decodeEnvelope(b []byte) (*kitpb.Envelope, error) { return once.Decode(b) }

// DefaultReplayWindow is how many inputs per key and input partition the kit
// remembers (with their outputs) by default. It remembers only those that can
// be redelivered — at or above the group's committed offset, which it polls
// from the broker — and applies no more of a key's inputs that emitted than
// this ahead of the commit: the next waits for the commit (awaitRoom). Only when the
// committed offsets are unknown (Goka's tester) does the cap drop inputs.
const DefaultReplayWindow = 32

// envelopeCodec is the Goka codec of a group table (tablecodec.Codec).
type envelopeCodec[S any, PS codecs.Message[S]] = tablecodec.Codec[S, PS]

// marshalOpts encodes the application's messages deterministically: a
// replay writes the same bytes.
var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// StateOf extracts the application's state from a group-table value as Goka
// hands it over (from a view, an iterator or the tester): nil when the key has
// none, an error when it cannot be decoded.
func StateOf[S any, PS codecs.Message[S]](v any) (PS, error) { return tablecodec.StateOf[S, PS](v) }

func unwrapState[S any, PS codecs.Message[S]](env *kitpb.Envelope) (PS, error) {
	return tablecodec.State[S, PS](env)
}

// committedFunc is the group's committed offsets (once.Committed).
type committedFunc = once.Committed
