package occupancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/collector"
	"github.com/fencestream/fencestream/topology/cluster"
)

// lagGauge is fencestream_occupancy_lag_records, registered on reg.
func lagGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	return collector.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fencestream_occupancy_lag_records",
		Help: "Records occupancy has not yet committed, per input topic and partition: fence-triggers (occupancy-members: not yet applied to the member registers) and occupancy-changes (occupancy: not yet added up in occupancy-table).",
	}, []string{"topic", "partition"}))
}

// PartitionLag is the lag of one of occupancy's groups on one partition of
// its input.
type PartitionLag struct {
	Topic     string
	Partition int32
	// Committed is the group's committed offset, or -1 when it has none (then
	// the lag is counted from the partition's start: new groups start at the
	// oldest offset).
	Committed int64
	// End is the partition's end offset (high watermark).
	End int64
	// Lag is the number of records between the group's position and End.
	Lag int64
}

// LagReport says how far occupancy-table is behind the trigger stream. A
// trigger is behind until occupancy-members has committed it on
// fence-triggers and occupancy has committed its change on
// occupancy-changes, so Total bounds the triggers not yet reflected in the
// table, up to the groups' commit interval.
type LagReport struct {
	// Group is "occupancy": the two groups, occupancy-members on
	// fence-triggers and occupancy on occupancy-changes, reported as one.
	Group string
	// Partitions lists every partition of fence-triggers and occupancy-changes,
	// sorted by topic then partition.
	Partitions []PartitionLag
	// ByTopic is the lag summed per topic.
	ByTopic map[string]int64
	// Total is the lag summed over both topics.
	Total int64
}

// String renders the report as one line per topic with its non-zero partitions.
func (r LagReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group %s lag %d", r.Group, r.Total)
	for _, topic := range []string{geofence.TopicTriggers, geofence.TopicOccupancyChanges} {
		fmt.Fprintf(&b, "; %s %d", topic, r.ByTopic[topic])
		var parts []string
		for _, p := range r.Partitions {
			if p.Topic == topic && p.Lag != 0 {
				parts = append(parts, fmt.Sprintf("%d:%d", p.Partition, p.Lag))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(parts, " "))
		}
	}
	return b.String()
}

// Lag measures occupancy's lag: occupancy-members' committed offsets on
// fence-triggers and occupancy's on occupancy-changes, against the topics'
// end offsets.
func Lag(ctx context.Context, cl cluster.Config) (LagReport, error) {
	adm, closeFn, err := admin(cl)
	if err != nil {
		return LagReport{}, err
	}
	defer closeFn()
	return lag(ctx, adm)
}

func admin(cl cluster.Config) (*kadm.Client, func(), error) {
	kopts, err := cl.Kgo()
	if err != nil {
		return nil, nil, fmt.Errorf("occupancy lag: %w", err)
	}
	kc, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, nil, fmt.Errorf("occupancy lag: connecting to %s: %w", strings.Join(cl.Brokers, ","), err)
	}
	return kadm.NewClient(kc), kc.Close, nil
}

func lag(ctx context.Context, adm *kadm.Client) (LagReport, error) {
	topics := []string{geofence.TopicTriggers, geofence.TopicOccupancyChanges}
	rep := LagReport{Group: geofence.GroupOccupancy, ByTopic: map[string]int64{}}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return rep, fmt.Errorf("occupancy lag: end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return rep, fmt.Errorf("occupancy lag: start offsets: %w", err)
	}
	// Each input is read by its own group.
	committed := map[string]kadm.OffsetResponses{}
	for topic, grp := range map[string]string{geofence.TopicTriggers: geofence.GroupOccupancyMembers, geofence.TopicOccupancyChanges: geofence.GroupOccupancy} {
		offs, err := adm.FetchOffsets(ctx, grp)
		if err == nil {
			err = offs.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			// The group has not committed yet: every partition lags from its start.
			offs, err = kadm.OffsetResponses{}, nil
		}
		if err != nil {
			return rep, fmt.Errorf("occupancy lag: committed offsets of group %s: %w", grp, err)
		}
		committed[topic] = offs
	}
	for _, topic := range topics {
		if _, ok := ends[topic]; !ok {
			return rep, fmt.Errorf("occupancy lag: topic %s does not exist", topic)
		}
	}
	ends.Each(func(e kadm.ListedOffset) {
		pl := PartitionLag{Topic: e.Topic, Partition: e.Partition, Committed: -1, End: e.Offset}
		from := int64(0)
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Offset > 0 {
			from = s.Offset
		}
		if c, ok := committed[e.Topic].Lookup(e.Topic, e.Partition); ok && c.At >= 0 {
			pl.Committed = c.At
			from = max(from, c.At)
		}
		pl.Lag = max(0, pl.End-from)
		rep.Partitions = append(rep.Partitions, pl)
		rep.ByTopic[e.Topic] += pl.Lag
		rep.Total += pl.Lag
	})
	sort.Slice(rep.Partitions, func(i, j int) bool {
		a, b := rep.Partitions[i], rep.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return rep, nil
}

// Export sets fencestream_occupancy_lag_records (g) from the report.
func (r LagReport) Export(g *prometheus.GaugeVec) {
	for _, p := range r.Partitions {
		g.WithLabelValues(p.Topic, strconv.Itoa(int(p.Partition))).Set(float64(p.Lag))
	}
}

// RunLagReporter measures the lag every interval and exports it as the gauge
// fencestream_occupancy_lag_records{topic,partition} until ctx ends (then it
// returns nil). A failed measurement is logged and retried at the next tick;
// only an unusable cluster configuration is returned as an error. log nil
// means slog.Default(); the gauge is registered on reg (nil: the default
// registry).
func RunLagReporter(ctx context.Context, cl cluster.Config, every time.Duration, log *slog.Logger, reg prometheus.Registerer) error {
	if every <= 0 {
		return fmt.Errorf("occupancy lag: interval must be positive, got %v", every)
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	gauge, err := lagGauge(reg)
	if err != nil {
		return fmt.Errorf("occupancy lag: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("group", geofence.GroupOccupancy)
	adm, closeFn, err := admin(cl)
	if err != nil {
		return err
	}
	defer closeFn()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		mctx, cancel := context.WithTimeout(ctx, max(every, 5*time.Second))
		rep, err := lag(mctx, adm)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("measuring occupancy lag failed; retrying next interval", "err", err)
		case err == nil:
			rep.Export(gauge)
			log.Debug("occupancy lag", "total", rep.Total, "fence_triggers", rep.ByTopic[geofence.TopicTriggers], "changes", rep.ByTopic[geofence.TopicOccupancyChanges])
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
