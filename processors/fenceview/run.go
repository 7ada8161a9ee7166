package fenceview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
	"github.com/fencestream/fencestream/topology/produce"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure Run.
type Options struct {
	// Cluster is how to reach Kafka (required).
	Cluster cluster.Config
	// Listener is an open listener the HTTP server takes over (required);
	// Run closes it when it returns.
	Listener net.Listener
	// Partitions is the partition count of the keyed topics (default
	// topology.DefaultPartitions, 24). The broker must agree.
	Partitions int32
	// Catalogue, when set, is a fence catalogue the caller keeps up to date
	// (the all-in-one runner shares the debouncer's); CatalogueReady is then
	// closed once it has loaded (nil: already loaded). When nil, Run follows
	// geofence.TopicFences into a catalogue of its own.
	Catalogue      *fences.Catalogue
	CatalogueReady <-chan struct{}
	// NoCreateTopics makes start-up only check the broker's topics against
	// the topology instead of creating missing ones (default: create
	// missing, refuse mismatches).
	NoCreateTopics bool
	// Log defaults to slog.Default().
	Log *slog.Logger
	// ServerOpts are passed to NewServer (WithTopology is set by Run).
	ServerOpts []Opt
	// ShutdownTimeout bounds the graceful HTTP shutdown (default 5s).
	ShutdownTimeout time.Duration
	// HTTP bounds the server: timeouts, connection cap, Host allow-list
	// (httpguard's defaults when empty).
	HTTP []httpguard.Opt
	// StateDir, when set, keeps the views' tables in the kit's store
	// (Pebble) under it, one subdirectory per table, so a restart catches up
	// from the stored offsets instead of rebuilding (default: in memory,
	// rebuilt at every start).
	StateDir string
	// Topology is the binary's composed topology (host.Compose): what start-up
	// checks on the broker and /v1/topology shows (default: the geofencing
	// topology at Partitions).
	Topology *topology.Topology
	// Routes are the routes of the modules the binary links (host.Routes),
	// served beside fenceview's own, each from its own view.
	Routes []host.Route
	// Registerer is where fenceview's metrics go (default
	// prometheus.DefaultRegisterer).
	Registerer prometheus.Registerer
	// MaxStaleness is how old the views' data may be (not confirmed current
	// with the brokers) before /readyz and reads answer 503 (default
	// DefaultMaxStaleness); below it every answer carries its age
	// (DataAgeHeader).
	MaxStaleness time.Duration
	// Shard, when set, makes this replica hold only Shard.Partitions of the
	// debouncer, occupancy and visit tables (the kit's partial views) and read
	// every other partition from the peer holding it (default: nil, Goka views
	// of every partition). Views of module routes stay whole.
	Shard *Shard
	// SubscriptionWrites serves PUT and DELETE /v1/subscriptions/{id} and
	// POST /v1/subscriptions/{id}/disable, writing the topology's
	// subscriptions topic (delivery.TopicSubscriptions, which it must
	// declare). Default false: the API is read-only and those answer 405.
	SubscriptionWrites bool
}

func (o *Options) validate() error {
	if o.Listener == nil {
		return errors.New("fenceview: no listener")
	}
	if err := o.Cluster.Validate(); err != nil {
		return fmt.Errorf("fenceview: cluster: %w", err)
	}
	if o.Partitions < 0 {
		return fmt.Errorf("fenceview: partitions %d must be positive", o.Partitions)
	}
	if o.Catalogue == nil && o.CatalogueReady != nil {
		return errors.New("fenceview: CatalogueReady without Catalogue")
	}
	if o.Shard != nil {
		n := o.Partitions
		if n == 0 {
			n = topology.DefaultPartitions
		}
		if err := o.Shard.Validate(n); err != nil {
			return fmt.Errorf("fenceview: %w", err)
		}
	}
	return nil
}

// Run is the whole fenceview service in-process: it checks (or creates) the
// topology's topics on the broker, then runs the views of the debouncer and
// occupancy tables, the fence catalogue follower (unless Options.Catalogue is
// given), the live trigger consumer, and the HTTP server on
// Options.Listener, until ctx ends (then it shuts the server down gracefully
// and returns nil) or one of them fails (then it returns that error). Open
// trigger streams end when ctx ends. Reads answer 503 until every view has
// recovered, the catalogue has loaded and the trigger feed is positioned.
func Run(ctx context.Context, o Options) error {
	if err := o.validate(); err != nil {
		if o.Listener != nil {
			_ = o.Listener.Close()
		}
		return err
	}
	defer o.Listener.Close()
	if o.Partitions == 0 {
		o.Partitions = topology.DefaultPartitions
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.Cluster.ClientID == "" {
		o.Cluster.ClientID = "fenceview"
	}
	log := o.Log
	// The composed topology: the linked modules' processors show in
	// /v1/topology and their topics are checked too.
	topo := o.Topology
	if topo == nil {
		topo = geofence.Topology(geofence.WithPartitions(o.Partitions))
	}
	if _, err := group.CheckBroker(ctx, o.Cluster, topo, !o.NoCreateTopics); err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	cat, catReady := o.Catalogue, o.CatalogueReady
	if cat == nil {
		cat = fences.New()
		follower := fences.NewFollower(o.Cluster, geofence.TopicFences, cat, log, o.Registerer)
		catReady = follower.Ready()
		g.Go(func() error { return follower.Run(ctx) })
	}
	var vopts []view.Opt
	if o.StateDir != "" {
		vopts = append(vopts, view.StateDir(o.StateDir))
	}
	routeOpts := vopts
	held := make([]int32, 0, o.Partitions)
	for p := range o.Partitions {
		held = append(held, p)
	}
	var rt *router
	if o.Shard != nil {
		var err error
		if rt, err = newRouter(o.Shard, o.Partitions, &http.Client{}); err != nil {
			return fmt.Errorf("fenceview: %w", err)
		}
		held = o.Shard.Partitions
	}
	// The kit's view even for one replica of every partition: measured at
	// 1,000,000 devices it starts cold in 33 s at 236 MB peak RSS where
	// Goka's view took 52 s and 486 MB (BENCHMARKS.md).
	vopts = append(vopts, view.Partitions(held...))
	views, err := NewViewSources(o.Cluster, catReady, vopts...)
	if err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	var extra []Opt
	for _, r := range o.Routes {
		h, run, err := r.Build(host.RouteEnv{Cluster: o.Cluster, View: routeOpts, Log: log})
		if err != nil {
			return fmt.Errorf("fenceview: route %s: %w", r.Pattern, err)
		}
		extra = append(extra, WithRoute(r.Pattern, h))
		if run != nil {
			g.Go(func() error { return run(ctx) })
		}
	}
	visitsView, err := NewVisitsView(o.Cluster, vopts...)
	if err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	views.Registerer = o.Registerer
	views.MaxStaleness = o.MaxStaleness
	if rt != nil {
		views.shard(rt)
		visitsView.shard(rt)
	}
	// Every replica serves the records it holds, so a sharded peer can read them.
	extra = append(extra, WithRoute("GET "+recordsPath+"{table}", recordsHandler(map[string]recordServer{
		geofence.TopicDebouncer:       viewRecords[geofencepb.DeviceState, *geofencepb.DeviceState]{views.Devices, o.Partitions},
		geofence.TopicOccupancy:       viewRecords[geofencepb.Occupancy, *geofencepb.Occupancy]{views.Occupancy, o.Partitions},
		geofence.TopicVisitStatsTable: viewRecords[visitspb.FenceVisits, *visitspb.FenceVisits]{visitsView.v, o.Partitions},
	}, held)))
	if o.SubscriptionWrites {
		tp, ok := topo.Topic(delivery.TopicSubscriptions)
		if !ok {
			return fmt.Errorf("fenceview: subscription writes: topology %s does not declare %s (link the delivery module)", topo.Name, delivery.TopicSubscriptions)
		}
		popts := []produce.Opt{produce.WithLogger(log)}
		if o.Registerer != nil {
			popts = append(popts, produce.WithRegisterer(o.Registerer))
		}
		st, err := NewSubscriptionTopic(o.Cluster, tp, popts...)
		if err != nil {
			return fmt.Errorf("fenceview: %w", err)
		}
		defer st.Close()
		extra = append(extra, WithSubscriptionWrites(st))
	}
	feed := NewFeed(0)
	consumer, err := NewTriggerConsumer(o.Cluster, feed, log, o.Registerer)
	if err != nil {
		return err
	}
	srv, err := NewServer(Sources{
		Devices:   views,
		Occupancy: views,
		Fences:    cat,
		Ready:     AllReady(views, visitsView, ChanReady(consumer.Ready(), "live trigger feed is connecting")),
		Feed:      feed,
		Visits:    visitsView,
		Age:       views,
	}, append(append(append([]Opt{WithLogger(log)}, o.ServerOpts...), extra...), WithTopology(topo))...)
	if err != nil {
		return err
	}
	g.Go(func() error { return views.Run(ctx) })
	g.Go(func() error { return visitsView.Run(ctx) })
	g.Go(func() error {
		var reg []group.Opt
		if o.Registerer != nil {
			reg = append(reg, group.Registerer(o.Registerer))
		}
		return group.RunSkewReporter(ctx, o.Cluster, []string{geofence.TopicPings, geofence.TopicTriggers, geofence.TopicOccupancyChanges}, 30*time.Second, log, reg...)
	})
	g.Go(func() error { return consumer.Run(ctx) })
	g.Go(func() error { return Serve(ctx, o.Listener, srv, o.ShutdownTimeout, o.HTTP...) })
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
	if o.Shard != nil {
		holds = "partitions " + FormatPartitions(o.Shard.Partitions) + fmt.Sprintf(" (%d peers)", len(o.Shard.Peers))
	}
	log.Info("fenceview listening", "url", "http://"+o.Listener.Addr().String()+"/", "brokers", o.Cluster.Brokers, "partitions", o.Partitions, "holds", holds, "state_dir", o.StateDir, "subscription_writes", o.SubscriptionWrites)
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
