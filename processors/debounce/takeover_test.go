package debounce_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

type instance struct {
	proc   *group.Processor
	cancel context.CancelFunc
	done   chan error
}

func startInstance(t testing.TB, cl cluster.Config, standby bool) *instance {
	t.Helper()
	d, err := debounce.New(geofence.Topology(), testCatalogueTB(t), debounce.Defaults(testSettings()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := d.Group().Processor(ctx, cl, group.StateDir(t.TempDir()), group.HotStandby(standby))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	in := &instance{proc: proc, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- proc.Run(ctx) }()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	if in.cancel != nil {
		in.cancel()
		<-in.done
		in.cancel = nil
	}
}

// takeover preloads the device table with n states, runs two instances of the
// debouncer group, stops the one that owns device "probe", and returns how long
// the survivor took to apply a ping for it, plus the probe's state afterwards.
//
// With kill, the owner vanishes without leaving the group, as after kill -9:
// the broker answers its LeaveGroup without removing it, so the survivor waits
// for the session timeout like it would for a dead process.
func takeover(t testing.TB, n int, standby, kill bool) (time.Duration, *geofencepb.DeviceState) {
	t.Helper()
	broker := embeddedtest.Start(t)
	cl := cluster.Config{Brokers: broker.Addrs()}
	if _, err := group.CheckBroker(context.Background(), cl, geofence.Topology(), true); err != nil {
		t.Fatal(err)
	}
	base, _ := cl.Kgo()
	prod, err := kgo.NewClient(append(base, kgo.ProducerLinger(5*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	stateCodec := codecs.For[geofencepb.DeviceState]()
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		dev := fmt.Sprintf("dev-%06d", i)
		v, _ := stateCodec.Marshal(&geofencepb.DeviceState{DeviceId: dev, LastHlc: 1, Pings: 1, LastEventTimeMs: 1_800_000_000_000})
		recs = append(recs, &kgo.Record{Topic: geofence.TopicDebouncer, Key: []byte(dev), Value: v})
	}
	probe := "probe"
	pv, _ := stateCodec.Marshal(&geofencepb.DeviceState{DeviceId: probe, LastHlc: 1, Pings: 1, LastEventTimeMs: 1_800_000_000_000})
	recs = append(recs, &kgo.Record{Topic: geofence.TopicDebouncer, Key: []byte(probe), Value: pv})
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	a := startInstance(t, cl, standby)
	waitReady(t, a.proc)
	bInst := startInstance(t, cl, standby)
	waitReady(t, bInst.proc)
	// Wait for the group to settle with both members owning partitions.
	probePart := topology.PartitionFor(probe, topology.DefaultPartitions)
	deadline := time.Now().Add(60 * time.Second)
	var owner, survivor *instance
	for owner == nil {
		if time.Now().After(deadline) {
			t.Fatal("no instance took the probe's partition")
		}
		aHas, bHas := owns(a.proc, probePart), owns(bInst.proc, probePart)
		switch {
		case aHas && !bHas && ownsAny(bInst.proc):
			owner, survivor = a, bInst
		case bHas && !aHas && ownsAny(a.proc):
			owner, survivor = bInst, a
		default:
			time.Sleep(20 * time.Millisecond) // polling the assignment, bounded by the deadline
		}
	}
	if standby {
		// A hot standby keeps the other member's partitions warm; let it catch up.
		waitRecovered(t, survivor.proc)
	}
	if kill {
		broker.Cluster().ControlKey(int16(kmsg.LeaveGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
			lr := req.(*kmsg.LeaveGroupRequest)
			resp := lr.ResponseKind().(*kmsg.LeaveGroupResponse)
			for _, m := range lr.Members {
				resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
			}
			return resp, nil, true
		})
	}
	start := time.Now()
	owner.stop()
	tail, err := kgo.NewClient(append(base, kgo.ConsumeTopics(geofence.TopicDebouncer), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	ping, _ := codecs.For[geofencepb.Ping]().Marshal(&geofencepb.Ping{DeviceId: probe, Lat: outsideLat, Lon: centerLon, DeviceTimeMs: 1_800_000_001_000, Hlc: 2})
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(probe), Value: ping}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	for {
		f := tail.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatal("survivor never applied the probe ping")
		}
		for _, r := range f.Records() {
			if string(r.Key) != probe {
				continue
			}
			st, err := tablecodec.DecodeState[geofencepb.DeviceState](r.Value)
			if err == nil && st.Pings == 2 {
				return time.Since(start), st
			}
		}
	}
}

func owns(p *group.Processor, partition int32) bool {
	return slices.Contains(p.Owned(context.Background()), partition)
}

func ownsAny(p *group.Processor) bool {
	return len(p.Owned(context.Background())) > 0
}

func waitReady(t testing.TB, p *group.Processor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.WaitForReadyContext(ctx); err != nil {
		t.Fatalf("processor not ready: %v", err)
	}
}

func waitRecovered(t testing.TB, p *group.Processor) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !p.Recovered() {
		if time.Now().After(deadline) {
			t.Fatal("standby tables never recovered")
		}
		time.Sleep(20 * time.Millisecond) // polling Goka's recovery flag, bounded by the deadline
	}
}

// TestTakeoverKeepsDeviceState stops the instance owning a device and checks the
// survivor continues from the device's state (Pings goes 1 → 2, HLC audit intact),
// with and without hot standby.
func TestTakeoverKeepsDeviceState(t *testing.T) {
	for _, standby := range []bool{false, true} {
		t.Run(fmt.Sprintf("hot-standby=%v", standby), func(t *testing.T) {
			took, st := takeover(t, 2_000, standby, false)
			if st.LastHlc != 2 || st.StalePings != 0 {
				t.Fatalf("probe state after takeover: %v", st)
			}
			t.Logf("takeover with %d devices, hot standby %v: %v", 2_000, standby, took)
		})
	}
}

// BenchmarkTakeover reports how long a survivor takes to apply a ping for a
// device whose partition it just took over, with a 100,000-device table, with
// and without hot standby, after a graceful stop and after a kill (which
// includes the 6 s session timeout). Timed from the moment the owner is told
// to stop.
//
//	go test ./processors/debounce/ -run '^$' -bench Takeover -benchtime 1x
func BenchmarkTakeover(b *testing.B) {
	for _, kill := range []bool{false, true} {
		for _, standby := range []bool{false, true} {
			stop := "graceful"
			if kill {
				stop = "kill"
			}
			b.Run(fmt.Sprintf("stop=%s/hot-standby=%v", stop, standby), func(b *testing.B) {
				var total time.Duration
				for i := 0; i < b.N; i++ {
					took, _ := takeover(b, 100_000, standby, kill)
					total += took
				}
				b.ReportMetric(total.Seconds()/float64(b.N), "s/takeover")
			})
		}
	}
}

// TestPartitionBackToItsFormerOwner: an instance that applied a device's ping
// loses the device's partition to another, which applies the next ping, and
// gets it back: it must continue from the other's state (Pings 3 → 4), not
// from the envelope and state it cached before (which would write Pings 3
// again), with and without hot standby.
func TestPartitionBackToItsFormerOwner(t *testing.T) {
	for _, standby := range []bool{false, true} {
		t.Run(fmt.Sprintf("hot-standby=%v", standby), func(t *testing.T) {
			broker := embeddedtest.Start(t)
			cl := cluster.Config{Brokers: broker.Addrs()}
			if _, err := group.CheckBroker(context.Background(), cl, geofence.Topology(), true); err != nil {
				t.Fatal(err)
			}
			base, _ := cl.Kgo()
			prod, err := kgo.NewClient(append(base, kgo.ProducerLinger(time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			tail, err := kgo.NewClient(append(base, kgo.ConsumeTopics(geofence.TopicDebouncer), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer tail.Close()
			pingCodec := codecs.For[geofencepb.Ping]()
			ctx := context.Background()
			ping := func(dev string, hlc uint64) {
				t.Helper()
				v, _ := pingCodec.Marshal(&geofencepb.Ping{DeviceId: dev, Lat: outsideLat, Lon: centerLon, AccuracyM: 3, DeviceTimeMs: 1_800_000_000_000 + int64(hlc)*1000, Hlc: hlc})
				if err := prod.ProduceSync(ctx, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(dev), Value: v}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			// states reads the table topic until want(device state) holds.
			latest := map[string]*geofencepb.DeviceState{}
			await := func(dev string, want func(*geofencepb.DeviceState) bool) *geofencepb.DeviceState {
				t.Helper()
				pctx, cancel := context.WithTimeout(ctx, 120*time.Second)
				defer cancel()
				for {
					if st := latest[dev]; st != nil && want(st) {
						return st
					}
					f := tail.PollFetches(pctx)
					if pctx.Err() != nil {
						t.Fatalf("%s: state never came (last %v)", dev, latest[dev])
					}
					for _, r := range f.Records() {
						if st, err := tablecodec.DecodeState[geofencepb.DeviceState](r.Value); err == nil && st != nil {
							latest[string(r.Key)] = st
						}
					}
				}
			}

			// One device per partition, each applied by a, which caches them.
			devs := map[int32]string{}
			for i := 0; len(devs) < int(topology.DefaultPartitions); i++ {
				dev := fmt.Sprintf("dev-%03d", i)
				if p := topology.PartitionFor(dev, topology.DefaultPartitions); devs[p] == "" {
					devs[p] = dev
				}
			}
			a := startInstance(t, cl, standby)
			waitReady(t, a.proc)
			for _, dev := range devs {
				ping(dev, 2)
			}
			for _, dev := range devs {
				await(dev, func(st *geofencepb.DeviceState) bool { return st.GetLastHlc() == 2 })
			}

			// b takes some of a's partitions and applies a ping there.
			b := startInstance(t, cl, standby)
			waitReady(t, b.proc)
			deadline := time.Now().Add(60 * time.Second)
			var moved int32 = -1
			for moved < 0 {
				if time.Now().After(deadline) {
					t.Fatal("b never took a partition from a")
				}
				for _, p := range b.proc.Owned(ctx) {
					if !owns(a.proc, p) {
						moved = p
						break
					}
				}
				if moved < 0 {
					time.Sleep(20 * time.Millisecond) // polling the assignment, bounded by the deadline
				}
			}
			dev := devs[moved]
			ping(dev, 3)
			if st := await(dev, func(st *geofencepb.DeviceState) bool { return st.GetLastHlc() == 3 }); st.GetPings() != 2 {
				t.Fatalf("b applied hlc 3 on pings %d, want 2 (a's state)", st.GetPings()-1)
			}

			// b leaves: the partition goes back to a, whose cache predates hlc 3.
			b.stop()
			deadline = time.Now().Add(60 * time.Second)
			for !owns(a.proc, moved) {
				if time.Now().After(deadline) {
					t.Fatal("a never got the partition back")
				}
				time.Sleep(20 * time.Millisecond) // polling the assignment, bounded by the deadline
			}
			ping(dev, 4)
			st := await(dev, func(st *geofencepb.DeviceState) bool { return st.GetLastHlc() == 4 })
			if st.GetPings() != 3 || st.GetStalePings() != 0 {
				t.Fatalf("a applied hlc 4 on %v: want pings 3 (b's write), not a's cached state", st)
			}
		})
	}
}
