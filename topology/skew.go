package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// SkewAlert is the alert threshold: a topic whose busiest partition holds more
// than three times the mean has a hot key or too few distinct keys.
const SkewAlert = 3.0

// Skew describes how evenly a topic's records spread over its partitions:
// Ratio = max over partitions / mean over partitions (1 is perfectly even).
type Skew struct {
	Topic        string
	Counts       map[int32]int64
	Total        int64
	Max          int64
	MaxPartition int32
	Mean         float64
	// Ratio is 0 when the topic holds no records (skew undefined).
	Ratio float64
}

// Alert reports whether the skew is above SkewAlert.
func (s Skew) Alert() bool { return s.Ratio > SkewAlert }

// SkewOf computes the skew of per-partition record counts.
func SkewOf(topic string, counts map[int32]int64) Skew {
	s := Skew{Topic: topic, Counts: counts, MaxPartition: -1}
	for p, n := range counts {
		s.Total += n
		if n > s.Max || (n == s.Max && (s.MaxPartition < 0 || p < s.MaxPartition)) {
			s.Max, s.MaxPartition = n, p
		}
	}
	if len(counts) > 0 {
		s.Mean = float64(s.Total) / float64(len(counts))
	}
	if s.Total > 0 {
		s.Ratio = float64(s.Max) / s.Mean
	}
	return s
}

// ErrUnknownTopic is wrapped when the broker does not have the topic.
var ErrUnknownTopic = errors.New("topic does not exist on the broker")

// MeasureSkew counts each partition's records from the broker's offsets
// (end - start) and returns the topic's skew.
func MeasureSkew(ctx context.Context, adm *kadm.Client, topic string) (Skew, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return Skew{}, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return Skew{}, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	for _, set := range []kadm.ListedOffsets{starts, ends} {
		ps, ok := set[topic]
		if !ok {
			return Skew{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
		}
		for _, o := range ps {
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return Skew{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
			}
		}
	}
	counts := map[int32]int64{}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		s, ok := starts.Lookup(topic, o.Partition)
		if !ok || s.Err != nil {
			errs = append(errs, fmt.Errorf("start offset of %s/%d missing", o.Topic, o.Partition))
			return
		}
		counts[o.Partition] = o.Offset - s.Offset
	})
	if len(errs) > 0 {
		return Skew{}, errors.Join(errs...)
	}
	if len(counts) == 0 {
		return Skew{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	return SkewOf(topic, counts), nil
}
