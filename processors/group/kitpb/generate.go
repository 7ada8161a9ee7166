package kitpb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins). The .proto lives with every other schema, in
// codecs/proto/fencestream/kit/v1/kit.proto; its go_package keeps the Go code here.
//go:generate protoc -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/group ../../../codecs/proto/fencestream/kit/v1/kit.proto
//go:generate protoc -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/group ../../../codecs/proto/fencestream/kit/v1/change.proto
