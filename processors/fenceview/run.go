package fenceview

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/httpguard"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/produce"
)

// Run is the whole fenceview service in-process: it checks (or creates) the
// topology's topics on the broker, then runs the views of the debouncer and
// occupancy tables, the fence catalogue follower (unless Catalogue is
// given), the live trigger consumer, and the HTTP server on l (which Run
// closes when it returns), until ctx ends (then it shuts the server down
// gracefully and returns nil) or one of them fails (then it returns that
// error). Open trigger streams end when ctx ends. Reads answer 503 until
// every view has recovered, the catalogue has loaded and the trigger feed is
// positioned. opts are Run's options and the server's (Opt).
func Run(ctx context.Context, cl cluster.Config, l net.Listener, opts ...Opt) error {
	o := newConfig(atRun, opts)
	if err := o.validateRun(); err != nil {
		if l != nil {
			_ = l.Close()
		}
		return fmt.Errorf("fenceview: %w", err)
	}
	if l == nil {
		return errors.New("fenceview: no listener")
	}
	defer l.Close()
	if err := cl.Validate(); err != nil {
		return fmt.Errorf("fenceview: cluster: %w", err)
	}
	if cl.ClientID == "" {
		cl.ClientID = "fenceview"
	}
	log := o.log
	// The composed topology: the linked modules' processors show in
	// /v1/topology and their topics are checked too.
	topo := o.topo
	if topo == nil {
		topo = geofence.Topology(geofence.Partitions(o.partitions))
	}
	if _, err := group.CheckBroker(ctx, cl, topo, !o.noCreate); err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	cat, catReady := o.cat, o.catReady
	if cat == nil {
		cat = fences.New()
		follower := fences.NewFollower(cl, geofence.TopicFences, cat, log, o.registerer)
		catReady = follower.Ready()
		g.Go(func() error { return follower.Run(ctx) })
	}
	var vopts []view.Opt
	if o.stateDir != "" {
		vopts = append(vopts, view.StateDir(o.stateDir))
	}
	routeOpts := vopts
	held := make([]int32, 0, o.partitions)
	for p := range o.partitions {
		held = append(held, p)
	}
	var rt *router
	if o.shard != nil {
		var err error
		if rt, err = newRouter(o.shard, o.partitions, &http.Client{}); err != nil {
			return fmt.Errorf("fenceview: %w", err)
		}
		held = o.shard.Partitions
	}
	// The kit's view even for one replica of every partition: measured at
	// 1,000,000 devices it starts cold in 33 s at 236 MB peak RSS where
	// Goka's view took 52 s and 486 MB (BENCHMARKS.md).
	vopts = append(vopts, view.Partitions(held...))
	views, err := NewViewSources(cl, catReady, vopts...)
	if err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	var extra []Opt
	for _, r := range o.hostRoutes {
		h, run, err := r.Build(host.RouteEnv{Cluster: cl, View: routeOpts, Log: log})
		if err != nil {
			return fmt.Errorf("fenceview: route %s: %w", r.Pattern, err)
		}
		extra = append(extra, Route(r.Pattern, h))
		if run != nil {
			g.Go(func() error { return run(ctx) })
		}
	}
	visitsView, err := NewVisitsView(cl, vopts...)
	if err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	views.Registerer = o.registerer
	views.MaxStaleness = o.maxStaleness
	if rt != nil {
		views.shard(rt)
		visitsView.shard(rt)
	}
	// Every replica serves the records it holds, so a sharded peer can read them.
	extra = append(extra, Route("GET "+recordsPath+"{table}", recordsHandler(map[string]recordServer{
		geofence.TopicDebouncer:       viewRecords[geofencepb.DeviceState, *geofencepb.DeviceState]{views.Devices, o.partitions},
		geofence.TopicOccupancy:       viewRecords[geofencepb.Occupancy, *geofencepb.Occupancy]{views.Occupancy, o.partitions},
		geofence.TopicVisitStatsTable: viewRecords[visitspb.FenceVisits, *visitspb.FenceVisits]{visitsView.v, o.partitions},
	}, held)))
	if o.subTopic {
		tp, ok := topo.Topic(delivery.TopicSubscriptions)
		if !ok {
			return fmt.Errorf("fenceview: subscription writes: topology %s does not declare %s (link the delivery module)", topo.Name, delivery.TopicSubscriptions)
		}
		st, err := NewSubscriptionTopic(cl, tp, produce.Logger(log), produce.Registerer(o.registerer))
		if err != nil {
			return fmt.Errorf("fenceview: %w", err)
		}
		defer st.Close()
		extra = append(extra, SubscriptionWrites(st))
	}
	feed := NewFeed(0)
	consumer, err := NewTriggerConsumer(cl, feed, log, o.registerer)
	if err != nil {
		return err
	}
	sc := o // the server's options, with what Run built
	sc.topo = topo
	for _, e := range extra {
		e(&sc)
	}
	srv, err := newServer(Sources{
		Devices:   views,
		Occupancy: views,
		Fences:    cat,
		Ready:     AllReady(views, visitsView, ChanReady(consumer.Ready(), "live trigger feed is connecting")),
		Feed:      feed,
		Visits:    visitsView,
		Age:       views,
	}, sc)
	if err != nil {
		return err
	}
	g.Go(func() error { return views.Run(ctx) })
	g.Go(func() error { return visitsView.Run(ctx) })
	g.Go(func() error {
		return group.RunSkewReporter(ctx, cl, []string{geofence.TopicPings, geofence.TopicTriggers, geofence.TopicOccupancyChanges}, 30*time.Second, log, group.Registerer(o.registerer))
	})
	g.Go(func() error { return consumer.Run(ctx) })
	g.Go(func() error { return Serve(ctx, l, srv, o.shutdownTimeout, o.http...) })
	g.Go(func() error { // log readiness once; views are read only through ViewSources
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if ok, _ := srv.src.Ready.Ready(); ok {
					log.Info("fenceview ready: views recovered, catalogue loaded, trigger feed live")
					return nil
				}
			}
		}
	})
	holds := "every partition"
	if o.shard != nil {
		holds = "partitions " + FormatPartitions(o.shard.Partitions) + fmt.Sprintf(" (%d peers)", len(o.shard.Peers))
	}
	log.Info("fenceview listening", "url", "http://"+l.Addr().String()+"/", "brokers", cl.Brokers, "partitions", o.partitions, "holds", holds, "state_dir", o.stateDir, "subscription_writes", o.subTopic)
	return g.Wait()
}

// Serve serves h on l until ctx ends, then shuts down gracefully within
// timeout, bounded by httpguard (its defaults, then opts): timeouts, a
// connection cap, a Host allow-list. Request contexts derive from ctx, so
// long-lived responses (trigger streams) end when ctx does instead of holding
// the shutdown up.
func Serve(ctx context.Context, l net.Listener, h http.Handler, timeout time.Duration, opts ...httpguard.Opt) error {
	if err := httpguard.Serve(ctx, l, h, append([]httpguard.Opt{httpguard.ShutdownTimeout(timeout)}, opts...)...); err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	return nil
}
