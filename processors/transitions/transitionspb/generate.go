// Package transitionspb holds the transitions processor's own schema.
package transitionspb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins).
//go:generate protoc -I proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/transitions proto/fencestream/transitions/v1/transitions.proto
