// Package devicestatspb holds the devicestats processor's own schema,
// generated here; it imports the kit's (kit.proto) by path.
package devicestatspb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins).
//go:generate protoc -I proto -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/devicestats proto/fencestream/devicestats/v1/devicestats.proto
