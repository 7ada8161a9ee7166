package codecs

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins). The kit's own messages (proto/fencestream/kit/v1/
// kit.proto) are generated into processors/group/kitpb by its generate.go; an
// application's own schema lives in its own package (processors/visits/visitspb
// is one). hotkeypb is the topology layer's record (topology/produce writes
// it), here so the ground floor needs nothing above it.
//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/fencestream/fencestream/codecs proto/fencestream/v1/geofence.proto
//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/fencestream/fencestream/codecs proto/fencestream/kit/v1/hotkey.proto
