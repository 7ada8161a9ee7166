package codecs_test

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
)

// v1Messages are fully populated messages of every type as of schema v1.
// They are frozen: testdata/v1/*.bin were written from them, and the golden
// test compares what those bytes decode to with these values. Never edit them;
// when the schema changes, add v2 fixtures and goldens next to them.
func v1Messages() map[string]proto.Message {
	settings := &pb.DebounceSettings{MinSamples: 3, MinDwellMs: 15_000, HysteresisM: 25.5, LoiterMs: 300_000, SilenceTimeoutMs: 900_000}
	fenceState := &pb.FenceState{Phase: pb.Phase_PHASE_INSIDE, CandidateSinceMs: 1_700_000_000_000, CandidateSamples: 4, InsideSinceMs: 1_700_000_015_000, DwellFired: true}
	member := &pb.Member{Inside: true, LastHlc: 111_394_304_000_000_007, LastTriggerId: "dev-1|fence-a|ENTER|111394304000000007", SinceMs: 1_700_000_015_000}
	return map[string]proto.Message{
		"Ping": &pb.Ping{
			DeviceId: "пристрій-1", Lat: 50.4501, Lon: 30.5234, AccuracyM: 4.8, SpeedMps: 13.9,
			HeadingDeg: 271.5, DeviceTimeMs: 1_700_000_000_123, Hlc: 111_394_304_000_000_008,
		},
		"DebounceSettings": settings,
		"Fence": &pb.Fence{
			FenceId: "fence-a", Name: "Depot Nord",
			GeometryGeojson: []byte(`{"type":"Polygon","coordinates":[[[30.5,50.4],[30.6,50.4],[30.6,50.5],[30.5,50.4]]]}`),
			RadiusM:         150, Settings: settings,
		},
		"Trigger": &pb.Trigger{
			TriggerId: "dev-1|fence-a|ENTER|111394304000000007", DeviceId: "dev-1", FenceId: "fence-a",
			Type: pb.TriggerType_TRIGGER_TYPE_ENTER, Reason: pb.TriggerReason_TRIGGER_REASON_CONFIRMED,
			EventTimeMs: 1_700_000_015_000, Hlc: 111_394_304_000_000_007, CatalogueVersion: 42, Lat: 50.45, Lon: 30.52,
		},
		"FenceState": fenceState,
		"DeviceState": &pb.DeviceState{
			DeviceId: "dev-1", LastHlc: 111_394_304_000_000_009, LastEventTimeMs: 1_700_000_016_000,
			LastLat: 50.451, LastLon: 30.521,
			Fences: map[string]*pb.FenceState{"fence-a": fenceState, "fence-b": {Phase: pb.Phase_PHASE_ENTERING, CandidateSamples: 1}},
			Pings:  1234, StalePings: 2, Triggers: 17, CatalogueVersion: 42, Partition: 10,
		},
		"Member": member,
		"Occupancy": &pb.Occupancy{
			FenceId: "fence-a", Count: 2, Devices: []string{"dev-1", "dev-2"}, EntersTotal: 10, ExitsTotal: 8,
			LastChangeMs: 1_700_000_015_000, CatalogueVersion: 42,
			Members:           map[string]*pb.Member{"dev-1": member, "dev-2": {Inside: true, LastHlc: 5}, "dev-3": {LastHlc: 3}},
			DuplicatesDropped: 3, StaleDropped: 1, DwellsTotal: 4,
		},
		"HotKey": &pb.HotKey{Topic: "pings", Key: "dev-7", RatePerS: 52.5, Salted: true, SaltBuckets: 8, DecidedAtMs: 1_700_000_020_000},
	}
}

// v2Messages are the messages schema v2 changed or added, fully populated (but
// for deprecated fields). Frozen like v1Messages: testdata/v2/*.bin.
func v2Messages() map[string]proto.Message {
	fenceState := &pb.FenceState{Phase: pb.Phase_PHASE_INSIDE, CandidateSinceMs: 1_700_000_000_000, CandidateSamples: 4, InsideSinceMs: 1_700_000_015_000, DwellFired: true}
	entry := &pb.FenceEntry{FenceId: "fence-a", State: fenceState}
	return map[string]proto.Message{
		"FenceEntry": entry,
		"DeviceState": &pb.DeviceState{
			DeviceId: "dev-1", LastHlc: 111_394_304_000_000_009, LastEventTimeMs: 1_700_000_016_000,
			LastLat: 50.451, LastLon: 30.521,
			FenceStates: []*pb.FenceEntry{entry, {FenceId: "fence-b", State: &pb.FenceState{Phase: pb.Phase_PHASE_ENTERING, CandidateSamples: 1}}},
			Pings:       1234, StalePings: 2, Triggers: 17, CatalogueVersion: 42, Partition: 10,
		},
	}
}

// v3Messages are the messages schema v3 changed, fully populated: the debounce
// settings name a detector, and a fence's state carries the sequential
// evidence. Frozen like v1Messages: testdata/v3/*.bin.
func v3Messages() map[string]proto.Message {
	return map[string]proto.Message{
		"DebounceSettings": &pb.DebounceSettings{MinSamples: 3, MinDwellMs: 15_000, HysteresisM: 25.5, LoiterMs: 300_000, SilenceTimeoutMs: 900_000, Detector: "sprt"},
		"FenceState": &pb.FenceState{
			Phase: pb.Phase_PHASE_EXITING, CandidateSinceMs: 1_700_000_020_000, CandidateSamples: 2,
			InsideSinceMs: 1_700_000_015_000, DwellFired: true, Evidence: 6.25,
		},
	}
}

// v4Messages are the messages schema v4 changed or added, fully populated:
// occupancy's member registers per device (DeviceMembership, Member's
// last_type and fence_id), the count changes sent to a fence
// (OccupancyChange) and the fence's per-partition source offsets
// (Occupancy.source_next). Frozen like v1Messages: testdata/v4/*.bin.
func v4Messages() map[string]proto.Message {
	member := &pb.Member{Inside: true, LastHlc: 111_394_304_000_000_007, LastTriggerId: "dev-1|fence-a|E|18bc", SinceMs: 1_700_000_015_000,
		LastType: pb.TriggerType_TRIGGER_TYPE_ENTER, FenceId: "fence-a"}
	return map[string]proto.Message{
		"Member": member,
		"DeviceMembership": &pb.DeviceMembership{
			DeviceId: "dev-1", Fences: []*pb.Member{member, {FenceId: "fence-b", LastHlc: 5, LastType: pb.TriggerType_TRIGGER_TYPE_EXIT}},
			WatermarkHlc: 111_394_304_000_000_007, PrunedHlc: 3, NextPruneHlc: 5, DuplicatesDropped: 2, StaleDropped: 1, ExpiredDropped: 4,
		},
		"OccupancyChange": &pb.OccupancyChange{
			FenceId: "fence-a", DeviceId: "dev-1", Delta: -1, Type: pb.TriggerType_TRIGGER_TYPE_EXIT, Hlc: 111_394_304_000_000_007,
			EventTimeMs: 1_700_000_015_000, CatalogueVersion: 42, SourcePartition: 7, SourceOffset: 12_345,
		},
		"Occupancy": &pb.Occupancy{
			FenceId: "fence-a", Count: 2, Devices: []string{"dev-1", "dev-2"}, EntersTotal: 10, ExitsTotal: 8,
			LastChangeMs: 1_700_000_015_000, CatalogueVersion: 42,
			Members:           map[string]*pb.Member{"dev-1": member},
			DuplicatesDropped: 3, StaleDropped: 1, DwellsTotal: 4, SaltBuckets: 32, WatermarkHlc: 9, PrunedHlc: 2, ExpiredDropped: 1, NextPruneHlc: 4,
			SourceNext: []int64{0, 17, 0, 4},
		},
	}
}
