package versioned

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// Kafka Streams' versioned store (KIP-889), transcribed as a conformance
// table: each case is a test of
// apache/kafka streams/src/test/java/org/apache/kafka/streams/state/internals/RocksDBVersionedStoreTest.java
// (commit 1963c03d2e7104eaa9465f70b171944880da4fdf), named after it, with its
// puts (and the valid_to each put returns: -1 is
// PUT_RETURN_CODE_VALID_TO_UNDEFINED, the latest; notPut is
// PUT_RETURN_CODE_NOT_PUT) and gets as of a time with their answers. The
// store's stream time is the highest timestamp put to any key, as the
// partition's stream time is here. Constants as in that test: history
// retention (= grace) 300000 ms, segment interval 100000 ms, base 10.
const (
	kHistory = 300_000
	kSegment = kHistory / 3
	kBase    = 10
	notPut   = -2
	latest   = math.MaxInt64 // a get without a time: the latest version
)

type vop struct {
	key string
	at  int64
	// A put: value (tomb for null) and the valid_to Kafka returns.
	put     bool
	value   string
	tomb    bool
	validTo int64
	// A get: the value (null: tomb) and its validity.
	from, to int64
}

func vput(key, value string, at, validTo int64) vop {
	return vop{key: key, at: at, put: true, value: value, validTo: validTo}
}
func vdel(key string, at, validTo int64) vop {
	return vop{key: key, at: at, put: true, tomb: true, validTo: validTo}
}
func vget(key string, at int64, value string, from, to int64) vop {
	return vop{key: key, at: at, value: value, from: from, to: to}
}
func vnull(key string, at int64) vop { return vop{key: key, at: at, tomb: true} }

const S = kSegment

var kafkaVersionedCases = []struct {
	name string
	ops  []vop
}{
	{"shouldPutLatest", []vop{
		vput("k", "v", kBase, -1), vput("k", "v2", kBase+1, -1),
		vget("k", latest, "v2", kBase+1, -1),
		vget("k", kBase, "v", kBase, kBase+1), vget("k", kBase+1, "v2", kBase+1, -1), vget("k", kBase+2, "v2", kBase+1, -1),
	}},
	{"shouldPutNullAsLatest", []vop{
		vdel("k", kBase, -1), vdel("k", kBase+1, -1),
		vnull("k", latest), vnull("k", kBase), vnull("k", kBase+1), vnull("k", kBase+2),
	}},
	{"shouldPutOlderWithNonNullLatest", []vop{
		vput("k", "v", kBase, -1), vput("k", "v2", kBase-2, kBase), vput("k", "v1", kBase-1, kBase), vput("k", "v4", kBase-4, kBase-2),
		vget("k", latest, "v", kBase, -1), vget("k", kBase, "v", kBase, -1), vget("k", kBase-1, "v1", kBase-1, kBase),
		vget("k", kBase-2, "v2", kBase-2, kBase-1), vget("k", kBase-3, "v4", kBase-4, kBase-2),
	}},
	{"shouldPutOlderWithNullLatest", []vop{
		vdel("k", kBase, -1), vput("k", "v2", kBase-2, kBase), vput("k", "v1", kBase-1, kBase), vput("k", "v4", kBase-4, kBase-2),
		vnull("k", latest), vnull("k", kBase), vget("k", kBase-1, "v1", kBase-1, kBase),
		vget("k", kBase-2, "v2", kBase-2, kBase-1), vget("k", kBase-3, "v4", kBase-4, kBase-2),
	}},
	{"shouldPutOlderNullWithNonNullLatest", []vop{
		vput("k", "v", kBase, -1), vdel("k", kBase-2, kBase), vdel("k", kBase-1, kBase), vdel("k", kBase-4, kBase-2),
		vput("k", "v5", kBase-5, kBase-4), vput("k", "v3", kBase-3, kBase-2), vdel("k", kBase-6, kBase-5),
		vget("k", latest, "v", kBase, -1), vget("k", kBase, "v", kBase, -1), vnull("k", kBase-1), vnull("k", kBase-2),
		vget("k", kBase-3, "v3", kBase-3, kBase-2), vnull("k", kBase-4), vget("k", kBase-5, "v5", kBase-5, kBase-4), vnull("k", kBase-6),
	}},
	{"shouldPutOlderNullWithNullLatest", []vop{
		vdel("k", kBase, -1), vdel("k", kBase-2, kBase), vdel("k", kBase-1, kBase), vdel("k", kBase-4, kBase-2),
		vput("k", "v3", kBase-3, kBase-2), vput("k", "v5", kBase-5, kBase-4), vdel("k", kBase-6, kBase-5),
		vnull("k", latest), vnull("k", kBase), vnull("k", kBase-1), vnull("k", kBase-2),
		vget("k", kBase-3, "v3", kBase-3, kBase-2), vnull("k", kBase-4), vget("k", kBase-5, "v5", kBase-5, kBase-4), vnull("k", kBase-6),
	}},
	{"shouldPutRepeatTimestampAsLatest", []vop{
		vput("k", "to_be_replaced", kBase, -1), vput("k", "b", kBase, -1),
		vget("k", latest, "b", kBase, -1), vget("k", kBase, "b", kBase, -1), vnull("k", kBase-1),
		vdel("k", kBase, -1), vnull("k", latest), vnull("k", kBase), vnull("k", kBase-1),
		vdel("k", kBase, -1), vnull("k", latest), vnull("k", kBase), vnull("k", kBase-1),
		vput("k", "b", kBase, -1), vget("k", latest, "b", kBase, -1), vget("k", kBase, "b", kBase, -1), vnull("k", kBase-1),
	}},
	{"shouldPutRepeatTimestamps", []vop{
		vput("k", "to_be_replaced", S+20, -1), vdel("k", S-10, S+20), vput("k", "to_be_replaced", S-10, S+20),
		vdel("k", S-10, S+20), vput("k", "to_be_replaced", S-1, S+20), vput("k", "to_be_replaced", S+1, S+20),
		vdel("k", S-1, S+1), vdel("k", S+1, S+20), vdel("k", S+10, S+20), vdel("k", S+5, S+10),
		vput("k", "vp5", S+5, S+10), vput("k", "to_be_replaced", S-5, S-1), vput("k", "vn5", S-5, S-1),
		vdel("k", S+20, -1), vdel("k", S+20, -1), vput("k", "vn6", S-6, S-5),
		vnull("k", latest), vnull("k", S+30), vnull("k", S+15), vget("k", S+6, "vp5", S+5, S+10), vnull("k", S+2),
		vnull("k", S), vnull("k", S-1), vget("k", S-5, "vn5", S-5, S-1), vget("k", S-6, "vn6", S-6, S-5), vnull("k", S-8),
	}},
	{"shouldPutIntoMultipleSegments", []vop{
		vdel("k", S-20, -1), vput("k", "vn10", S-10, -1), vdel("k", S-1, -1), vdel("k", S+1, -1), vput("k", "vp10", S+10, -1), vdel("k", S+20, -1),
		vnull("k", latest), vnull("k", S+30), vget("k", S+15, "vp10", S+10, S+20), vnull("k", S+5), vnull("k", S+2), vnull("k", S),
		vnull("k", S-1), vget("k", S-5, "vn10", S-10, S-1), vnull("k", S-15),
	}},
	{"shouldMoveRecordToOlderSegmentDuringPut", []vop{
		vput("k", "vp20", S+20, -1), vput("k", "vp10", S+10, S+20), vput("k", "vn10", S-10, S+10),
		vput("k", "vn2", S-2, S+10), vput("k", "vn1", S-1, S+10), vput("k", "vp1", S+1, S+10),
		vget("k", latest, "vp20", S+20, -1), vget("k", S+30, "vp20", S+20, -1), vget("k", S+15, "vp10", S+10, S+20),
		vget("k", S+5, "vp1", S+1, S+10), vget("k", S, "vn1", S-1, S+1), vget("k", S-1, "vn1", S-1, S+1),
		vget("k", S-2, "vn2", S-2, S-1), vget("k", S-5, "vn10", S-10, S-2),
	}},
	{"shouldMoveRecordToOlderSegmentWithNullsDuringPut", []vop{
		vdel("k", S+20, -1), vdel("k", S-1, S+20), vdel("k", S+1, S+20), vdel("k", S-10, S-1), vdel("k", S+10, S+20),
		vput("k", "vp5", S+5, S+10), vput("k", "vn5", S-5, S-1), vput("k", "vn6", S-6, S-5),
		vnull("k", latest), vnull("k", S+30), vnull("k", S+15), vget("k", S+6, "vp5", S+5, S+10), vnull("k", S+2), vnull("k", S),
		vnull("k", S-1), vget("k", S-5, "vn5", S-5, S-1), vget("k", S-6, "vn6", S-6, S-5), vnull("k", S-8),
	}},
	{"shouldFallThroughToExistingOlderSegmentAsLatestDuringPut", []vop{
		vdel("k", S-5, -1), vput("k", "vn6", S-6, S-5), vput("k", "vp20", S+20, -1), vdel("k", S+10, S+20),
		vdel("k", S-1, S+10), vput("k", "vn2", S-2, S-1),
		vget("k", latest, "vp20", S+20, -1), vget("k", S+30, "vp20", S+20, -1), vnull("k", S+12), vnull("k", S), vnull("k", S-1),
		vget("k", S-2, "vn2", S-2, S-1), vnull("k", S-5), vget("k", S-6, "vn6", S-6, S-5),
	}},
	{"shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo", []vop{
		vput("k", "vp30", S+30, -1), vdel("k", S-10, S+30), vput("k", "vn5", S-5, S+30), vput("k", "vn1", S-1, S+30), vdel("k", S-2, S-1),
		vget("k", latest, "vp30", S+30, -1), vget("k", S+10, "vn1", S-1, S+30), vget("k", S-1, "vn1", S-1, S+30),
		vnull("k", S-2), vget("k", S-5, "vn5", S-5, S-2), vnull("k", S-10),
	}},
	{"shouldNotPutExpired", []vop{
		vput("k", "v", kHistory+10, -1),
		vput("k1", "v1", kHistory+10-kHistory, -1), vget("k1", latest, "v1", kHistory+10-kHistory, -1),
		vput("k2", "v2", kHistory+9-kHistory, notPut), vnull("k2", latest),
	}},
	{"shouldNotDeleteExpired", []vop{
		vput("k1", "v1", 1, -1), vput("k2", "v2", 1, -1), vput("kother", "vother", kHistory+10, -1),
		vdel("k1", kHistory+10-kHistory, -1), vnull("k1", latest),
		vdel("k2", kHistory+9-kHistory, notPut), vget("k2", latest, "v2", 1, -1),
	}},
	{"shouldGetFromOlderSegments", []vop{
		vdel("ko", S-10, -1), vdel("ko", 2*S-10, -1), vdel("ko", 3*S-10, -1),
		vnull("k", S-20),
		vput("k", "v", S-20, -1), vdel("k", S-10, -1),
		vnull("k", S-30), vget("k", S-15, "v", S-20, S-10), vnull("k", S-5),
		vput("k", "v2", 3*S-20, -1), vdel("k", 3*S-10, -1),
		vnull("k", S-30), vget("k", S-15, "v", S-20, S-10), vnull("k", S-5),
	}},
	{"shouldGetExpiredIfLatestValue", []vop{
		vput("k", "v", 1, -1), vput("ko", "vo_old", 1, -1), vput("ko", "vo_new", kHistory+12, -1),
		vget("k", 10, "v", 1, -1), // the latest never expires
		vnull("ko", 10),
	}},
	{"shouldDistinguishEmptyAndNull", []vop{
		vdel("k", S+20, -1), vdel("k", S-10, S+20), vdel("k", S-1, S+20), vdel("k", S+1, S+20), vdel("k", S+10, S+20),
		vput("k", "", S+5, S+10), vput("k", "", S-5, S-1), vput("k", "", S-6, S-5),
		vnull("k", latest), vnull("k", S+30), vnull("k", S+15), vget("k", S+6, "", S+5, S+10), vnull("k", S+2), vnull("k", S),
		vnull("k", S-1), vget("k", S-5, "", S-5, S-1), vget("k", S-6, "", S-6, S-5), vnull("k", S-8),
	}},
	// shouldNotGetExpired, where fencestream differs on purpose: Kafka
	// expires k's history when another key (ko) advances the store's stream
	// time; here a read sees the stream time of k's own last write (see
	// versioned.go), so v_old is still answered after ko's puts, and expires
	// once a write of k itself carries the stream time past it.
	{"shouldNotGetExpired (per-key reads)", []vop{
		vput("k", "v_old", 0, -1), vput("k", "v", S-10, -1),
		vget("k", S-11, "v_old", 0, S-10),
		vput("ko", "vo", kHistory+S-11, -1),
		vget("k", S-11, "v_old", 0, S-10),
		vput("ko", "vo2", kHistory+S-10, -1),
		vget("k", S-11, "v_old", 0, S-10), // Kafka: null
		vput("k", "v3", kHistory+S-10, -1),
		vnull("k", S-11), // expired by k's own write
		vget("k", S-10, "v", S-10, kHistory+S-10),
	}},
}

// runVersionedCase replays ops against one store of sets (one per key),
// the store's stream time being the highest put timestamp, and returns the
// mismatches.
func runVersionedCase(ops []vop, spec Spec) []string {
	sets := map[string]*kitpb.VersionSet{}
	var stream int64 = math.MinInt64
	var bad []string
	for i, op := range ops {
		set := sets[op.key]
		if op.put {
			if set == nil {
				set = &kitpb.VersionSet{}
				sets[op.key] = set
			}
			var val []byte
			if !op.tomb {
				b, err := marshalOpts.Marshal(wrapperspb.String(op.value))
				if err != nil {
					return []string{err.Error()}
				}
				val = b
			}
			stream = max(stream, op.at)
			res, err := putVersion(set, op.at, val, op.tomb, stream, spec)
			got := res.validToMs
			if errors.Is(err, ErrBeyondHistory) {
				got = notPut
			} else if err != nil {
				return []string{err.Error()}
			}
			if got != op.validTo {
				bad = append(bad, fmt.Sprintf("op %d put %s@%d: valid_to %d, want %d", i, op.key, op.at, got, op.validTo))
			}
			continue
		}
		at := time.UnixMilli(op.at)
		if op.at == latest {
			at = time.UnixMilli(math.MaxInt64 / 1_000_000)
		}
		v, err := AsOf[wrapperspb.StringValue](set, at)
		if err != nil {
			return []string{err.Error()}
		}
		var got, want string
		switch {
		case v.Found():
			to := int64(-1)
			if !v.ValidTo.IsZero() {
				to = v.ValidTo.UnixMilli()
			}
			got = fmt.Sprintf("%q [%d, %d)", v.Value.GetValue(), v.ValidFrom.UnixMilli(), to)
		default:
			got = "null"
		}
		if op.tomb {
			want = "null"
		} else {
			want = fmt.Sprintf("%q [%d, %d)", op.value, op.from, op.to)
		}
		if got != want {
			bad = append(bad, fmt.Sprintf("op %d get %s as of %d: %s, want %s", i, op.key, op.at, got, want))
		}
	}
	return bad
}

func TestVersionedConformance(t *testing.T) {
	spec := Spec{History: kHistory * time.Millisecond}.withDefaults()
	for _, c := range kafkaVersionedCases {
		t.Run(c.name, func(t *testing.T) {
			if bad := runVersionedCase(c.ops, spec); len(bad) > 0 {
				t.Fatal(strings.Join(bad, "\n"))
			}
		})
	}
}

// A key's versions are bounded (rule 15): past retention they are dropped
// (never the latest), and beyond MaxVersions the oldest go early — after
// which nothing older than the oldest kept is answered, nor put, rather than
// a wrong version.
func TestVersionedBounds(t *testing.T) {
	spec := Spec{History: 100 * time.Millisecond, MaxVersions: 4}
	set := &kitpb.VersionSet{}
	put := func(at int64) error {
		_, err := putVersion(set, at, []byte{byte(at)}, false, at, spec)
		return err
	}
	get := func(at int64) (from int64, beyond bool) {
		i, beyond := versionAt(set, at)
		if i < 0 {
			return -1, beyond
		}
		return set.GetVersions()[i].GetValidFromMs(), false
	}
	// Retention: versions every 10 ms up to 1000; history 100 ms keeps
	// those valid at 900 and after.
	spec.MaxVersions = 64
	for at := int64(0); at <= 1000; at += 10 {
		if err := put(at); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(set.GetVersions()); n != 11 {
		t.Fatalf("%d versions kept with 100 ms of history at 10 ms intervals, want 11 (900..1000)", n)
	}
	if from, beyond := get(900); beyond || from != 900 {
		t.Fatalf("as of 900 (within history): from %d beyond %v", from, beyond)
	}
	if _, beyond := get(899); !beyond {
		t.Fatal("as of 899 (older than history) answered")
	}
	if from, _ := get(5000); from != 1000 {
		t.Fatalf("latest: from %d", from)
	}
	// The latest never expires: one version, any age.
	lone := &kitpb.VersionSet{}
	if _, err := putVersion(lone, 5, nil, false, 1_000_000, spec); !errors.Is(err, ErrBeyondHistory) {
		t.Fatalf("a put older than stream time minus history: %v", err)
	}
	if lone.GetExpired() != 1 || len(lone.GetVersions()) != 0 {
		t.Fatalf("expired put: %v", lone)
	}
	// A key's only version, at 1, and an expired put seen at stream time
	// 1000 (other keys moved it): as of 500, older than the history, the
	// latest still answers (shouldGetExpiredIfLatestValue, per key).
	lone = &kitpb.VersionSet{}
	if _, err := putVersion(lone, 1, nil, false, 1, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := putVersion(lone, 5, nil, false, 1000, spec); !errors.Is(err, ErrBeyondHistory) {
		t.Fatalf("a put older than stream time minus history: %v", err)
	}
	if i, beyond := versionAt(lone, 500); beyond || i != 0 {
		t.Fatalf("the latest version expired: index %d beyond %v", i, beyond)
	}
	if _, beyond := versionAt(lone, 0); !beyond {
		t.Fatal("as of 0, before the latest and older than the history, answered")
	}

	// The bound on versions: 4 within 100 ms of history.
	spec.MaxVersions = 4
	set = &kitpb.VersionSet{}
	for _, at := range []int64{10, 20, 30, 40, 50, 60} {
		if err := put(at); err != nil {
			t.Fatal(err)
		}
	}
	if n, ev := len(set.GetVersions()), set.GetEvicted(); n != 4 || ev != 2 || set.GetFloorMs() != 30 {
		t.Fatalf("%d versions, %d evicted, floor %d; want 4, 2, 30", n, ev, set.GetFloorMs())
	}
	if _, beyond := get(25); !beyond {
		t.Fatal("as of 25, before the oldest kept version (evicted history), answered")
	}
	if from, beyond := get(35); beyond || from != 30 {
		t.Fatalf("as of 35: from %d beyond %v", from, beyond)
	}
	// A late put into the evicted range would make 20..30 answer it: dropped.
	if err := put(25); !errors.Is(err, ErrBeyondHistory) {
		t.Fatalf("late put below the floor: %v", err)
	}
	if from, _ := get(35); from != 30 {
		t.Fatalf("after the refused put, as of 35: from %d", from)
	}
}

func TestVersionSpecValidate(t *testing.T) {
	err := Spec{History: -time.Second, MaxVersions: MaxVersionsPerKey + 1}.validate()
	if err == nil || !strings.Contains(err.Error(), "History: must not be negative") || !strings.Contains(err.Error(), "MaxVersions: must be 1 to 4096, got 4097") {
		t.Fatalf("validate: %v", err)
	}
	if err := (Spec{}).withDefaults().validate(); err != nil {
		t.Fatalf("the zero spec with defaults: %v", err)
	}
}

// BenchmarkVersionedPut: a put to a key holding DefaultMaxVersions versions
// within its history (the bound evicts one per put), and a read as of a
// time in the middle of them; the encoded set's size is reported.
func BenchmarkVersionedPut(b *testing.B) {
	spec := Spec{History: 24 * time.Hour}.withDefaults()
	val, err := marshalOpts.Marshal(wrapperspb.String("Depot, north gate: a fence name of some length"))
	if err != nil {
		b.Fatal(err)
	}
	set := &kitpb.VersionSet{}
	at := int64(1_000_000)
	for range spec.MaxVersions {
		at += 1000
		if _, err := putVersion(set, at, val, false, at, spec); err != nil {
			b.Fatal(err)
		}
	}
	enc, err := marshalOpts.Marshal(set)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("put", func(b *testing.B) {
		for b.Loop() {
			at += 1000
			if _, err := putVersion(set, at, val, false, at, spec); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(enc)), "set-bytes")
	})
	b.Run("asof", func(b *testing.B) {
		mid := time.UnixMilli(set.GetVersions()[len(set.GetVersions())/2].GetValidFromMs() + 1)
		for b.Loop() {
			if _, err := AsOf[wrapperspb.StringValue](set, mid); err != nil {
				b.Fatal(err)
			}
		}
	})
}
