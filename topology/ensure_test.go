package topology_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// startBroker starts an embedded broker with its data under t.TempDir and an
// admin client reaching it over TCP; both are closed when the test ends.
func startBroker(t *testing.T) (*embedded.Broker, *kadm.Client) {
	t.Helper()
	b := embeddedtest.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return b, kadm.NewClient(cl)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mismatches flattens the joined error Ensure/Check return.
func mismatches(t *testing.T, err error) map[string]*topology.MismatchError {
	t.Helper()
	out := map[string]*topology.MismatchError{}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("want a joined error of mismatches, got %T: %v", err, err)
	}
	for _, e := range j.Unwrap() {
		var me *topology.MismatchError
		if !errors.As(e, &me) {
			t.Fatalf("not a *MismatchError: %T %v", e, e)
		}
		out[me.Topic+" "+me.Setting] = me
	}
	return out
}

func TestCheckEmptyBrokerReportsMissingTopics(t *testing.T) {
	_, adm := startBroker(t)
	ctx := testCtx(t)
	g := geofence.Topology()
	err := g.Check(ctx, adm)
	if !errors.Is(err, topology.ErrMismatch) {
		t.Fatalf("Check on an empty broker = %v, want ErrMismatch", err)
	}
	got := mismatches(t, err)
	if len(got) != len(g.Topics) {
		t.Fatalf("Check reported %d mismatches, want one per topic (%d): %v", len(got), len(g.Topics), err)
	}
	for _, tp := range g.Topics {
		me, ok := got[tp.Name+" missing"]
		if !ok {
			t.Errorf("topic %s not reported missing", tp.Name)
			continue
		}
		if !strings.Contains(me.Error(), "does not exist") {
			t.Errorf("missing-topic message %q", me)
		}
	}
	// Check creates nothing.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Fatalf("Check created topics: %v", topics.Names())
	}
}

func TestEnsureCreatesThenRefusesMismatches(t *testing.T) {
	b, adm := startBroker(t)
	ctx := testCtx(t)
	g := geofence.Topology()

	if err := g.Ensure(ctx, adm); err != nil {
		t.Fatalf("Ensure on an empty broker: %v", err)
	}
	details, err := adm.ListTopics(ctx, g.TopicNames()...)
	if err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, g.TopicNames()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range g.Topics {
		d := details[tp.Name]
		if d.Err != nil || int32(len(d.Partitions)) != tp.Partitions {
			t.Errorf("topic %s: err %v, %d partitions, declared %d", tp.Name, d.Err, len(d.Partitions), tp.Partitions)
		}
		rc, err := configs.On(tp.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		policy := ""
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
		if policy != string(tp.Cleanup) {
			t.Errorf("topic %s created with cleanup.policy %q, declared %q", tp.Name, policy, tp.Cleanup)
		}
	}
	if err := g.Check(ctx, adm); err != nil {
		t.Fatalf("Check after Ensure: %v", err)
	}

	// A second Ensure changes nothing: it sends no CreateTopics at all.
	var creates atomic.Int32
	b.Cluster().ControlKey(kmsg.CreateTopics.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		creates.Add(1)
		return nil, nil, false
	})
	if err := g.Ensure(ctx, adm); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if n := creates.Load(); n != 0 {
		t.Fatalf("second Ensure sent %d CreateTopics requests, want none", n)
	}

	// Someone adds partitions to pings behind the topology's back.
	resp, err := adm.UpdatePartitions(ctx, 30, geofence.TopicPings)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("growing pings to 30 partitions: %v", err)
	}
	for name, run := range map[string]func() error{
		"Ensure": func() error { return g.Ensure(ctx, adm) },
		"Check":  func() error { return g.Check(ctx, adm) },
	} {
		err := run()
		if !errors.Is(err, topology.ErrMismatch) {
			t.Fatalf("%s after the partition change = %v, want ErrMismatch", name, err)
		}
		got := mismatches(t, err)
		me, ok := got[geofence.TopicPings+" partitions"]
		if !ok || len(got) != 1 {
			t.Fatalf("%s: want exactly the pings partition mismatch, got %v", name, err)
		}
		if me.Declared != "24" || me.Actual != "30" {
			t.Fatalf("%s: mismatch says declared %s actual %s, want 24 and 30", name, me.Declared, me.Actual)
		}
		msg := err.Error()
		for _, want := range []string{`topic "pings"`, "30 partitions on the broker", "declares 24", "refusing to start", "keys would map to different partitions", "per-key order"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s error %q does not say %q", name, msg, want)
			}
		}
		t.Logf("%s refuses: %v", name, err)
	}
	// The refusal created and changed nothing.
	details, err = adm.ListTopics(ctx, geofence.TopicPings)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[geofence.TopicPings].Partitions); n != 30 {
		t.Fatalf("pings has %d partitions after the refusal, want 30 (untouched)", n)
	}
}

func TestEnsureRefusesCleanupPolicyMismatch(t *testing.T) {
	_, adm := startBroker(t)
	ctx := testCtx(t)
	g := geofence.Topology()

	// A table created by someone else as a plain (deleting) topic, and a stream
	// compacted by mistake after Ensure made it.
	resp, err := adm.CreateTopic(ctx, topology.DefaultPartitions, -1, nil, geofence.TopicDebouncer)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	err = g.Ensure(ctx, adm)
	got := mismatches(t, err)
	me, ok := got[geofence.TopicDebouncer+" cleanup.policy"]
	if !ok || len(got) != 1 {
		t.Fatalf("Ensure = %v, want only the debouncer-table cleanup.policy mismatch", err)
	}
	if me.Declared != "compact" || me.Actual != "delete" {
		t.Fatalf("mismatch declared %q actual %q, want compact and delete", me.Declared, me.Actual)
	}
	if !strings.Contains(err.Error(), "compacted table would lose state") {
		t.Errorf("error %q does not say why", err)
	}

	compact := "compact"
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &compact}}, geofence.TopicDebouncer, geofence.TopicPings)
	if err == nil {
		for _, r := range alter {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	err = g.Check(ctx, adm)
	got = mismatches(t, err)
	if me, ok := got[geofence.TopicPings+" cleanup.policy"]; !ok || len(got) != 1 || me.Actual != "compact" || me.Declared != "delete" {
		t.Fatalf("Check = %v, want only pings compact vs delete", err)
	}
}

func TestEnsureValidatesFirst(t *testing.T) {
	_, adm := startBroker(t)
	ctx := testCtx(t)
	g := geofence.Topology()
	g.Boundaries = nil
	if err := g.Ensure(ctx, adm); !errors.Is(err, topology.ErrUndeclaredRekey) {
		t.Fatalf("Ensure of an invalid topology = %v, want the validation error", err)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Fatalf("Ensure of an invalid topology created %v", topics.Names())
	}
}
