package produce_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology/produce"
)

// counterIn reads one counter of g (0 when absent).
func counterIn(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// Each producer counts on the Registerer it was given, nowhere else: two
// producers on two registries count apart, two on one registry add up, and the
// default registry sees none of it. (Process-wide counters registered on every
// Registerer made each registry report every producer's records.)
func TestMetricsCountOnTheirOwnRegisterer(t *testing.T) {
	e := start(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := newProducer(t, e, geofence.TopicPings, produce.Registerer(regA))
	a2 := newProducer(t, e, geofence.TopicPings, produce.Registerer(regA))
	b := newProducer(t, e, geofence.TopicPings, produce.Registerer(regB))

	records := map[string]string{"topic": geofence.TopicPings}
	rejected := map[string]string{"topic": geofence.TopicPings, "reason": produce.ReasonEmpty}
	defaultBefore := counter(t, "fencestream_producer_records_total", records)
	defaultRejectedBefore := counter(t, "fencestream_producer_rejected_keys_total", rejected)

	for i, p := range []*produce.Producer[pb.Ping, *pb.Ping]{a, a, a, a2, b} {
		if err := p.Emit(ctx(t), "dev-1", &pb.Ping{DeviceId: "dev-1", DeviceTimeMs: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Emit(ctx(t), "", &pb.Ping{}); err == nil {
		t.Fatal("empty key accepted")
	}

	for _, c := range []struct {
		what string
		g    prometheus.Gatherer
		name string
		lbl  map[string]string
		want float64
	}{
		{"registry A records (a 3, a2 1)", regA, "fencestream_producer_records_total", records, 4},
		{"registry B records", regB, "fencestream_producer_records_total", records, 1},
		{"registry A rejected keys", regA, "fencestream_producer_rejected_keys_total", rejected, 1},
		{"registry B rejected keys", regB, "fencestream_producer_rejected_keys_total", rejected, 0},
	} {
		if got := counterIn(t, c.g, c.name, c.lbl); got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.what, c.name, got, c.want)
		}
	}
	if got := counter(t, "fencestream_producer_records_total", records) - defaultBefore; got != 0 {
		t.Errorf("the default registry counted %v records of producers given their own registries", got)
	}
	if got := counter(t, "fencestream_producer_rejected_keys_total", rejected) - defaultRejectedBefore; got != 0 {
		t.Errorf("the default registry counted %v rejected keys of producers given their own registries", got)
	}
}
