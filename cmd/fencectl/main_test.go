package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
)

// fencectl runs one command line and returns its exit code and output.
func fencectl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errw bytes.Buffer
	code = run(ctx, args, &out, &errw)
	return code, out.String(), errw.String()
}

func wantCode(t *testing.T, got, want int, stdout, stderr string) {
	t.Helper()
	if got != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got, want, stdout, stderr)
	}
}

func wantContains(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q:\n%s", sub, s)
		}
	}
}

// broker starts an embedded broker with its data in a temp dir.
func broker(t *testing.T) string {
	t.Helper()
	b := embeddedtest.Start(t)
	return strings.Join(b.Addrs(), ",")
}

func admin(t *testing.T, addr string) (*kgo.Client, *kadm.Client) {
	t.Helper()
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc, kadm.NewClient(kc)
}

// records is the number of records in topic (sum of end offsets).
func records(t *testing.T, addr, topic string) int64 {
	t.Helper()
	_, adm := admin(t, addr)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// withTopology creates the declared topics with n partitions.
func withTopology(t *testing.T, n int) string {
	t.Helper()
	addr := broker(t)
	code, out, errs := fencectl(t, "topology", "check", "--create", "--partitions", strconv.Itoa(n), "--brokers", addr)
	wantCode(t, code, 0, out, errs)
	return addr
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "Usage: fencectl COMMAND"},
		{[]string{"--help"}, exitOK, "Commands:"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"topology"}, exitUsage, "missing subcommand"},
		{[]string{"topology", "draw"}, exitUsage, `unknown subcommand "draw"`},
		{[]string{"fences"}, exitUsage, "missing subcommand"},
		{[]string{"topology", "describe", "--nope"}, exitUsage, "flag provided but not defined: -nope"},
		{[]string{"topology", "describe", "--format", "svg"}, exitUsage, `--format "svg"`},
		{[]string{"topology", "check"}, exitUsage, "no brokers given"},
		{[]string{"skew", "--brokers", "x:1"}, exitUsage, "want exactly one TOPIC"},
		{[]string{"fences", "load", "--brokers", "x:1"}, exitUsage, "missing FILE"},
		{[]string{"fences", "load", "a.json", "--demo"}, exitUsage, "not both"},
		{[]string{"fences", "delete", "--brokers", "x:1"}, exitUsage, "missing fence ID"},
		{[]string{"sim", "--brokers", "x:1", "--rate", "0"}, exitUsage, "--rate must be"},
		{[]string{"sim", "--brokers", "x:1", "--keying", "fence"}, exitUsage, "requires key = device_id"},
		{[]string{"sim", "--brokers", "x:1", "--keying", "salted"}, exitUsage, "unknown keying"},
		{[]string{"subscriptions"}, exitUsage, "missing subcommand"},
		{[]string{"subscriptions", "list"}, exitUsage, "no brokers given"},
		{[]string{"subscriptions", "add", "--brokers", "x:1"}, exitUsage, "want one subscription ID"},
		{[]string{"subscriptions", "add", "a", "--brokers", "x:1", "--url", "https://h/x", "--secret", "s", "--type", "park"}, exitUsage, `--type "park"`},
		{[]string{"subscriptions", "disable", "--brokers", "x:1"}, exitUsage, "missing subscription ID"},
		{[]string{"broker"}, exitUsage, "--data is required"},
		{[]string{"broker", "--data", "d", "--listen", "0.0.0.0:9092"}, exitUsage, "127.0.0.1 only"},
		{[]string{"broker", "--data", "d", "--listen", "9092"}, exitUsage, `--listen "9092"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := fencectl(t, tc.args...)
			wantCode(t, code, tc.code, out, errs)
			wantContains(t, out+errs, tc.want)
		})
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for _, args := range [][]string{
		{"topology", "describe"}, {"topology", "check"}, {"partition"}, {"skew"},
		{"fences", "load"}, {"fences", "delete"}, {"fences", "list"}, {"sim"}, {"sim", "misorder"},
		{"broker"}, {"subscriptions", "add"}, {"subscriptions", "list"}, {"subscriptions", "disable"}, {"subscriptions", "rm"},
	} {
		code, out, errs := fencectl(t, append(args, "--help")...)
		wantCode(t, code, 0, out, errs)
		wantContains(t, out, "Usage: fencectl "+strings.Join(args, " "))
		if errs != "" {
			t.Errorf("%v --help wrote to stderr: %s", args, errs)
		}
	}
}

func TestPartitionSeedVectors(t *testing.T) {
	for _, tc := range []struct {
		n    string
		keys []string
		want []int
	}{
		{"6", []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6"}, []int{2, 2, 5, 1, 4, 5}},
		{"3", []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"}, []int{0, 0, 1, 1, 2, 1}},
	} {
		code, out, errs := fencectl(t, append([]string{"partition", "-n", tc.n}, tc.keys...)...)
		wantCode(t, code, 0, out, errs)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(tc.keys)+1 {
			t.Fatalf("want header and %d rows:\n%s", len(tc.keys), out)
		}
		for i, key := range tc.keys {
			f := strings.Fields(lines[i+1])
			if len(f) != 4 || f[0] != key || f[1] != strconv.Itoa(tc.want[i]) || f[2] != tc.n {
				t.Errorf("row %q, want %s on partition %d of %s", lines[i+1], key, tc.want[i], tc.n)
			}
			if wantHash := fmt.Sprintf("0x%08x", topology.Murmur2([]byte(key))); f[3] != wantHash {
				t.Errorf("%s murmur2 %s, want %s", key, f[3], wantHash)
			}
		}
	}
	// Default is 24 partitions; flags may follow the key.
	code, out, errs := fencectl(t, "partition", "veh-0001")
	wantCode(t, code, 0, out, errs)
	wantContains(t, out, fmt.Sprintf("veh-0001  %d", topology.PartitionFor("veh-0001", 24)), " 24 ")
	code, out, errs = fencectl(t, "partition", "user-1", "-n", "6")
	wantCode(t, code, 0, out, errs)
	wantContains(t, out, "user-1  2          6")
}

func TestPartitionBadKeys(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"partition"}, exitUsage, "missing KEY"},
		{[]string{"partition", "-n", "0", "k"}, exitUsage, "-n must be a positive"},
		{[]string{"partition", "-n", "x", "k"}, exitUsage, "invalid value"},
		{[]string{"partition", ""}, exitFailure, "key is empty"},
		{[]string{"partition", "ok", "bad\xff"}, exitFailure, "not valid UTF-8"},
		{[]string{"partition", strings.Repeat("k", 256)}, exitFailure, "256 bytes, limit 255"},
	} {
		code, out, errs := fencectl(t, tc.args...)
		wantCode(t, code, tc.code, out, errs)
		wantContains(t, errs, tc.want)
		if out != "" {
			t.Errorf("%q printed a result despite the error: %s", tc.args, out)
		}
	}
	// "--" lets a key start with a dash.
	code, out, errs := fencectl(t, "partition", "-n", "6", "--", "-dash")
	wantCode(t, code, 0, out, errs)
	wantContains(t, out, "-dash")
}

func TestTopologyDescribe(t *testing.T) {
	code, out, errs := fencectl(t, "topology", "describe")
	wantCode(t, code, 0, out, errs)
	composed, err := modules.Topology(topology.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, out, composed.Describe())
	code, out, errs = fencectl(t, "topology", "describe", "--format", "mermaid", "--partitions", "6")
	wantCode(t, code, 0, out, errs)
	wantContains(t, out, "flowchart", "6 partitions")
	code, out, errs = fencectl(t, "topology", "describe", "--partitions", "0")
	wantCode(t, code, exitUsage, out, errs)
}

func TestTopologyCheckCreatesThenMatches(t *testing.T) {
	addr := broker(t)
	code, out, errs := fencectl(t, "topology", "check", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, out, `MISMATCH topic "pings" does not exist`, `MISMATCH topic "fences" does not exist`)
	composed, err := modules.Topology(topology.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, errs, fmt.Sprintf("%d mismatch(es)", len(composed.Topics)))

	code, out, errs = fencectl(t, "topology", "check", "--create", "--partitions", "4", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "ok: broker")
	if !regexp.MustCompile(`(?m)^fence-triggers +4 +delete +device_id$`).MatchString(out) {
		t.Errorf("no fence-triggers row with 4 partitions:\n%s", out)
	}

	code, out, errs = fencectl(t, "topology", "check", "--partitions", "4", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
}

func TestTopologyCheckPartitionMismatch(t *testing.T) {
	addr := broker(t)
	_, adm := admin(t, addr)
	resp, err := adm.CreateTopic(context.Background(), 6, -1, nil, geofence.TopicPings)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := fencectl(t, "topology", "check", "--create", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, out, `MISMATCH topic "pings" has 6 partitions on the broker but the topology declares 24`, "keys would map to different partitions")
	if n := strings.Count(out, "MISMATCH"); n != 1 {
		t.Errorf("%d mismatches, want only pings:\n%s", n, out)
	}
}

func TestUnreachableBroker(t *testing.T) {
	file := filepath.Join(t.TempDir(), "demo.geojson")
	if err := os.WriteFile(file, fences.DemoGeoJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	const dead = "127.0.0.1:1"
	for _, args := range [][]string{
		{"topology", "check"},
		{"topology", "check", "--create"},
		{"skew", "pings"},
		{"fences", "load", file},
		{"fences", "delete", "x"},
		{"fences", "list"},
		{"sim", "--devices", "2", "--parked", "0", "--duration", "1m", "--pace", "0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			code, out, errs := fencectl(t, append(args, "--brokers", dead, "--timeout", "1s")...)
			wantCode(t, code, exitFailure, out, errs)
			wantContains(t, errs, "broker 127.0.0.1:1 unreachable", "connection refused")
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v to give up", d)
			}
		})
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const validFence = `{"type":"Feature","properties":{"id":"square","name":"Square"},
 "geometry":{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.50],[13.41,52.51],[13.40,52.51],[13.40,52.50]]]}}`

// bowtie's ring crosses itself.
const bowtie = `{"type":"Feature","properties":{"id":"bowtie","name":"Bowtie"},
 "geometry":{"type":"Polygon","coordinates":[[[13.40,52.50],[13.41,52.51],[13.41,52.50],[13.40,52.51],[13.40,52.50]]]}}`

func TestFencesLoadRejectsBadInputAndPublishesNothing(t *testing.T) {
	addr := withTopology(t, 2)
	for _, tc := range []struct {
		name string
		file string
		want []string
	}{
		{"missing file", filepath.Join(t.TempDir(), "nope.geojson"), []string{"reading fence file", "no such file or directory", "nothing published"}},
		{"invalid JSON", writeFile(t, "broken.json", `{"type":"FeatureCollection","features":[`+validFence+`,`), []string{"broken.json", "invalid JSON", "nothing published"}},
		{"not a collection", writeFile(t, "feature.json", validFence), []string{"not a GeoJSON FeatureCollection"}},
		{"self-intersecting", writeFile(t, "bowtie.geojson", `{"type":"FeatureCollection","features":[`+validFence+`,`+bowtie+`]}`),
			[]string{"bowtie.geojson", "1 of 2 features invalid", `fence #1 id="bowtie"`, "self-intersecting", "nothing published"}},
		{"empty", writeFile(t, "empty.geojson", `{"type":"FeatureCollection","features":[]}`), []string{"no features"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := fencectl(t, "fences", "load", tc.file, "--brokers", addr)
			wantCode(t, code, exitFailure, out, errs)
			wantContains(t, errs, tc.want...)
			if n := records(t, addr, geofence.TopicFences); n != 0 {
				t.Errorf("fences topic holds %d records after a rejected load", n)
			}
		})
	}
	// Dry run of a good file publishes nothing either.
	good := writeFile(t, "good.geojson", `{"type":"FeatureCollection","features":[`+validFence+`]}`)
	code, out, errs := fencectl(t, "fences", "load", good, "--dry-run")
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "square", "polygon", "1 fences valid", "dry run")
	if n := records(t, addr, geofence.TopicFences); n != 0 {
		t.Errorf("dry run published %d records", n)
	}
	code, out, errs = fencectl(t, "fences", "load", good, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "published 1 fences")
	if n := records(t, addr, geofence.TopicFences); n != 1 {
		t.Errorf("fences topic holds %d records, want 1", n)
	}
}

func TestFencesLoadWithoutTopology(t *testing.T) {
	addr := broker(t)
	code, out, errs := fencectl(t, "fences", "load", "--demo", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `topic "fences" does not exist`, "fencectl topology check --create")
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `topic "fences" does not exist`)
}

func TestFencesLoadListDelete(t *testing.T) {
	addr := withTopology(t, 2)
	code, out, errs := fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "0 fences")

	code, out, errs = fencectl(t, "fences", "load", "--demo", "--if-empty", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	n := len(fences.Demo())
	wantContains(t, out, fmt.Sprintf("published %d fences from the bundled demo set", n))

	code, out, errs = fencectl(t, "fences", "load", "--demo", "--if-empty", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, fmt.Sprintf("already holds %d records; --if-empty: nothing published", n))
	if got := records(t, addr, geofence.TopicFences); got != int64(n) {
		t.Errorf("fences topic holds %d records after --if-empty, want %d", got, n)
	}

	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, fmt.Sprintf("%d fences", n), "hospital-charite-mitte", "circle", "radius 400 m", "airport-ber", "polygon", "km²", "park-tiergarten", "(1 hole)")

	code, out, errs = fencectl(t, "fences", "delete", "airport-ber", "station-zoo", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "deleted 2 fences")
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, fmt.Sprintf("%d fences", n-2))
	if strings.Contains(out, "airport-ber") || strings.Contains(out, "station-zoo") {
		t.Errorf("deleted fences still listed:\n%s", out)
	}
	// Loading again replaces, never duplicates.
	code, out, errs = fencectl(t, "fences", "load", "--demo", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, fmt.Sprintf("\n%d fences", n))

	// Keys the topic does not hold, the empty one included (a foreign
	// producer's empty-key record can be deleted: TestFencesDeleteEmptyKey),
	// are named and nothing is written.
	code, out, errs = fencectl(t, "fences", "delete", "ok", "", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "nothing deleted")
	wantContains(t, errs, `no record with key "ok"`, `no record with key ""`)
}

func produceTo(t *testing.T, addr, topic string, partitions int32, perPartition func(p int32) int) {
	t.Helper()
	_, adm := admin(t, addr)
	resp, err := adm.CreateTopic(context.Background(), partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range perPartition(p) {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
		}
	}
	if err := kc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestSkew(t *testing.T) {
	addr := broker(t)
	produceTo(t, addr, "even", 4, func(int32) int { return 25 })
	produceTo(t, addr, "hot", 4, func(p int32) int {
		if p == 2 {
			return 97
		}
		return 1
	})
	produceTo(t, addr, "empty", 3, func(int32) int { return 0 })

	code, out, errs := fencectl(t, "skew", "even", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "topic even: 4 partitions, 100 records, max 25", "skew 1.00")
	if strings.Contains(out, "ALERT") {
		t.Errorf("even topic alerted:\n%s", out)
	}

	code, out, errs = fencectl(t, "skew", "--brokers", addr, "hot")
	wantCode(t, code, exitSkew, out, errs)
	wantContains(t, out, "max 97 (partition 2), mean 25.0, skew 3.88", "ALERT: skew 3.88 > 3 on topic hot")
	if !regexp.MustCompile(`(?m)^\s*2\s+97\s+3\.88\s*$`).MatchString(out) {
		t.Errorf("no row for partition 2:\n%s", out)
	}
	// A higher threshold silences it.
	code, out, errs = fencectl(t, "skew", "hot", "--alert", "4", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)

	code, out, errs = fencectl(t, "skew", "empty", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "no records")

	code, out, errs = fencectl(t, "skew", "no-such-topic", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `topic "no-such-topic" does not exist`)
}

func TestSim(t *testing.T) {
	addr := withTopology(t, 3)
	truth := filepath.Join(t.TempDir(), "truth.json")
	// The topics have 3 partitions: a sim declaring the default 24 must refuse,
	// or it would hash every key modulo the wrong count.
	code, out, errs := fencectl(t, "sim", "--brokers", addr, "--devices", "4", "--duration", "20s", "--pace", "0")
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `topic "pings" has 3 partitions on the broker but the topology declares 24`)
	if n := records(t, addr, geofence.TopicPings); n != 0 {
		t.Fatalf("a refused sim produced %d records", n)
	}
	code, out, errs = fencectl(t, "sim", "--brokers", addr, "--partitions", "3", "--devices", "4", "--parked", "2", "--rate", "2",
		"--duration", "20s", "--pace", "0", "--seed", "3", "--truth", truth)
	wantCode(t, code, exitOK, out, errs)
	const want = 6 * 2 * 20
	wantContains(t, out, fmt.Sprintf("sent %d pings of 6 devices", want), "simulated 20s")
	if n := records(t, addr, geofence.TopicPings); n != want {
		t.Errorf("pings topic holds %d records, want %d", n, want)
	}
	var tj truthJSON
	data, err := os.ReadFile(truth)
	if err == nil {
		err = json.Unmarshal(data, &tj)
	}
	if err != nil {
		t.Fatal(err)
	}
	if tj.Seed != 3 || len(tj.Devices) != 6 || tj.IntervalMs != 500 || len(tj.Parked) != 2 {
		t.Errorf("truth file: seed %d, %d devices, interval %d ms, %d parked", tj.Seed, len(tj.Devices), tj.IntervalMs, len(tj.Parked))
	}

	// Every ping is keyed by its device and lands where the pinned partitioner says.
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(geofence.TopicPings), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := 0
	for got < want {
		fetches := kc.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			if want := topology.PartitionFor(string(r.Key), 3); r.Partition != want {
				t.Errorf("key %s on partition %d, want %d", r.Key, r.Partition, want)
			}
			if !strings.HasPrefix(string(r.Key), "veh-") && !strings.HasPrefix(string(r.Key), "park-") {
				t.Errorf("unexpected key %q", r.Key)
			}
		})
	}
}

func TestSimMisorder(t *testing.T) {
	code, out, errs := fencectl(t, "sim", "misorder", "--devices", "40", "--parked", "0", "--duration", "20m", "--seed", "7")
	wantCode(t, code, exitOK, out, errs)
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			rows[f[0]] = f[1:]
		}
	}
	for _, k := range []string{"device", "fence", "pair", "round-robin", "null"} {
		if _, ok := rows[k]; !ok {
			t.Errorf("no row for %s:\n%s", k, out)
		}
	}
	if rows["device"][0] != "0" {
		t.Errorf("device keying misordered %s pairs per million", rows["device"][0])
	}
	if rows["null"][0] == "0" {
		t.Errorf("null keying misordered nothing:\n%s", out)
	}
	code, out, errs = fencectl(t, "sim", "misorder", "--duration", "0")
	wantCode(t, code, exitUsage, out, errs)
}

func TestFencesDeleteInvalidRecords(t *testing.T) {
	addr := withTopology(t, 2)
	demo, err := fences.ParseFeatureCollection(fences.DemoGeoJSON())
	if err != nil {
		t.Fatal(err)
	}
	value, err := codecs.For[pb.Fence]().Marshal(demo[0])
	if err != nil {
		t.Fatal(err)
	}
	kc, _ := admin(t, addr)
	recs := []*kgo.Record{
		{Key: []byte("garbage"), Value: []byte{0xff, 0xff}},
		{Key: []byte("other key"), Value: value}, // fence_id is demo[0]'s
		{Key: []byte{0xc3, 0x28}, Value: []byte("x")},
		{Key: []byte("ok-" + demo[1].GetFenceId()), Value: []byte("x")},
	}
	for _, r := range recs {
		r.Topic = geofence.TopicFences
	}
	if err := kc.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "0 fences")
	wantContains(t, errs,
		`key "garbage" at offset`, "remove it with: fencectl fences delete garbage\n",
		`fence_id "`+demo[0].GetFenceId()+`" differs from key "other key"`, "remove it with: fencectl fences delete 'other key'\n",
		"remove it with: fencectl fences delete --hex c328\n")

	// By key, by the fence_id a differently keyed record names, by hex.
	code, out, errs = fencectl(t, "fences", "delete", "garbage", demo[0].GetFenceId(), "--hex", "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs) // --hex applies to every ID
	wantContains(t, errs, "--hex key", "nothing deleted")
	code, out, errs = fencectl(t, "fences", "delete", "garbage", demo[0].GetFenceId(), "no-such", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, `record with key "other key" names fence_id "`+demo[0].GetFenceId()+`"`, "deleted 2 fences")
	wantContains(t, errs, `no record with key "no-such"`)
	code, out, errs = fencectl(t, "fences", "delete", "--hex", "c328", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "deleted 1 fences")

	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	if strings.Contains(errs, "garbage") || strings.Contains(errs, "other key") || strings.Contains(errs, "c328") {
		t.Errorf("deleted records still reported:\n%s", errs)
	}
	wantContains(t, errs, "fencectl fences delete ok-"+demo[1].GetFenceId()+"\n")
	code, out, errs = fencectl(t, "fences", "delete", "no-such", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "nothing deleted")
}

// The README's example file loads as it says.
func TestFencesLoadExampleFile(t *testing.T) {
	const file = "../../processors/fences/example.geojson"
	code, out, errs := fencectl(t, "fences", "load", "--dry-run", file)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "3 fences valid")
	addr := withTopology(t, 1)
	code, out, errs = fencectl(t, "fences", "load", file, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "published 3 fences")
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "example-museumsinsel", "polygon", "example-tempelhof-hasenheide", "multipolygon/2", "example-fernsehturm", "radius 120 m", "3 fences")
	if errs != "" {
		t.Errorf("list reported problems: %s", errs)
	}
}

// bigFenceFile writes a FeatureCollection with one n-vertex polygon.
func bigFenceFile(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"id":"big"},"geometry":{"type":"Polygon","coordinates":[[`)
	for k := 0; k <= n; k++ {
		a := 2 * math.Pi * float64(k%n) / float64(n)
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%.7f,%.7f]", 13.4+0.016*math.Cos(a), 52.5+0.01*math.Sin(a))
	}
	b.WriteString(`]]}}]}`)
	path := filepath.Join(t.TempDir(), "big.geojson")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFencesLoadRefusesOversizedRecords(t *testing.T) {
	addr := withTopology(t, 1)
	file := bigFenceFile(t, 100_000)
	code, out, errs := fencectl(t, "fences", "load", file, "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `fence "big" encodes to`, "MiB", "max.message.bytes", "simplify its geometry", "nothing published")
	if n := records(t, addr, geofence.TopicFences); n != 0 {
		t.Fatalf("%d records published", n)
	}
	// A dry run refuses it too (on main it said "1 fences valid", exit 0):
	// against the topic with --brokers, else against Kafka's default.
	code, out, errs = fencectl(t, "fences", "load", "--dry-run", file, "--brokers", addr)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `fence "big" encodes to`, "topic fences (max.message.bytes)", "nothing published")
	code, out, errs = fencectl(t, "fences", "load", "--dry-run", file)
	wantCode(t, code, exitFailure, out, errs)
	wantContains(t, errs, `fence "big" encodes to`, "Kafka's default", "give --brokers", "nothing published")
	if strings.Contains(out, "valid") {
		t.Errorf("a refused dry run says the fences are valid:\n%s", out)
	}

	// A topic that takes larger records takes it.
	_, adm := admin(t, addr)
	v := "8000000"
	resp, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &v}}, geofence.TopicFences)
	if err == nil {
		_, err = resp.On(geofence.TopicFences, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = fencectl(t, "fences", "load", "--dry-run", file, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "1 fences valid")
	code, out, errs = fencectl(t, "fences", "load", file, "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "published 1 fences")
}

// A record with an empty key (a foreign producer can write one) is listed
// with a command that removes it, and that command does (issue 17, item 8).
func TestFencesDeleteEmptyKey(t *testing.T) {
	addr := withTopology(t, 2)
	kc, _ := admin(t, addr)
	if err := kc.ProduceSync(context.Background(), &kgo.Record{Topic: geofence.TopicFences, Key: []byte{}, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, errs, `skipped invalid record with key ""`, "remove it with: fencectl fences delete --hex ''\n")
	code, out, errs = fencectl(t, "fences", "delete", "--hex", "", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "deleted 1 fences")
	code, out, errs = fencectl(t, "fences", "list", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	if strings.Contains(errs, "skipped invalid record") {
		t.Errorf("the empty-key record is still there:\n%s", errs)
	}
	code, out, errs = fencectl(t, "fences", "delete", "", "--brokers", addr)
	wantCode(t, code, exitOK, out, errs)
	wantContains(t, out, "nothing deleted")
}
