//go:build unix

package chaostest

import (
	"bufio"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/boundedlog"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/cluster"
)

// oversizeSlot is the kill slot before which records too large to be
// dead-lettered whole are produced (issue 31).
const oversizeSlot = 4

// oversizeKey keys them: no device of the fleet, so the truth is unchanged.
const oversizeKey = "oversize-probe"

// produceOversized puts, mid-run, a record with a 1 MiB key and one with 1 MiB
// of garbage on pings and on fence-triggers (each fits the broker, neither
// fits whole in a dead letter). Every group must move past them: the
// catch-up wait needs no lag, and checkOversized finds them cut down.
func produceOversized(t *testing.T, cl cluster.Config) map[string][]grouptest.Oversized {
	t.Helper()
	topo := geofence.Topology()
	out := map[string][]grouptest.Oversized{}
	for _, topic := range []string{geofence.TopicPings, geofence.TopicTriggers} {
		tp, ok := topo.Topic(topic)
		if !ok {
			t.Fatalf("no topic %s", topic)
		}
		out[topic] = grouptest.ProduceOversized(t, cl, topic, oversizeKey, tp.Partitions, nil)
	}
	return out
}

// checkOversized finds the dead letters of what produceOversized produced,
// cut down, and no child's log line longer than the kit's bound allows.
func checkOversized(t *testing.T, cl cluster.Config, produced map[string][]grouptest.Oversized, procs []*proc) {
	t.Helper()
	for topic, recs := range produced {
		grouptest.CheckCutDown(t, cl, topic, recs)
	}
	for _, p := range procs {
		if n := longestLine(t, p.log); n > 4*boundedlog.ValueLimit {
			t.Errorf("%s logged a line of %d bytes", p.name, n)
		}
	}
}

func longestLine(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	longest, cur := 0, 0
	for {
		line, isPrefix, err := r.ReadLine()
		if err != nil {
			return max(longest, cur)
		}
		cur += len(line)
		if !isPrefix {
			longest, cur = max(longest, cur), 0
		}
	}
}

// oversizeProbe reports whether r is one of produceOversized's records,
// which readers of the pipeline's topics skip.
func oversizeProbe(r *kgo.Record) bool {
	return string(r.Key) == oversizeKey || len(r.Key) > topology.MaxKeyBytes
}
