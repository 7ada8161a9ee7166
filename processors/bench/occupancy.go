package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology/hlc"
)

// occupancyFences is how many of the catalogue's fences the occupancy
// stage's triggers go to (issue 16 measured 7 demo fences).
const occupancyFences = 7

// triggers makes cfg.Triggers well-formed triggers for cfg.TriggerDevices
// devices: each device enters then leaves one fence in turn, with rising
// HLCs, as the debouncer would emit them.
func (e *env) triggers() ([]*kgo.Record, error) {
	all := e.cat.Snapshot().All()
	if len(all) == 0 {
		return nil, fmt.Errorf("no fences for the occupancy stage")
	}
	fs := all[:min(len(all), occupancyFences)]
	codec := codecs.For[geofencepb.Trigger]()
	const base = int64(1_767_225_600_000) // 2026-01-01
	recs := make([]*kgo.Record, e.cfg.Triggers)
	for i := range recs {
		d := i % e.cfg.TriggerDevices
		step := i / e.cfg.TriggerDevices // this device's step
		device := fmt.Sprintf("bench-dev-%06d", d)
		fence := fs[(d+step/2)%len(fs)].ID
		typ := geofencepb.TriggerType_TRIGGER_TYPE_ENTER
		if step%2 == 1 {
			typ = geofencepb.TriggerType_TRIGGER_TYPE_EXIT
		}
		at := base + int64(step)*60_000 + int64(d)
		h := hlc.Pack(at, 0)
		v, err := codec.Marshal(&geofencepb.Trigger{
			TriggerId: geofence.TriggerID(device, fence, typ, h), DeviceId: device, FenceId: fence,
			Type: typ, Reason: geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED,
			EventTimeMs: at, Hlc: h, CatalogueVersion: e.cat.Version(),
		})
		if err != nil {
			return nil, err
		}
		recs[i] = &kgo.Record{Topic: geofence.TopicTriggers, Key: []byte(device), Value: v}
	}
	return recs, nil
}

// occupancyAlone runs the occupancy processor alone over cfg.Triggers
// triggers produced straight to fence-triggers beforehand, timed until it
// has applied every one (its loop drained too).
func (e *env) occupancyAlone(ctx context.Context) (Stage, error) {
	if err := e.reset(ctx); err != nil {
		return Stage{}, err
	}
	recs, err := e.triggers()
	if err != nil {
		return Stage{}, err
	}
	if err := e.newProducer(); err != nil {
		return Stage{}, err
	}
	e.progress("producing %d triggers for %d devices", len(recs), e.cfg.TriggerDevices)
	if err := e.kc.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return Stage{}, err
	}
	before, err := occupancyResults()
	if err != nil {
		return Stage{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	var occP occStarted
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- occupancy.Run(ctx, host.Env{
			Cluster: e.cl, Topology: e.topo, Log: e.log, Group: append([]group.Opt{group.StateDir(e.stateDir("occupancy-alone"))}, e.groupOpts()...),
			Started: occP.store,
		}, occupancy.LagInterval(0))
	}()
	defer func() { cancel(); <-done }()
	var t timer
	deadline := time.Now().Add(stageLimit)
	for {
		if occP.ok() {
			p := occP.load()
			n, _ := p.members.Processed(geofence.TopicTriggers)
			// Timed once both groups run, as the other stages are timed
			// from their first record: not the second group's start. The
			// changes sent before then are counted in the window, so this
			// errs on the slow side.
			if c, _ := p.counts.Processed(geofence.TopicOccupancyChanges); c > 0 {
				t.observe(n)
			}
			if n >= len(recs) {
				lag, err := e.occupancyBacklog(ctx, p, nil)
				if err != nil {
					return Stage{}, err
				}
				if lag == 0 {
					st := t.stage(n)
					// A fast stage must also be right: every trigger is a
					// real transition, applied exactly once.
					after, err := occupancyResults()
					if err != nil {
						return Stage{}, err
					}
					if applied := after["applied"] - before["applied"]; applied != float64(len(recs)) {
						return Stage{}, fmt.Errorf("occupancy applied %.0f of %d triggers (results before %v, after %v)", applied, len(recs), before, after)
					}
					if c := after["changes/applied"] - before["changes/applied"]; c != float64(len(recs)) {
						return Stage{}, fmt.Errorf("occupancy counted %.0f changes of %d triggers (results before %v, after %v)", c, len(recs), before, after)
					}
					return st, nil
				}
			}
		}
		select {
		case err := <-errc:
			return Stage{}, fmt.Errorf("occupancy stopped: %v", err)
		case <-ctx.Done():
			return Stage{}, ctx.Err()
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			return Stage{}, fmt.Errorf("occupancy not done after %v", stageLimit)
		}
	}
}

// occupancyResults reads occupancy's trigger and change counters
// (fencestream_occupancy_triggers_total by result, and
// fencestream_occupancy_changes_total by "changes/"+result, on the default
// registry).
func occupancyResults() (map[string]float64, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("reading occupancy's counters: %w", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		prefix := ""
		switch mf.GetName() {
		case "fencestream_occupancy_triggers_total":
		case "fencestream_occupancy_changes_total":
			prefix = "changes/"
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[prefix+l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out, nil
}
