package codecs_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/codecs/hotkeypb"
)

// Run `go test ./codecs -run TestGolden -write-golden` once per schema version,
// after adding that version's fixtures, to write testdata/<version>/*.bin.
// Files already there are never overwritten: they are the compatibility record.
var writeGolden = flag.Bool("write-golden", false, "write missing golden files of the current fixtures to testdata/<version>")

func TestGoldenV1(t *testing.T) { checkGolden(t, "v1", v1Messages()) }

// v2 moved DeviceState's per-fence state from a map (field 6, now deprecated
// but still decoded) to repeated FenceEntry (field 12).
func TestGoldenV2(t *testing.T) { checkGolden(t, "v2", v2Messages()) }

// v3 added DebounceSettings.detector (6) and FenceState.evidence (6).
func TestGoldenV3(t *testing.T) { checkGolden(t, "v3", v3Messages()) }

// v4 added occupancy's DeviceMembership and OccupancyChange, Member.last_type
// (5) and fence_id (6), and Occupancy.source_next (17).
func TestGoldenV4(t *testing.T) { checkGolden(t, "v4", v4Messages()) }

func checkGolden(t *testing.T, version string, msgs map[string]proto.Message) {
	for name, want := range msgs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", version, name+".bin")
			if *writeGolden {
				if _, err := os.Stat(path); os.IsNotExist(err) {
					requireFullyPopulated(t, want.ProtoReflect())
					data, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
					t.Logf("wrote %s (%d bytes)", path, len(data))
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden bytes of %s: %v (never delete golden files)", name, err)
			}
			got := want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data, got); err != nil {
				t.Fatalf("%s %s no longer decodes: %v", version, name, err)
			}
			if u := got.ProtoReflect().GetUnknown(); len(u) > 0 {
				t.Fatalf("%s %s has %d bytes the current schema does not know: a field was removed or renumbered", version, name, len(u))
			}
			if !proto.Equal(got, want) {
				t.Fatalf("%s %s decodes to\n  %v\nwant\n  %v\na field changed number, type or meaning", version, name, got, want)
			}
		})
	}
}

// The goka codec reads the golden bytes as real messages, not poison.
func TestGoldenV1ThroughCodec(t *testing.T) {
	check := func(name string, decode func([]byte) (any, error)) {
		data, err := os.ReadFile(filepath.Join("testdata", "v1", name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := v.(*codecs.Poison); ok {
			t.Fatalf("%s golden decodes to poison: %v", name, p)
		}
		if !proto.Equal(v.(proto.Message), v1Messages()[name]) {
			t.Fatalf("%s golden through the codec = %v", name, v)
		}
	}
	check("Ping", codecs.For[pb.Ping]().Decode)
	check("Fence", codecs.For[pb.Fence]().Decode)
	check("Trigger", codecs.For[pb.Trigger]().Decode)
	check("DeviceState", codecs.For[pb.DeviceState]().Decode)
	check("Occupancy", codecs.For[pb.Occupancy]().Decode)
	check("HotKey", codecs.For[pb.HotKey]().Decode)
}

// Every message type of the schema has golden bytes in some version.
func TestGoldenCoversEveryMessage(t *testing.T) {
	msgs := pb.File_fencestream_v1_geofence_proto.Messages()
	for i := range msgs.Len() {
		name := string(msgs.Get(i).Name())
		matches, _ := filepath.Glob(filepath.Join("testdata", "*", name+".bin"))
		if len(matches) == 0 {
			t.Errorf("message %s has no golden bytes: add a fixture and run with -write-golden", name)
		}
	}
}

// requireFullyPopulated fails unless every field (recursively, except inside
// maps and lists) is set, so a golden file exercises every field of its
// version. It runs when goldens are written; afterwards the files are fixed.
func requireFullyPopulated(t *testing.T, m protoreflect.Message) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
			continue // deprecated fields are covered by the goldens of their version
		}
		if !m.Has(fd) {
			t.Fatalf("%s.%s is not set: golden bytes must exercise every field", m.Descriptor().Name(), fd.Name())
		}
		if fd.Message() != nil && !fd.IsMap() && !fd.IsList() {
			requireFullyPopulated(t, m.Get(fd).Message())
		}
	}
}

// The producer's HotKey (fencestream.kit.v1.HotKey, once generated in the
// kit's kitpb, now in codecs/hotkeypb) replaced the geofence schema's with the
// same fields and numbers: records written by the old producer decode as the
// new message, and the name the hot-keys topic declares is unchanged.
func TestKitHotKeyReadsV1HotKey(t *testing.T) {
	if got := (&hotkeypb.HotKey{}).ProtoReflect().Descriptor().FullName(); got != "fencestream.kit.v1.HotKey" {
		t.Fatalf("HotKey is %s; records and topic declarations name fencestream.kit.v1.HotKey", got)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "v1", "HotKey.bin"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := codecs.For[hotkeypb.HotKey]().Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetKey() != "dev-7" || !got.GetSalted() || got.GetSaltBuckets() != 8 || got.GetRatePerS() != 52.5 {
		t.Fatalf("v1 HotKey read as %v", got)
	}
	// The kit's kitpb.HotKey wrote exactly these bytes for these values, and
	// so must hotkeypb's: a renumbered or retyped field changes them.
	want := &hotkeypb.HotKey{Topic: "pings", Key: "dev-7", RatePerS: 52.5, Salted: true, SaltBuckets: 8, DecidedAtMs: 1_700_000_020_000}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != string(data) {
		t.Fatalf("hotkeypb.HotKey encodes as %x, the records already written are %x", enc, data)
	}
}
