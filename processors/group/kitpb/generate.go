package kitpb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins).
//go:generate protoc -I proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/group proto/fencestream/kit/v1/kit.proto
