package delivery

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/topology"
)

// Handler contexts of the two groups.
type (
	DeviceContext = group.Context[deliverypb.DeviceDeliveries, *deliverypb.DeviceDeliveries]
	StatusContext = group.Context[deliverypb.SubscriptionStatus, *deliverypb.SubscriptionStatus]
)

// Groups are the module's two groups, ready to build processors from.
type Groups struct {
	Deliveries *group.Group[deliverypb.DeviceDeliveries, *deliverypb.DeviceDeliveries]
	Status     *group.Group[deliverypb.SubscriptionStatus, *deliverypb.SubscriptionStatus]
	// Subscriptions is what the deliveries match triggers against: the
	// SharedSubscriptions set, else a new one the module's Run follows.
	Subscriptions *Subscriptions
}

// deliverer holds the handles and the sender: they belong to the groups New
// built, never to package variables.
type deliverer struct {
	cfg      config
	subs     *Subscriptions
	send     *sender
	flights  *flights
	m        *metrics
	outcomes group.Out[deliverypb.Outcome, *deliverypb.Outcome]
	dead     group.Out[deliverypb.DeadDelivery, *deliverypb.DeadDelivery]
	disable  group.Out[deliverypb.Subscription, *deliverypb.Subscription]
}

// retryTimer is the name of a device's one wall-clock timer: the earliest
// time one of its queue heads is due.
const retryTimer = "retry"

// maxRounds bounds the rounds of one handler call per queue: a backlog
// drains round by round (each a request per subscription, in parallel,
// waited for at most AttemptWait), the rest on the timer. Rounds also
// stop once a call has spent the attempt timeout, so one call holds its
// partition at most the attempt timeout plus the attempt wait.
const maxRounds = 32

// New defines both groups over topo, which must include Declaration (Compose
// with Module does that); metrics go to reg (nil: a private registry).
func New(topo *topology.Topology, log *slog.Logger, reg prometheus.Registerer, opts ...Opt) (Groups, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return Groups{}, fmt.Errorf("delivery: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return Groups{}, fmt.Errorf("delivery: metrics: %w", err)
	}
	subs := cmp.Or(cfg.subs, NewSubscriptions())
	d := &deliverer{cfg: cfg, subs: subs, send: newSender(&cfg, m), flights: newFlights(), m: m}
	g := group.New[deliverypb.DeviceDeliveries](topo, Group, log)
	group.Stream(g, geofence.TopicTriggers, d.trigger)
	group.OnTimer(g, d.timer)
	d.outcomes = group.Output[deliverypb.Outcome](g, TopicOutcomes)
	d.dead = group.Output[deliverypb.DeadDelivery](g, TopicDead)
	d.disable = group.Output[deliverypb.Subscription](g, TopicSubscriptions)

	s := group.New[deliverypb.SubscriptionStatus](topo, Status, log)
	group.Stream(s, TopicOutcomes, func(c *StatusContext, o *deliverypb.Outcome) error { return applyOutcome(c, o, m) })
	return Groups{Deliveries: g, Status: s, Subscriptions: subs}, nil
}

// trigger queues tr for every enabled subscription it matches, then
// attempts what is due.
func (d *deliverer) trigger(c *DeviceContext, tr *geofencepb.Trigger) error {
	if tr.GetDeviceId() != c.Key() || tr.GetTriggerId() == "" {
		return fmt.Errorf("trigger %q of device %q under key %q", clip(tr.GetTriggerId()), clip(tr.GetDeviceId()), clip(c.Key()))
	}
	st := cmp.Or(c.State(), &deliverypb.DeviceDeliveries{})
	for _, sub := range d.subs.Matching(tr) {
		d.queue(c, st, sub.GetId(), tr)
	}
	return d.pump(c, st)
}

// timer attempts what is due once a retry is.
func (d *deliverer) timer(c *DeviceContext, _ group.Timer) error {
	st := c.State()
	if st == nil {
		return nil
	}
	return d.pump(c, st)
}

func (d *deliverer) queue(c *DeviceContext, st *deliverypb.DeviceDeliveries, subID string, tr *geofencepb.Trigger) {
	n := 0
	for _, q := range st.Queues {
		n += len(q.Items)
	}
	if n >= d.cfg.maxPending {
		d.giveUp(c, subID, &deliverypb.Pending{Trigger: tr}, "queue-full",
			fmt.Sprintf("the device has %d triggers pending (bound %d)", n, d.cfg.maxPending))
		return
	}
	i := slices.IndexFunc(st.Queues, func(q *deliverypb.Queue) bool { return q.GetSubscriptionId() == subID })
	if i < 0 {
		st.Queues = append(st.Queues, &deliverypb.Queue{SubscriptionId: subID})
		i = len(st.Queues) - 1
	}
	st.Queues[i].Items = append(st.Queues[i].Items, &deliverypb.Pending{Trigger: tr})
}

// pump attempts each queue's head that is due, one request per
// subscription in parallel, and again after each success (up to maxRounds);
// an attempt not answered within the attempt wait goes on in the
// background (flights) and a later call, on the timer, applies its answer.
// Then it stores the state and sets the retry timer at the earliest head
// still waiting (an attempt in flight: the attempt wait from now).
func (d *deliverer) pump(c *DeviceContext, st *deliverypb.DeviceDeliveries) error {
	type job struct {
		q   *deliverypb.Queue
		sub *deliverypb.Subscription
		k   flightKey
		f   *flight
	}
	began := d.cfg.now()
	for round := range maxRounds {
		now := d.cfg.now()
		if round > 0 && now.Sub(began) >= d.cfg.attemptTimeout {
			break // the rest is due at once: the timer takes it, other keys go first
		}
		var jobs []*job
		for _, q := range st.Queues {
			if len(q.Items) == 0 {
				continue
			}
			sub := d.subs.Get(q.GetSubscriptionId())
			if sub == nil || !sub.GetEnabled() {
				reason := "removed"
				if sub != nil {
					reason = "disabled"
				}
				d.dropQueue(c, q, reason, "the subscription was "+reason)
				continue
			}
			head := q.Items[0]
			k := flightKey{device: c.Key(), sub: q.GetSubscriptionId(), trigger: head.GetTrigger().GetTriggerId()}
			if f := d.flights.get(k); f != nil {
				if f.answered() {
					jobs = append(jobs, &job{q: q, sub: sub, k: k, f: f})
				}
				continue // an attempt started earlier: its result first
			}
			if head.GetAttempts() > 0 && now.Sub(time.UnixMilli(head.GetFirstAttemptMs())) >= d.cfg.maxAge {
				d.giveUp(c, q.GetSubscriptionId(), head, "max-age", head.GetLastError())
				q.Items = q.Items[1:]
				continue // its next item is attempted next round
			}
			if head.GetNextAttemptMs() <= now.UnixMilli() {
				jobs = append(jobs, &job{q: q, sub: sub, k: k})
			}
		}
		if len(jobs) == 0 {
			break
		}
		ctx := c.Context()
		for _, j := range jobs {
			if j.f == nil {
				j.f = d.flights.start(ctx, d.send, j.k, j.sub, j.q.Items[0].GetTrigger())
			}
		}
		// Wait a little for the answers (a healthy endpoint's come well
		// within it); an attempt still running then keeps running and the
		// timer applies it, so a slow endpoint delays no other.
		wait := time.NewTimer(d.cfg.attemptWait)
		expired, progress := false, false
		for _, j := range jobs {
			if !expired && !d.send.slow(j.sub) { // a slow one would cost every call the whole wait
				select {
				case <-j.f.done:
				case <-wait.C:
					expired = true
				}
			}
			if !j.f.answered() {
				continue
			}
			d.flights.take(j.k)
			progress = d.apply(c, j.q, j.sub, j.f.r) || progress
		}
		wait.Stop()
		if !progress {
			break
		}
	}
	st.Queues = slices.DeleteFunc(st.Queues, func(q *deliverypb.Queue) bool { return len(q.Items) == 0 })
	for _, q := range st.Queues {
		for _, p := range q.Items {
			if !p.GetCounted() {
				d.outcome(c, q.GetSubscriptionId(), p, deliverypb.OutcomeKind_OUTCOME_KIND_QUEUED, "", 0)
			}
		}
	}
	if len(st.Queues) == 0 {
		c.CancelTimer(retryTimer)
		c.DeleteState()
		return nil
	}
	next := int64(0)
	poll := d.cfg.now().Add(d.cfg.attemptWait).UnixMilli()
	for _, q := range st.Queues {
		at := q.Items[0].GetNextAttemptMs()
		if d.flights.get(flightKey{device: c.Key(), sub: q.GetSubscriptionId(), trigger: q.Items[0].GetTrigger().GetTriggerId()}) != nil {
			at = poll // its attempt runs (or has answered): look again soon
		}
		if next == 0 || at < next {
			next = at
		}
	}
	c.SetState(st)
	return c.SetTimer(retryTimer, time.UnixMilli(next), group.WallClock)
}

// apply records one attempt's result in its queue; it reports whether the
// head left the queue (so the next one may go now).
func (d *deliverer) apply(c *DeviceContext, q *deliverypb.Queue, sub *deliverypb.Subscription, r result) bool {
	head := q.Items[0]
	now := d.cfg.now()
	switch {
	case r.skipped:
		head.NextAttemptMs = max(r.notBefore.UnixMilli(), now.UnixMilli()+1)
		return false
	case r.ok:
		d.m.attempts.WithLabelValues(sub.GetId(), "delivered").Inc()
		head.Attempts++
		d.outcome(c, sub.GetId(), head, deliverypb.OutcomeKind_OUTCOME_KIND_DELIVERED, "", now.UnixMilli())
		q.Items = q.Items[1:]
		return true
	case r.gone:
		d.m.attempts.WithLabelValues(sub.GetId(), "gone").Inc()
		head.Attempts++
		off := proto.Clone(sub).(*deliverypb.Subscription)
		off.Enabled, off.DisabledReason = false, "410 Gone from the endpoint"
		d.subs.Put(off) // at once here; every instance learns it from the topic
		d.disable.Emit(c, sub.GetId(), off)
		c.Logger().Warn("subscription disabled: its endpoint answered 410 Gone", "subscription", sub.GetId())
		d.dropQueue(c, q, "gone", "410 Gone")
		return true
	}
	head.Attempts++
	head.LastError = r.err
	if head.FirstAttemptMs == 0 {
		head.FirstAttemptMs = now.UnixMilli()
	}
	d.m.attempts.WithLabelValues(sub.GetId(), "failed").Inc()
	d.outcome(c, sub.GetId(), head, deliverypb.OutcomeKind_OUTCOME_KIND_ATTEMPT_FAILED, r.err, now.UnixMilli())
	if int(head.GetAttempts()) >= d.cfg.maxAttempts {
		d.giveUp(c, sub.GetId(), head, "attempts", r.err)
		q.Items = q.Items[1:]
		return true
	}
	head.NextAttemptMs = now.Add(backoff(head.GetAttempts(), d.cfg.backoffBase, d.cfg.backoffMax, r.retryAfter)).UnixMilli()
	return false
}

func (d *deliverer) dropQueue(c *DeviceContext, q *deliverypb.Queue, reason, detail string) {
	for _, p := range q.Items {
		d.giveUp(c, q.GetSubscriptionId(), p, reason, cmp.Or(p.GetLastError(), detail))
	}
	q.Items = nil
}

// giveUp writes p to delivery-dead with the reason and reports it.
func (d *deliverer) giveUp(c *DeviceContext, subID string, p *deliverypb.Pending, reason, lastErr string) {
	d.m.dead.WithLabelValues(subID, reason).Inc()
	d.dead.Emit(c, c.Key(), &deliverypb.DeadDelivery{SubscriptionId: subID, Trigger: p.GetTrigger(), Reason: reason,
		Attempts: p.GetAttempts(), LastError: lastErr})
	d.outcome(c, subID, p, deliverypb.OutcomeKind_OUTCOME_KIND_DEAD, reason+": "+lastErr, d.cfg.now().UnixMilli())
}

// outcome reports what happened to p; its first outcome also counts it as
// queued (Outcome.queued), so a trigger delivered at once costs one record.
func (d *deliverer) outcome(c *DeviceContext, subID string, p *deliverypb.Pending, kind deliverypb.OutcomeKind, errText string, observed int64) {
	tr := p.GetTrigger()
	o := &deliverypb.Outcome{SubscriptionId: subID, DeviceId: tr.GetDeviceId(), TriggerId: tr.GetTriggerId(),
		Kind: kind, Error: clip(errText), Attempts: p.GetAttempts(), ObservedMs: observed, TriggerTimeMs: tr.GetEventTimeMs()}
	if !p.GetCounted() {
		p.Counted = true
		o.Queued = kind != deliverypb.OutcomeKind_OUTCOME_KIND_QUEUED
	}
	d.outcomes.Emit(c, subID, o)
}

// applyOutcome adds an outcome to its subscription's status.
func applyOutcome(c *StatusContext, o *deliverypb.Outcome, m *metrics) error {
	if o.GetSubscriptionId() != c.Key() {
		return fmt.Errorf("outcome of subscription %q under key %q", clip(o.GetSubscriptionId()), clip(c.Key()))
	}
	st := cmp.Or(c.State(), &deliverypb.SubscriptionStatus{SubscriptionId: c.Key()})
	if o.GetQueued() {
		st.Pending++
	}
	switch o.GetKind() {
	case deliverypb.OutcomeKind_OUTCOME_KIND_QUEUED:
		st.Pending++
	case deliverypb.OutcomeKind_OUTCOME_KIND_DELIVERED:
		st.Delivered++
		st.Pending--
		st.LastSuccessMs = max(st.LastSuccessMs, o.GetObservedMs())
		m.lastSuccess.WithLabelValues(c.Key()).Set(float64(st.LastSuccessMs) / 1000)
	case deliverypb.OutcomeKind_OUTCOME_KIND_ATTEMPT_FAILED:
		st.FailedAttempts++
		st.LastError, st.LastErrorMs = o.GetError(), o.GetObservedMs()
	case deliverypb.OutcomeKind_OUTCOME_KIND_DEAD:
		st.Dead++
		st.Pending--
		st.LastError, st.LastErrorMs = o.GetError(), o.GetObservedMs()
	default:
		return fmt.Errorf("outcome of unknown kind %v", o.GetKind())
	}
	m.pending.WithLabelValues(c.Key()).Set(float64(st.Pending))
	c.SetState(st)
	return nil
}
