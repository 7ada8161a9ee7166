package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/topology"
)

// The DSL count's app and its one group (the Count's; no routing group, as
// GroupByKey's aggregation reads the pings itself).
const (
	dslApp   = "bench-dsl"
	dslGroup = "bench-dsl-count"
	dslTable = dslGroup + "-table"
)

// dslCountApp builds the stream DSL's count per key over the pings, on the
// bench's topology with the count's table declared (the one topic a Count
// needs that the geofencing topology lacks).
func (e *env) dslCountApp() (*streams.App, error) {
	topo := e.topo.Clone()
	if err := topo.Extend(topology.Extension{Name: dslApp, Topics: []topology.Topic{{
		Name: dslTable, Key: "device_id", Value: "google.protobuf.Int64Value", Cleanup: topology.CleanupCompact,
		Doc: "fencectl bench: pings counted per device by the stream DSL",
	}}}); err != nil {
		return nil, err
	}
	b := streams.New(topo, dslApp, e.log)
	b.Stream[geofencepb.Ping](geofence.TopicPings).GroupByKey().Count(dslGroup)
	return b.Build()
}

// dslCount is the bare counter's work (b) written in the stream DSL and run
// as a kit group with the kit processors' options: the DSL's and the kit's
// cost over bare Goka, on the same pings and storage. It is done when every
// ping is processed, and fails unless the table then holds each device's
// exact count.
func (e *env) dslCount(ctx context.Context) (Stage, error) {
	app, err := e.dslCountApp()
	if err != nil {
		return Stage{}, err
	}
	if gs := app.Groups(); len(gs) != 1 || gs[0].Name() != dslGroup {
		return Stage{}, fmt.Errorf("the DSL count compiled to %d groups, want only %s", len(gs), dslGroup)
	}
	p, err := app.Groups()[0].Processor(ctx, e.cl, append([]group.Opt{group.StateDir(e.stateDir("dsl-count"))}, e.groupOpts()...)...)
	if err != nil {
		return Stage{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	st, err := waitCount(ctx, errc, e.cfg.Pings, func() int { n, _ := p.Processed(geofence.TopicPings); return n })
	if err != nil {
		return st, err
	}
	return st, e.checkCounts(ctx, dslTable)
}

// checkCounts reads table (a kit group table of Int64Value per device) from
// the start until every device's latest count is the number of throughput
// pings it sent. A count above that fails at once; one below fails when the
// table's writes have not caught up within a minute.
func (e *env) checkCounts(ctx context.Context, table string) error {
	want := map[string]int64{}
	for _, p := range e.pings[:e.cfg.Pings] {
		want[p.DeviceId]++
	}
	got := make(map[string]int64, len(want))
	wrong := len(want) // devices whose latest count is not yet want's
	kopts, err := e.cl.Kgo()
	if err != nil {
		return err
	}
	c, err := kgo.NewClient(append(kopts, kgo.ConsumeTopics(table), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for wrong > 0 {
		f := c.PollFetches(ctx)
		if ctx.Err() != nil {
			for dev, n := range want {
				if got[dev] != n {
					return fmt.Errorf("table %s: %d of %d devices' counts wrong after a minute (device %s: %d, sent %d)", table, wrong, len(want), dev, got[dev], n)
				}
			}
			return ctx.Err()
		}
		var bad error
		f.EachRecord(func(r *kgo.Record) {
			dev := string(r.Key)
			n, err := tablecodec.DecodeState[wrapperspb.Int64Value](r.Value)
			switch {
			case bad != nil:
				return
			case err != nil:
				bad = fmt.Errorf("table %s: device %s: %w", table, dev, err)
				return
			case n.GetValue() > want[dev]:
				bad = fmt.Errorf("table %s: device %s counted %d pings, sent %d", table, dev, n.GetValue(), want[dev])
				return
			}
			was := got[dev] == want[dev]
			got[dev] = n.GetValue()
			switch now := got[dev] == want[dev]; {
			case was && !now:
				wrong++
			case !was && now:
				wrong--
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}
