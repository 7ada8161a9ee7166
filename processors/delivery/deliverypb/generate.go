// Package deliverypb holds the delivery processor's own schema: webhook
// subscriptions, the per-device delivery queues, delivery outcomes and the
// per-subscription status.
package deliverypb

// Regenerate with Debian's protobuf-compiler and
// go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// (the version go.mod pins).
//go:generate protoc -I proto -I ../../../codecs/proto --go_out=.. --go_opt=module=github.com/fencestream/fencestream/processors/delivery proto/fencestream/delivery/v1/delivery.proto
