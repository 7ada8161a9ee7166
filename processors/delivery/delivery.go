package delivery

import (
	"context"
	"flag"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology"
)

// Names of the groups, their topics and the route.
const (
	Group              = "delivery"
	Table              = Group + "-table"
	TopicSubscriptions = "subscriptions"
	TopicOutcomes      = "delivery-outcomes"
	TopicDead          = "delivery-dead"
	Status             = "delivery-status"
	StatusTable        = Status + "-table"
	Route              = "GET /v1/subscriptions/{id}"
)

// Declaration is what the module adds to the topology: its topics, a doc
// line per group (the deliveries read the subscriptions whole, on every
// instance) and the boundaries of the deliveries' re-keyed writes.
func Declaration() topology.Extension {
	boundary := func(from, to, preserved, lost, lag string) topology.Boundary {
		return topology.Boundary{Processor: Group, From: from, To: to, Preserved: preserved, Lost: lost, Lag: lag}
	}
	var bs []topology.Boundary
	for _, from := range []string{geofence.TopicTriggers, topology.TimersTopicName(Group)} {
		bs = append(bs,
			boundary(from, TopicOutcomes,
				"one device's outcomes for one subscription stay in order (one device partition writes them, in the order they happened)",
				"order between devices of one subscription: their outcomes arrive from every device partition, interleaved",
				"a subscription's status lags its deliveries by the outcomes topic; counts are exact (effectively-once outputs)"),
			boundary(from, TopicSubscriptions,
				"none needed: a disable is one record, the subscription as it was with enabled=false",
				"order against fencectl's writes to the same subscription: the last record written wins",
				"every delivery instance learns the disable when it reads it from the topic; the instance that saw the 410 applies it at once"))
	}
	return topology.Extension{
		Topics: []topology.Topic{
			// One partition: few records, read whole by every instance.
			{Name: TopicSubscriptions, Key: "subscription_id", Value: "fencestream.delivery.v1.Subscription", Partitions: 1, Cleanup: topology.CleanupCompact,
				Doc: "webhook subscriptions: URL, secret, filters, enabled; tombstone removes; read whole by every delivery instance"},
			{Name: Table, Key: "device_id", Value: "fencestream.delivery.v1.DeviceDeliveries", Cleanup: topology.CleanupCompact,
				Doc: "each device's pending deliveries, a queue per subscription"},
			topology.TimersTopic(Group, "device_id", 0),
			{Name: TopicOutcomes, Key: "subscription_id", Value: "fencestream.delivery.v1.Outcome", Cleanup: topology.CleanupDelete,
				Doc: "what happened to each trigger for each subscription: queued, delivered, attempt failed, given up"},
			{Name: TopicDead, Key: "device_id", Value: "fencestream.delivery.v1.DeadDelivery", Cleanup: topology.CleanupDelete,
				Doc: "triggers given up for a subscription, with the reason"},
			{Name: StatusTable, Key: "subscription_id", Value: "fencestream.delivery.v1.SubscriptionStatus", Cleanup: topology.CleanupCompact,
				Doc: "per subscription: delivered, failed attempts, given up, pending, last success, last error"},
		},
		Processors: []topology.Processor{
			{Group: Group, Broadcast: []string{TopicSubscriptions},
				Doc: "posts each trigger to the webhooks it matches, signed, in device order, retried on the wall clock"},
			{Group: Status, Doc: "adds delivery outcomes up per subscription"},
		},
		Boundaries: bs,
	}
}

// Module is the delivery processor as binaries host it: its declaration, its
// flags (the Opt settings), both groups and the status route.
func Module(opts ...Opt) host.Module {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return host.Define(host.Module{
		Name:     Group,
		Declares: Declaration(),
		Groups: func(topo *topology.Topology) ([]group.Declarer, error) {
			gs, err := New(topo, nil, nil, opts...)
			if err != nil {
				return nil, err
			}
			return []group.Declarer{gs.Deliveries, gs.Status}, nil
		},
		Flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&cfg.attemptTimeout, "delivery-attempt-timeout", cfg.attemptTimeout, "longest wait for a webhook's answer")
			fs.DurationVar(&cfg.attemptWait, "delivery-attempt-wait", cfg.attemptWait, "how long a handler waits for an answer before the attempt goes on in the background (its answer applied by the device's timer)")
			fs.IntVar(&cfg.maxAttempts, "delivery-max-attempts", cfg.maxAttempts, "failed attempts after which a trigger is given up (delivery-dead, reason attempts)")
			fs.DurationVar(&cfg.maxAge, "delivery-max-age", cfg.maxAge, "wall time after a trigger's first attempt after which it is given up (reason max-age)")
			fs.DurationVar(&cfg.backoffBase, "delivery-backoff", cfg.backoffBase, "first retry delay; doubles per failure, with jitter, at least the endpoint's Retry-After")
			fs.DurationVar(&cfg.backoffMax, "delivery-backoff-max", cfg.backoffMax, "ceiling of the retry delay")
			fs.IntVar(&cfg.maxPending, "delivery-max-pending", cfg.maxPending, "triggers a device may have queued over all subscriptions; more are given up (reason queue-full)")
			fs.IntVar(&cfg.endpointConcurrency, "delivery-endpoint-concurrency", cfg.endpointConcurrency, "requests in flight per endpoint (origin) from this process")
			fs.IntVar(&cfg.breakerFailures, "delivery-breaker-failures", cfg.breakerFailures, "consecutive failures that open an endpoint's circuit breaker")
			fs.DurationVar(&cfg.breakerCooldown, "delivery-breaker-cooldown", cfg.breakerCooldown, "how long an open breaker sends nothing before one probe")
		},
		Validate: func() error { return cfg.validate() },
		Run: func(ctx context.Context, env host.Env) error {
			return Run(ctx, env, func(c *config) { *c = cfg }) // opts and the parsed flags
		},
		Routes: []host.Route{host.ViewRoute(Route, StatusTable, serveStatus)},
	})
}

// Run builds both groups, follows the subscriptions topic (unless
// SharedSubscriptions gave a set), and runs the groups once the
// subscriptions are loaded, until ctx ends.
func Run(ctx context.Context, env host.Env, opts ...Opt) error {
	log := env.Logger()
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	gs, err := New(env.Topology, log, env.Registerer, opts...)
	if err != nil {
		return err
	}
	dp, err := gs.Deliveries.Processor(ctx, env.Cluster, env.Group...)
	if err != nil {
		return err
	}
	sp, err := gs.Status.Processor(ctx, env.Cluster, env.Group...)
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	eg, ctx := errgroup.WithContext(ctx)
	if cfg.subs == nil {
		m, err := newMetrics(env.Registerer)
		if err != nil {
			return err
		}
		eg.Go(func() error {
			return follow(ctx, env.Cluster, TopicSubscriptions, gs.Subscriptions, log, m, func() { close(ready) })
		})
	} else {
		close(ready)
	}
	eg.Go(func() error { return host.RunProcessors(ctx, env, Group, ready, dp, sp) })
	return eg.Wait()
}

func serveStatus(v *view.View[deliverypb.SubscriptionStatus, *deliverypb.SubscriptionStatus], w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, err := v.Get(id)
	if err != nil {
		host.WriteError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if st == nil {
		host.WriteError(w, http.StatusNotFound, "no deliveries for subscription "+clip(id))
		return
	}
	host.WriteJSON(w, http.StatusOK, StatusJSON(st))
}

// StatusJSON is the route's answer for a subscription's status.
func StatusJSON(st *deliverypb.SubscriptionStatus) map[string]any {
	at := func(ms int64) any {
		if ms == 0 {
			return nil
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"subscription": st.GetSubscriptionId(), "delivered": st.GetDelivered(), "failed_attempts": st.GetFailedAttempts(),
		"dead": st.GetDead(), "pending": st.GetPending(), "last_success": at(st.GetLastSuccessMs()),
		"last_error": st.GetLastError(), "last_error_at": at(st.GetLastErrorMs()),
	}
}
