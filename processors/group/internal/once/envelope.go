package once

import (
	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Magic precedes every envelope in a group table. No protobuf message starts
// with a 0x00 byte (field number 0 is invalid), so a value without it is bare
// application state written before envelopes existed.
const Magic = "\x00\x01"

// Enveloped reports whether b starts with Magic.
func Enveloped(b []byte) bool {
	return len(b) >= len(Magic) && string(b[:len(Magic)]) == Magic
}

var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// cachedSize is the size of an envelope just encoded (Encode leaves every
// size cache filled), read without a second pass over it.
var cachedSize = protov2.MarshalOptions{Deterministic: true, UseCachedSize: true}

// Encode is the table value of e.
func Encode(e *kitpb.Envelope) ([]byte, error) {
	// Size fills every size cache of e, so the marshal that follows (and
	// EncodedSize) reads them instead of sizing e again.
	b := make([]byte, len(Magic), len(Magic)+marshalOpts.Size(e))
	copy(b, Magic)
	return cachedSize.MarshalAppend(b, e)
}

// EncodedSize is the length of Encode(e) for an e just encoded.
func EncodedSize(e *kitpb.Envelope) int { return len(Magic) + cachedSize.Size(e) }

// Decode reads a table value: an envelope, or bare state from before
// envelopes (no cursors, so nothing is replayed).
func Decode(data []byte) (*kitpb.Envelope, error) {
	if !Enveloped(data) {
		return &kitpb.Envelope{State: append([]byte(nil), data...), HasState: true}, nil
	}
	env := &kitpb.Envelope{}
	if err := protov2.Unmarshal(data[len(Magic):], env); err != nil {
		return nil, err
	}
	return env, nil
}

// Digest is the FNV-1a digest of an input's encoding, never 0 (0: none
// recorded). The encoding must be deterministic, so a record produced twice
// has one digest.
func Digest(b []byte) uint64 { return max(fnv64a(b), 1) }

// fnv64a is hash/fnv's FNV-1a of b, without a hash.Hash to allocate: digests
// stored by earlier versions must still match.
func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range b {
		h ^= uint64(x)
		h *= 1099511628211
	}
	return h
}
