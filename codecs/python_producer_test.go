package codecs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
	"github.com/fencestream/fencestream/topology/hlc"
)

// python3 finds an interpreter with kafka-python and protobuf: Debian's
// first (python3-kafka and python3-protobuf install there, while the PATH's
// python3 may be a pyenv one without them), then the PATH's.
func python3(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			tried = append(tried, py+": not found")
			continue
		}
		out, err := exec.Command(path, "-c", "import kafka, google.protobuf").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, path+": "+strings.TrimSpace(string(out)))
	}
	t.Skipf("needs python3 with kafka-python and protobuf (apt-get install python3-kafka python3-protobuf python3-snappy; .ci/run installs them): %s", strings.Join(tried, "; "))
	return ""
}

// TestPythonProducer runs codecs/PRODUCING.md's Python example (codecs/python) against
// an embedded broker: protoc generates the Python module from our .proto,
// kafka-python produces, and every ping must land on the partition the
// pinned partitioner names and decode as a Ping with the key as device_id.
func TestPythonProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and a Python process")
	}
	py := python3(t)
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("needs protoc (apt-get install protobuf-compiler; .ci/run installs it)")
	}
	gen := t.TempDir()
	if out, err := exec.Command(protoc, "-I", "proto", "--python_out="+gen, "proto/fencestream/v1/geofence.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}

	const partitions = 6
	cl := embeddedtest.Cluster(t)
	kc := embeddedtest.Client(t, cl, kgo.ConsumeTopics(geofence.TopicPings), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := geofence.Topology(geofence.Partitions(partitions)).Ensure(ctx, kadm.NewClient(kc)); err != nil {
		t.Fatal(err)
	}

	// The seed's vectors, non-ASCII keys and keys whose hashes differ in sign.
	devices := []string{"user-1", "user-2", "user-3", "user-4", "user-5", "user-6", "gerät-ä-7", "車両-8", "🚚-9", "veh-0004"}
	run := func(count int, extra ...string) []map[string]any {
		t.Helper()
		args := []string{"python/produce_pings.py", "--brokers", strings.Join(cl.Brokers, ","), "--count", "3"}
		for _, d := range devices {
			args = append(args, "--device", d)
		}
		cmd := exec.CommandContext(ctx, py, append(args, extra...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+gen, "PYTHONDONTWRITEBYTECODE=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("produce_pings.py %v: %v\n%s", extra, err, stderr.String())
		}
		var lines []map[string]any
		sc := bufio.NewScanner(&stdout)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("output line %q: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		if len(lines) != count {
			t.Fatalf("%d acknowledged pings, want %d:\n%s\n%s", len(lines), count, stdout.String(), stderr.String())
		}
		return lines
	}
	acked := run(3 * len(devices))
	acked = append(acked, run(3*len(devices), "--stamp-hlc", "--compression", "snappy")...)
	for _, a := range acked {
		if want := topology.PartitionFor(a["device"].(string), partitions); int32(a["partition"].(float64)) != want {
			t.Errorf("kafka-python put %q on partition %v, the pinned partitioner says %d", a["device"], a["partition"], want)
		}
	}

	codec := codecs.For[pb.Ping]()
	var recs []*kgo.Record
	for len(recs) < len(acked) {
		f := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d pings", len(recs), len(acked))
		}
		recs = append(recs, f.Records()...)
	}
	perDevice := map[string]int{}
	lastHLC := map[string]uint64{}
	for _, r := range recs {
		key := string(r.Key)
		if want := topology.PartitionFor(key, partitions); r.Partition != want {
			t.Errorf("%q on partition %d, want %d", key, r.Partition, want)
		}
		p, err := codec.Unmarshal(r.Value)
		if err != nil {
			t.Fatalf("%q at %d/%d is not a Ping: %v", key, r.Partition, r.Offset, err)
		}
		if p.GetDeviceId() != key || p.GetDeviceTimeMs() <= 0 || p.GetLat() < 52 || p.GetLat() > 53 || p.GetAccuracyM() != 5 {
			t.Errorf("ping %+v under key %q", p, key)
		}
		// The first run leaves the HLC to fencestream; the second stamps
		// one: physical part = device time, increasing per device.
		if perDevice[key] < 3 {
			if p.GetHlc() != 0 {
				t.Errorf("%q: hlc %d, want 0 without --stamp-hlc", key, p.GetHlc())
			}
		} else {
			if hlc.Wall(p.GetHlc()) != p.GetDeviceTimeMs() || p.GetHlc() <= lastHLC[key] {
				t.Errorf("%q: stamped hlc %d (wall %d) for device time %d after %d", key, p.GetHlc(), hlc.Wall(p.GetHlc()), p.GetDeviceTimeMs(), lastHLC[key])
			}
			lastHLC[key] = p.GetHlc()
		}
		perDevice[key]++
	}
	for _, d := range devices {
		if perDevice[d] != 6 {
			t.Errorf("%q: %d pings, want 6", d, perDevice[d])
		}
	}
	if t.Failed() {
		t.Logf("generated code in %s", filepath.Join(gen, "fencestream/v1"))
	}
}
