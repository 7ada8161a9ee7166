package codecs

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/fencestream/fencestream/codecs proto/fencestream/v1/geofence.proto proto/fencestream/kit/v1/kit.proto proto/fencestream/visits/v1/visits.proto
