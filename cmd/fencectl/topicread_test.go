package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/fencestream/fencestream/processors/group/deadletter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/tablecodec"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
)

// readLine is one line of fencectl topic read, as a reader parses it.
type readLine struct {
	Topic       string         `json:"topic"`
	Partition   int32          `json:"partition"`
	Offset      int64          `json:"offset"`
	Timestamp   time.Time      `json:"timestamp"`
	Key         *string        `json:"key"`
	Headers     []headerJSON   `json:"headers"`
	Value       map[string]any `json:"value"`
	ValueBase64 string         `json:"value_base64"`
	Error       string         `json:"error"`
}

func parseLines(t *testing.T, out string) []readLine {
	t.Helper()
	var lines []readLine
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var r readLine
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, r)
	}
	return lines
}

// createTopics creates the named declared topics with their declared partitions.
func createTopics(t *testing.T, addr string, names ...string) {
	t.Helper()
	topo, err := modules.Topology(topology.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	_, adm := admin(t, addr)
	for _, n := range names {
		resp, err := adm.CreateTopic(context.Background(), topo.MustTopic(n).Partitions, -1, nil, n)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func produceRecords(t *testing.T, addr string, recs ...*kgo.Record) {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if err := kc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// garbage is not a protobuf message: a length-delimited field 1 whose length
// runs past the end.
var garbage = []byte{0x0a, 0x7f, 0x01}

// TestTopicReadPrintsDecodedRecords: a topic's records come out as JSON lines
// decoded by the declared type, the undecodable one with its bytes and an
// error and the reading going on; a group table's envelope is unwrapped.
func TestTopicReadPrintsDecodedRecords(t *testing.T) {
	addr := broker(t)
	createTopics(t, addr, geofence.TopicPings, geofence.TopicDebouncer, topology.TopicDeadLetter)
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	produceRecords(t, addr,
		&kgo.Record{Topic: geofence.TopicPings, Partition: 3, Key: []byte("dev-1"), Timestamp: old,
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("gw-7")}, {Key: "bin", Value: []byte{0xff, 0x00}}},
			Value:   marshal(t, &pb.Ping{DeviceId: "dev-1", Lat: 52.5, Lon: 13.4, DeviceTimeMs: 1000})},
		&kgo.Record{Topic: geofence.TopicPings, Partition: 3, Key: []byte("dev-1"), Timestamp: old, Value: garbage},
		&kgo.Record{Topic: geofence.TopicPings, Partition: 5, Key: []byte("dev-2"),
			Value: marshal(t, &pb.Ping{DeviceId: "dev-2", Lat: 1.5, Groups: []string{"a"}})},
	)

	code, out, errs := fencectl(t, "topic", "read", geofence.TopicPings, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	lines := parseLines(t, out)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	// Order across partitions is not promised: find each record by key and offset.
	byKeyOffset := map[string]readLine{}
	for _, l := range lines {
		byKeyOffset[fmt.Sprintf("%s@%d", *l.Key, l.Offset)] = l
	}
	first, bad, other := byKeyOffset["dev-1@0"], byKeyOffset["dev-1@1"], byKeyOffset["dev-2@0"]
	if first.Topic != geofence.TopicPings || first.Partition != 3 || !first.Timestamp.Equal(old) {
		t.Errorf("first record: %+v, want pings/3 at %v", first, old)
	}
	if first.Value["deviceId"] != "dev-1" || first.Value["lat"] != 52.5 || first.Value["deviceTimeMs"] != "1000" || first.Error != "" {
		t.Errorf("first value %v (error %q), want the ping as protojson", first.Value, first.Error)
	}
	wantHeaders := []headerJSON{{Key: "source", Value: "gw-7"}, {Key: "bin", ValueBase64: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00})}}
	if len(first.Headers) != 2 || first.Headers[0] != wantHeaders[0] || first.Headers[1] != wantHeaders[1] {
		t.Errorf("headers %+v, want %+v", first.Headers, wantHeaders)
	}
	if bad.Partition != 3 || bad.Value != nil || bad.ValueBase64 != base64.StdEncoding.EncodeToString(garbage) ||
		!strings.Contains(bad.Error, "fencestream.v1.Ping") {
		t.Errorf("garbage record: %+v, want its bytes in base64 and an error naming the type", bad)
	}
	if other.Partition != 5 || other.Value["deviceId"] != "dev-2" {
		t.Errorf("record after the garbage one: %+v, want dev-2's ping", other)
	}

	// --limit, --partition, --from-time each narrow the same topic.
	code, out, errs = fencectl(t, "topic", "read", geofence.TopicPings, "--brokers", addr, "--limit", "1", "--partition", "3")
	wantCode(t, code, exitOK, out, errs)
	if l := parseLines(t, out); len(l) != 1 || l[0].Offset != 0 || l[0].Partition != 3 {
		t.Errorf("--limit 1 --partition 3: %s", out)
	}
	code, out, errs = fencectl(t, "topic", "read", geofence.TopicPings, "--brokers", addr, "--from-time", "1h")
	wantCode(t, code, exitOK, out, errs)
	if l := parseLines(t, out); len(l) != 1 || *l[0].Key != "dev-2" {
		t.Errorf("--from-time 1h (two records two hours old): %s", out)
	}
	code, out, errs = fencectl(t, "topic", "read", geofence.TopicPings, "--brokers", addr, "--from-time", old.Add(-time.Second).Format(time.RFC3339))
	wantCode(t, code, exitOK, out, errs)
	if l := parseLines(t, out); len(l) != 3 {
		t.Errorf("--from-time before the first record: %s", out)
	}

	// A group table's value is the state inside the kit's envelope; a
	// deleted state is null.
	st := marshal(t, &pb.DeviceState{DeviceId: "dev-1", LastHlc: 7})
	full, err := tablecodec.Encode(&kitpb.Envelope{State: st, HasState: true})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := tablecodec.Encode(&kitpb.Envelope{})
	if err != nil {
		t.Fatal(err)
	}
	produceRecords(t, addr,
		&kgo.Record{Topic: geofence.TopicDebouncer, Partition: 0, Key: []byte("dev-1"), Value: full},
		&kgo.Record{Topic: geofence.TopicDebouncer, Partition: 0, Key: []byte("dev-1"), Value: empty},
		&kgo.Record{Topic: topology.TopicDeadLetter, Partition: 0, Key: []byte("k"), Value: garbage,
			Headers: []kgo.RecordHeader{{Key: deadletter.HeaderReason, Value: []byte("decode")}}},
	)
	code, out, errs = fencectl(t, "topic", "read", geofence.TopicDebouncer, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	l := parseLines(t, out)
	if len(l) != 2 || l[0].Value["deviceId"] != "dev-1" || l[0].Value["lastHlc"] != "7" || l[1].Value != nil || l[1].Error != "" {
		t.Errorf("table topic: %s", out)
	}
	code, out, errs = fencectl(t, "topic", "read", topology.TopicDeadLetter, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	if l := parseLines(t, out); len(l) != 1 || l[0].ValueBase64 != base64.StdEncoding.EncodeToString(garbage) || l[0].Error != "" ||
		l[0].Headers[0].Value != "decode" {
		t.Errorf("dead letters (raw bytes, no declared message): %s", out)
	}
}

// TestTopicReadRefusesUndeclaredTopic names the declared topics.
func TestTopicReadRefusesUndeclaredTopic(t *testing.T) {
	code, out, errs := fencectl(t, "topic", "read", "pingz", "--brokers", "127.0.0.1:1")
	wantCode(t, code, exitUsage, out, errs)
	wantContains(t, errs, `topic "pingz" is not declared`, "declared topics: ", geofence.TopicPings+",", geofence.TopicFences+",")
	code, out, errs = fencectl(t, "topic", "read", "pings", "--from-beginning", "--from-time", "1h", "--brokers", "127.0.0.1:1")
	wantCode(t, code, exitUsage, out, errs)
	wantContains(t, errs, "not both")
	code, out, errs = fencectl(t, "topic", "read", "pings", "--from-beginning=false", "--brokers", "127.0.0.1:1")
	wantCode(t, code, exitUsage, out, errs)
	wantContains(t, errs, "needs --from-time")
}

// TestDeclaredValuesAreKnownMessages: every declared topic whose value names a
// protobuf message is decodable by fencectl (the message is linked in); only
// the dead-letter topic holds raw bytes.
func TestDeclaredValuesAreKnownMessages(t *testing.T) {
	topo, err := modules.Topology(topology.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range topo.Topics {
		if tp.Name == topology.TopicDeadLetter {
			continue
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(tp.Value)); err != nil {
			t.Errorf("topic %s: declared value %q: %v", tp.Name, tp.Value, err)
		}
	}
}

// syncBuffer is written by the command and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTopicReadFollow: --follow prints a record produced after it started and
// ends, with exit 0, when its context is cancelled (SIGINT).
func TestTopicReadFollow(t *testing.T) {
	addr := broker(t)
	createTopics(t, addr, geofence.TopicTriggers)
	produceRecords(t, addr, &kgo.Record{Topic: geofence.TopicTriggers, Partition: 1, Key: []byte("dev-1"),
		Value: marshal(t, &pb.Trigger{DeviceId: "dev-1", FenceId: "f-before"})})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errw syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"topic", "read", geofence.TopicTriggers, "--follow", "--brokers", addr}, &out, &errw)
	}()

	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), what) {
			select {
			case code := <-done:
				t.Fatalf("ended (exit %d) before printing %s\nstdout:\n%s\nstderr:\n%s", code, what, out.String(), errw.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within a minute\nstdout:\n%s\nstderr:\n%s", what, out.String(), errw.String())
			}
		}
	}
	waitFor("f-before")
	produceRecords(t, addr, &kgo.Record{Topic: geofence.TopicTriggers, Partition: 7, Key: []byte("dev-2"),
		Value: marshal(t, &pb.Trigger{DeviceId: "dev-2", FenceId: "f-after"})})
	waitFor("f-after")
	cancel()
	select {
	case code := <-done:
		wantCode(t, code, exitOK, out.String(), errw.String())
	case <-time.After(30 * time.Second):
		t.Fatal("--follow did not end within 30 s of its context being cancelled")
	}
	if l := parseLines(t, out.String()); len(l) != 2 || l[1].Partition != 7 || l[1].Value["fenceId"] != "f-after" {
		t.Errorf("follow output: %s", out.String())
	}
}
