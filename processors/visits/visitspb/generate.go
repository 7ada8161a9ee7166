// Package visitspb holds the visits processor's own schema: an application's
// messages live in its own package, generated there, and import the kit's
// (kit.proto) and the geofencing schema (geofence.proto) by their paths.
package visitspb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins).
//go:generate protoc -I proto -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/visits proto/fencestream/visits/v1/visits.proto
