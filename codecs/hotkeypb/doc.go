// Package hotkeypb holds the producer's hot-key record, fencestream.kit.v1.HotKey:
// the decision topology/produce writes to the compacted hot-keys topic when a
// key's rate crosses its threshold. It sits on the ground floor, beside the
// codec, so the topology layer imports nothing of the kit above it; the proto
// package, message name and field numbers are the ones records were first
// written with, so those records still decode.
package hotkeypb
