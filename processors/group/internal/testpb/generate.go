package testpb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins). The .proto lives with every other schema, in
// codecs/proto/fencestream/kit/test/v1/test.proto and tally.proto (which
// imports the kit's kit.proto).
//go:generate protoc -I ../../../../codecs/proto --go_out=../.. --go_opt=module=github.com/fencestream/fencestream/processors/group ../../../../codecs/proto/fencestream/kit/test/v1/test.proto ../../../../codecs/proto/fencestream/kit/test/v1/tally.proto
