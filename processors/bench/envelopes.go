package bench

import (
	"fmt"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/topology"
)

// EnvelopeBytes is the mean size of the seeded table values, split by part
// as processors/debounce's TestEnvelopeBytes splits them.
type EnvelopeBytes struct {
	Total   int `json:"total"`
	State   int `json:"state"`
	Cursors int `json:"cursors"`
	Outputs int `json:"outputs"`
	Timers  int `json:"timers"`
}

// seedBaseMs is the seeded devices' last fix (plus the device's index in ms):
// in 2027, so their timers are due after the wall clock and stream time, which
// never passes the wall clock, cannot make them due.
const seedBaseMs = int64(1_800_000_000_000)

// seedDue is when device j's seeded silence timer is due (stream time, Unix
// ms): an hour after its last fix, so in device order.
func seedDue(baseMs int64, j int) int64 { return baseMs + int64(j) + 3_600_000 }

// deviceEnvelope is the debouncer's table value for a busy device j, encoded
// with the kit's envelope encoder: its state (two fences in progress), the
// cursor of its pings partition remembering its recent inputs with the
// trigger the last one emitted, and its pending silence timer, due in stream
// time at seedDue(baseMs, j). With seedBaseMs the timers are due after the wall
// clock, so none fires; the scale run seeds them in the past instead, to make
// them due by moving stream time with a ping.
func deviceEnvelope(j int, partitions int32, baseMs int64) (dev string, v []byte, parts EnvelopeBytes, err error) {
	dev = fmt.Sprintf("dev-%07d", j)
	p := topology.PartitionFor(dev, partitions)
	ts := baseMs + int64(j)
	state, err := codecs.For[geofencepb.DeviceState]().Marshal(&geofencepb.DeviceState{
		DeviceId: dev, LastHlc: uint64(ts) << 16, LastEventTimeMs: ts, LastLat: 52.5, LastLon: 13.4,
		Pings: 100, CatalogueVersion: 1, Partition: p,
		FenceStates: []*geofencepb.FenceEntry{
			{FenceId: "fence-a", State: &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_INSIDE, InsideSinceMs: ts}},
			{FenceId: "fence-b", State: &geofencepb.FenceState{Phase: geofencepb.Phase_PHASE_ENTERING, CandidateSinceMs: ts, CandidateSamples: 2}},
		},
	})
	if err != nil {
		return "", nil, parts, err
	}
	trig, err := codecs.For[geofencepb.Trigger]().Marshal(&geofencepb.Trigger{
		TriggerId: dev + "/fence-a/" + fmt.Sprint(ts), DeviceId: dev, FenceId: "fence-a",
		Type: geofencepb.TriggerType_TRIGGER_TYPE_ENTER, EventTimeMs: ts, Hlc: uint64(ts) << 16, CatalogueVersion: 1, Lat: 52.5, Lon: 13.4,
	})
	if err != nil {
		return "", nil, parts, err
	}
	off := int64(j) * 10
	cur := &kitpb.Cursor{Topic: geofence.TopicPings, Partition: p, Offset: off, Seq: uint64(off),
		Recent: []uint64{uint64(off - 2), uint64(off - 1)},
		Sent:   []*kitpb.Recorded{{Back: 0, Outputs: []*kitpb.Output{{Topic: geofence.TopicTriggers, Key: dev, Value: trig}}}}}
	env := &kitpb.Envelope{State: state, HasState: true, Cursors: []*kitpb.Cursor{cur},
		Timers: []*kitpb.Timer{{Name: debounce.SilenceTimer, AtMs: seedDue(baseMs, j), Kind: kitpb.TimerKind_TIMER_KIND_STREAM}}}
	if v, err = tablecodec.Encode(env); err != nil {
		return "", nil, parts, err
	}
	bare := protov2.Clone(cur).(*kitpb.Cursor)
	bare.Sent = nil
	parts = EnvelopeBytes{Total: len(v),
		State:   protov2.Size(&kitpb.Envelope{State: state, HasState: true}),
		Cursors: protov2.Size(&kitpb.Envelope{Cursors: []*kitpb.Cursor{bare}}),
		Timers:  protov2.Size(&kitpb.Envelope{Timers: env.Timers}),
	}
	parts.Outputs = protov2.Size(&kitpb.Envelope{Cursors: env.Cursors}) - parts.Cursors
	return dev, v, parts, nil
}
