package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/processors/group/statestore"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// ErrTopicChanged is wrapped when a topic of the group was deleted, recreated
// (a new topic id under the same name) or given more partitions. The group's
// committed offsets and local state describe the topic as it was: applying
// them to what is there now would make state and outputs drift apart with
// nothing saying so (a recreated topic's first records look like replays of
// offsets already processed; a new partition's records are read by no one).
// So the processor stops, and refuses to start on the same state directory,
// until an operator resets the groups (fencectl reset).
var ErrTopicChanged = errors.New("a topic of the group was deleted, recreated or repartitioned")

// DefaultTopicCheck is how often a running processor asks the broker, in one
// metadata request, whether its topics are still the ones it started on.
const DefaultTopicCheck = 5 * time.Second

// Kinds of topic change (the change label of fencestream_topic_changes_total).
const (
	TopicDeleted    = "deleted"
	TopicRecreated  = "recreated"
	TopicPartitions = "partitions"
)

// TopicChangeError says which topic changed, how, and what the operator must
// do. It wraps ErrTopicChanged and ErrPermanent.
type TopicChangeError struct {
	Group, Topic, Change string
	OldID, NewID         string // base64 topic ids ("" when unknown or gone)
	OldParts, NewParts   int32
	StateDir             string
}

func (e *TopicChangeError) Error() string {
	var what string
	switch e.Change {
	case TopicDeleted:
		what = fmt.Sprintf("topic %s (id %s) was deleted", e.Topic, e.OldID)
	case TopicRecreated:
		what = fmt.Sprintf("topic %s was recreated: id %s when the group's state was built, %s now", e.Topic, e.OldID, e.NewID)
	default:
		what = fmt.Sprintf("topic %s changed from %d to %d partitions: keys now hash to other partitions and records on the new ones are read by no one", e.Topic, e.OldParts, e.NewParts)
	}
	dir := ""
	if e.StateDir != "" {
		dir = " --state-dir " + filepath.Dir(e.StateDir)
	}
	restore := "restore the topic as declared (fencectl topology check --create)"
	if e.Change == TopicPartitions {
		// Kafka cannot take partitions away.
		restore = fmt.Sprintf("either recreate %s with its declared %d partitions, or run every binary with --partitions %d", e.Topic, e.OldParts, e.NewParts)
	}
	return fmt.Sprintf("group %s: %s; its committed offsets and local state describe the topic as it was, so it stopped rather than apply them to what is there now. "+
		"To go on: %s, stop every group that reads or writes %s, and run fencectl reset --to-earliest --group %s%s (with those groups) to rebuild from the broker",
		e.Group, what, restore, e.Topic, e.Group, dir)
}

func (e *TopicChangeError) Unwrap() []error { return []error{ErrTopicChanged, ErrPermanent} }

// topicIdentity is what the watch compares: the broker's topic id and
// partition count.
type topicIdentity struct {
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
}

// topicsFile records, in a group's state directory, the identity of the
// topics its state was built from: a restart after a topic was recreated is
// refused (fencectl reset deletes the directory, and with it this record).
const topicsFile = "fencestream-topics.json"

// groupTopics is every topic the declaration reads or writes, sorted.
func groupTopics(d topology.Processor) []string {
	var ts []string
	ts = append(ts, d.Streams...)
	ts = append(ts, d.Broadcast...)
	ts = append(ts, d.Joins...)
	ts = append(ts, d.Lookups...)
	ts = append(ts, d.Emits...)
	for _, t := range []string{d.Loop, d.Table, d.Timers} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// describeTopics asks the broker, in one metadata request, for the identity
// of topics; a topic the broker does not know is absent from the answer.
func describeTopics(ctx context.Context, adm *kadm.Client, topics []string) (map[string]topicIdentity, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]topicIdentity{}
	for _, t := range topics {
		d, ok := md.Topics[t]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) || errors.Is(d.Err, kerr.UnknownTopicID) {
			continue
		}
		if d.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", t, d.Err)
		}
		id := ""
		if d.ID != (kadm.TopicID{}) {
			id = d.ID.String()
		}
		out[t] = topicIdentity{ID: id, Partitions: int32(len(d.Partitions))}
	}
	return out, nil
}

// compareTopics returns the first change from known to now of the topics in
// known, or nil. A topic missing from now is a deletion; ids are compared
// only when both are known (a broker without topic ids reports none).
func compareTopics(group, dir string, known, now map[string]topicIdentity) *TopicChangeError {
	names := make([]string, 0, len(known))
	for t := range known {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		k := known[t]
		e := &TopicChangeError{Group: group, Topic: t, OldID: k.ID, OldParts: k.Partitions, StateDir: dir}
		n, ok := now[t]
		switch {
		case !ok:
			e.Change = TopicDeleted
		case k.ID != "" && n.ID != "" && k.ID != n.ID:
			e.Change, e.NewID, e.NewParts = TopicRecreated, n.ID, n.Partitions
		case n.Partitions != k.Partitions:
			e.Change, e.NewID, e.NewParts = TopicPartitions, n.ID, n.Partitions
		default:
			continue
		}
		return e
	}
	return nil
}

// claimTopics compares the broker's identity of the group's topics with the
// record in dir (refusing a change with a *TopicChangeError) and records the
// topics not recorded yet. now holds every topic of the group (start-up has
// checked or created them).
func claimTopics(group, dir string, now map[string]topicIdentity) error {
	path := filepath.Join(dir, topicsFile)
	rec := map[string]topicIdentity{}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &rec); err != nil {
			return fmt.Errorf("%w: %s is unreadable (%v); delete %s to rebuild state from the broker", statestore.ErrStateMismatch, path, err, dir)
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("state directory: %w", err)
	}
	known := map[string]topicIdentity{}
	for t, id := range rec {
		if _, used := now[t]; used {
			known[t] = id
		}
	}
	if e := compareTopics(group, dir, known, now); e != nil {
		return e
	}
	changed := false
	for t, id := range now {
		if r, ok := rec[t]; !ok || (r.ID == "" && id.ID != "") {
			rec[t], changed = id, true
		}
	}
	if !changed {
		return nil
	}
	data, err = json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// topicMetrics count topic changes seen by running processors.
type topicMetrics struct {
	changes *prometheus.CounterVec
	changed *prometheus.GaugeVec
}

func newTopicMetrics(reg prometheus.Registerer) (*topicMetrics, error) {
	m := &topicMetrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fencestream_topic_changes_total",
			Help: "Topics a running group found deleted, recreated (new topic id) or repartitioned; the group stops consuming (ErrTopicChanged).",
		}, []string{"group", "topic", "change"}),
		changed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fencestream_topic_changed",
			Help: "1 while a group is stopped because one of its topics changed identity or partition count under it, else 0.",
		}, []string{"group", "topic"}),
	}
	var e1, e2 error
	m.changes, e1 = collector.Register(reg, m.changes)
	m.changed, e2 = collector.Register(reg, m.changed)
	if err := errors.Join(e1, e2); err != nil {
		return nil, fmt.Errorf("registering the topic metrics: %w", err)
	}
	return m, nil
}

// topicWatch checks, every interval and with one metadata request, that the
// group's topics are the ones it started on.
type topicWatch struct {
	group, dir string
	topics     []string
	known      map[string]topicIdentity
	every      time.Duration
	m          *topicMetrics
	log        *slog.Logger

	mu     sync.Mutex
	status string // what the last check found wrong ("" when nothing)
}

// newTopicWatch reads the identity of the group's topics, refuses a state
// directory built from other ones, and returns the watch of a running
// processor.
func newTopicWatch(ctx context.Context, cl cluster.Config, group, dir string, decl topology.Processor, every time.Duration, reg prometheus.Registerer, log *slog.Logger) (*topicWatch, error) {
	m, err := newTopicMetrics(reg)
	if err != nil {
		return nil, err
	}
	topics := groupTopics(decl)
	kopts, err := cl.Kgo()
	if err != nil {
		return nil, err
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now, err := describeTopics(cctx, kadm.NewClient(kc), topics)
	if err != nil {
		return nil, fmt.Errorf("topic metadata: %w", err)
	}
	if err := claimTopics(group, dir, now); err != nil {
		var tce *TopicChangeError
		if errors.As(err, &tce) {
			m.changed.WithLabelValues(group, tce.Topic).Set(1)
		}
		return nil, err
	}
	for _, t := range topics {
		m.changed.WithLabelValues(group, t).Set(0)
	}
	return &topicWatch{group: group, dir: dir, topics: topics, known: now, every: every, m: m, log: log}, nil
}

// problem is what the last check found wrong, for the restart log ("" when
// nothing or not checked).
func (w *topicWatch) problem() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// run checks every interval until ctx ends or a change is found; then it
// counts and logs the change and calls changed with it, once.
func (w *topicWatch) run(ctx context.Context, cl cluster.Config, changed func(error)) {
	kopts, err := cl.Kgo()
	var kc *kgo.Client
	if err == nil {
		kc, err = kgo.NewClient(kopts...)
	}
	if err != nil {
		w.log.Warn("cannot check the group's topics while it runs", "err", err)
		return
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	t := time.NewTicker(w.every)
	defer t.Stop()
	var missing map[string]bool // topics missing at the previous check
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, max(w.every, time.Second))
		now, err := describeTopics(cctx, adm, w.topics)
		cancel()
		if err != nil {
			continue // the broker is unreachable: the restart loop says so
		}
		e := compareTopics(w.group, w.dir, w.known, now)
		if e != nil && e.Change == TopicDeleted && !missing[e.Topic] {
			// One metadata answer without the topic may be a broker that
			// has not learned of it yet: a deletion must be seen twice.
			missing = map[string]bool{e.Topic: true}
			w.setStatus(fmt.Sprintf("topic %s is not on the broker", e.Topic))
			continue
		}
		if e == nil {
			missing = nil
			w.setStatus("")
			continue
		}
		w.setStatus(e.Error())
		w.m.changes.WithLabelValues(w.group, e.Topic, e.Change).Inc()
		w.m.changed.WithLabelValues(w.group, e.Topic).Set(1)
		w.log.Error("topic changed under the running group; stopping", "topic", e.Topic, "change", e.Change,
			"old_id", e.OldID, "new_id", e.NewID, "old_partitions", e.OldParts, "new_partitions", e.NewParts, "err", e)
		changed(e)
		return
	}
}

func (w *topicWatch) setStatus(s string) {
	w.mu.Lock()
	w.status = s
	w.mu.Unlock()
}

// topicProblemHint explains errors sarama reports without naming a cause.
func topicProblemHint(err error) string {
	if err != nil && strings.Contains(err.Error(), "circuit breaker is open") {
		return "sarama's producer stopped sending to a topic after repeated metadata failures for it (a deleted topic, or no leader); it tries again after 10 s"
	}
	return ""
}

// watchTopics runs the topic watch until stop is called and returns the
// context Goka runs under: canceled, with the processor's health set to the
// change, when a topic changes, so Run ends with the change (ErrPermanent)
// instead of consuming the new topic with the old topic's offsets and state.
func (p *Processor) watchTopics(ctx context.Context) (gokaCtx context.Context, stop func()) {
	gctx, cancel := context.WithCancelCause(ctx)
	wctx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.topics.run(wctx, p.cl, func(err error) {
			p.health.setFatal(err)
			cancel(err)
		})
	}()
	return gctx, func() { stopWatch(); <-done; cancel(nil) }
}

// logRestart logs a restart after err, saying what is wrong when err alone
// does not: sarama's "circuit breaker is open" names no topic and no cause,
// and the topic watch may know which topic is missing.
func (p *Processor) logRestart(err error, in time.Duration) {
	args := []any{"err", err, "in", in}
	if hint := topicProblemHint(err); hint != "" {
		args = append(args, "hint", hint)
	}
	if prob := p.topics.problem(); prob != "" {
		args = append(args, "topics", prob)
	}
	p.log.Warn("processor stopped on an error retrying can fix; restarting", args...)
}
