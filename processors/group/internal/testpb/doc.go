// Package testpb holds the messages the kit's own tests run on
// (fencestream.kit.test.v1), so no kit test imports an application's schema.
// Names and field numbers are those of the geofencing schema. Only the kit
// (processors/group and below) can import it, which internal/ enforces, and
// only its tests do.
package testpb
