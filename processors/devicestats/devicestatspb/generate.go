// Package devicestatspb is devicestats' own schema (protoc; protoc-gen-go v1.36.12, as go.mod pins).
package devicestatspb

//go:generate protoc -I proto -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/devicestats proto/fencestream/devicestats/v1/devicestats.proto
