package fenceview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/fenceview"
	"github.com/fencestream/fencestream/processors/fleet"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/occupancy"
)

// TestPipelinePingsToAPI runs the whole pipeline on the embedded broker: a
// seeded fleet's pings go in through a franz-go (murmur2) producer, the real
// debouncer and occupancy processors turn them into triggers and counts, and
// fenceview's API answers device state and occupancy that match the fleet's
// ground truth, while its live stream carries the triggers.
func TestPipelinePingsToAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline on a broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, kc := startBroker(t, ctx)
	topo := geofence.Topology(geofence.Partitions(e2ePartitions))
	quiet := slog.New(slog.DiscardHandler)

	demo := fences.Demo()
	for i := range demo {
		pb, err := demo[i].ToProto()
		if err != nil {
			t.Fatal(err)
		}
		produce(t, ctx, kc, geofence.TopicFences, demo[i].ID, pb, 1)
	}
	cat := fences.New()
	if err := cat.Apply(1, demo, nil); err != nil {
		t.Fatal(err)
	}
	sim, err := fleet.New(fleet.Config{Seed: 7, Moving: 40, NoiseSigmaM: 5, Interval: 2 * time.Second, Duration: 12 * time.Minute, StampHLC: true}, demo)
	if err != nil {
		t.Fatal(err)
	}
	truth := sim.Truth()
	if len(truth.FinalInside) == 0 {
		t.Fatal("the fleet ends with every fence empty: the test proves nothing")
	}

	// The debouncer (no wall-clock sweep: the fleet's event time is not now)
	// and the occupancy processor.
	d, err := debounce.New(topo, cat, debounce.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithCancel(context.Background())
	dproc, err := d.Group().Processor(pctx, cl, group.StateDir(t.TempDir()))
	if err != nil {
		pcancel()
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- dproc.Run(pctx) }()
	go func() {
		done <- occupancy.Run(pctx, host.Env{Cluster: cl, Topology: topo, Log: quiet, Group: []group.Opt{group.StateDir(t.TempDir())}}, occupancy.LagInterval(0))
	}()
	t.Cleanup(func() {
		pcancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("processor: %v", err)
			}
		}
	})

	base := startService(t, ctx, cl)
	eventually(t, base+"/readyz", "readiness", func(s int, _ string) bool { return s == http.StatusOK })
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	events, _ := openStream(t, sctx, base+"/v1/triggers/stream")

	pings := sim.Pings()
	last := map[string]*geofencepb.Ping{}
	count := map[string]uint64{}
	codec := codecs.For[geofencepb.Ping]()
	recs := make([]*kgo.Record, 0, len(pings))
	for _, p := range pings {
		v, err := codec.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: geofence.TopicPings, Key: []byte(p.DeviceId), Value: v})
		last[p.DeviceId] = p
		count[p.DeviceId]++
	}
	if err := kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pings of %d devices, %d true transitions, %d fences occupied at the end", len(pings), len(last), len(truth.Transitions), len(truth.FinalInside))

	// Occupancy: every fence's count and members equal the ground truth.
	get := func(path string, out any) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				return 0, err.Error()
			}
		}
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mismatch := ""
		for _, f := range demo {
			var fd fenceview.FenceDetail
			if s, body := get("/v1/fences/"+f.ID, &fd); s != http.StatusOK {
				mismatch = fmt.Sprintf("%s: %d %s", f.ID, s, body)
				break
			}
			want := truth.FinalInside[f.ID]
			if fd.Count != int64(len(want)) || !slices.Equal(fd.Devices, want) && len(fd.Devices)+len(want) > 0 {
				mismatch = fmt.Sprintf("%s: count %d inside %v, truth %v", f.ID, fd.Count, fd.Devices, want)
				break
			}
		}
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("occupancy never matched the ground truth; last mismatch: %s", mismatch)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Devices: every ping applied, the last one's time and HLC, and the
	// debouncer holding every true final stay as confirmed inside.
	inside := map[string][]string{}
	for fid, devs := range truth.FinalInside {
		for _, dev := range devs {
			inside[dev] = append(inside[dev], fid)
		}
	}
	deadline = time.Now().Add(time.Minute)
	for dev, p := range last {
		for {
			var dd fenceview.DeviceDetail
			s, body := get("/v1/devices/"+dev, &dd)
			ok := s == http.StatusOK && dd.Pings == count[dev] && dd.LastHLC == p.GetHlc() && dd.LastEventTimeMs == p.GetDeviceTimeMs()
			if ok {
				phase := map[string]string{}
				for _, fs := range dd.Fences {
					phase[fs.FenceID] = fs.Phase
				}
				for _, fid := range inside[dev] {
					if phase[fid] != "INSIDE" && phase[fid] != "EXITING" {
						t.Fatalf("%s is truly inside %s at the end, debouncer says %q", dev, fid, phase[fid])
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("device %s: %d %s; want %d pings, hlc %d, time %d", dev, s, body, count[dev], p.GetHlc(), p.GetDeviceTimeMs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The live stream carried the debouncer's triggers.
	ev := nextEvent(t, events, "trigger")
	var tj fenceview.TriggerJSON
	if err := json.Unmarshal([]byte(ev.data), &tj); err != nil {
		t.Fatal(err)
	}
	if _, known := last[tj.DeviceID]; !known || !strings.HasPrefix(tj.TriggerID, tj.DeviceID) || tj.Type == "" {
		t.Fatalf("stream trigger %+v", tj)
	}
}
