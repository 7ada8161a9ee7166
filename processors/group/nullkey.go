package group

import (
	"errors"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/topology"
)

// ErrNullKey: the input record has no key at all.
var ErrNullKey = errors.New("key is null (the record has no key)")

// headerNullKey marks a consumed record whose key was null: Goka hands
// handlers the key as a string, in which null and empty are the same.
const headerNullKey = "fencestream-null-key"

// nullKeyMarker is a sarama consumer interceptor that marks records with a
// null key before Goka turns the key into a string.
type nullKeyMarker struct{}

func (nullKeyMarker) OnConsume(m *sarama.ConsumerMessage) {
	if m.Key == nil {
		m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(headerNullKey)})
	}
}

// markNullKeys makes every consumer built from sc mark null-keyed records.
func markNullKeys(sc *sarama.Config) {
	for _, i := range sc.Consumer.Interceptors {
		if _, ok := i.(nullKeyMarker); ok {
			return
		}
	}
	sc.Consumer.Interceptors = append(sc.Consumer.Interceptors, nullKeyMarker{})
}

// badKey is the dead-letter reason and error of an input key ValidateKey
// refused with err.
func badKey(gctx goka.Context, err error) (string, error) {
	if !errors.Is(err, topology.ErrEmptyKey) {
		return deadletter.ReasonBadKey, err
	}
	if _, null := gctx.Headers()[headerNullKey]; null {
		return deadletter.ReasonNullKey, fmt.Errorf("%w: a record without a key is spread round-robin and loses per-key order", ErrNullKey)
	}
	return deadletter.ReasonEmptyKey, err
}
