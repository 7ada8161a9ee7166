package group_test

import (
	"context"
	"testing"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology/cluster"
)

// TestEmitOnChange counts the table's changelog writes: an input whose
// handler sets the state it found (byte for byte), or deletes an absent one,
// and emits nothing writes nothing; one that changes the state or emits
// writes once; on an ordered stream every applied input writes (its HLC is
// what orders the key's next input).
func TestEmitOnChange(t *testing.T) {
	// A ping with Lat 0 leaves the state as it is, -1 deletes it, any other
	// counts it; Lon 1 also emits.
	handle := func(out outT, c *ctxT, p *geofencepb.Ping) error {
		st := c.State()
		switch {
		case p.GetLat() == -1:
			c.DeleteState()
		case p.GetLat() == 0 && st != nil:
			c.SetState(st)
		case p.GetLat() != 0:
			if st == nil {
				st = &geofencepb.DeviceState{DeviceId: c.Key()}
			}
			st.Pings++
			c.SetState(st)
		}
		if p.GetLon() == 1 {
			out.Emit(c, c.Key(), &geofencepb.Trigger{DeviceId: c.Key(), Hlc: p.GetHlc()})
		}
		return nil
	}
	for _, tc := range []struct {
		name    string
		ordered bool
		// writes: the table writes each ping makes, in order: count, same,
		// same, same and emit, delete an absent key's state, count.
		writes []int
	}{
		{"unordered", false, []int{1, 0, 0, 1, 0, 1}},
		{"ordered", true, []int{1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tt := tester.New(t)
			var opts []group.StreamOpt[geofencepb.Ping, *geofencepb.Ping]
			if tc.ordered {
				opts = append(opts, group.OrderedByHLC(func(p *geofencepb.Ping) uint64 { return p.GetHlc() }))
			}
			proc, err := validGroupOut(testTopology(2), handle, opts...).Processor(context.Background(), cluster.Config{}, group.Tester(tt))
			if err != nil {
				t.Fatal(err)
			}
			runUntilCleanup(t, proc.Run)
			table := tt.NewQueueTracker(topicTab)
			pings := []struct {
				key      string
				lat, lon float64
			}{{"d1", 1, 0}, {"d1", 0, 0}, {"d1", 0, 0}, {"d1", 0, 1}, {"d2", -1, 0}, {"d1", 1, 0}}
			for i, p := range pings {
				before := table.Hwm()
				tt.Consume(topicIn, p.key, &geofencepb.Ping{DeviceId: p.key, Lat: p.lat, Lon: p.lon, Hlc: uint64(10 + i)})
				if got := int(table.Hwm() - before); got != tc.writes[i] {
					t.Errorf("ping %d (%+v): %d table writes, want %d", i, p, got, tc.writes[i])
				}
			}
			st, err := group.StateOf[geofencepb.DeviceState](tt.TableValue(goka.Table(topicTab), "d1"))
			if err != nil || st.GetPings() != 2 {
				t.Fatalf("state %v (%v), want 2 pings counted", st, err)
			}
		})
	}
}
