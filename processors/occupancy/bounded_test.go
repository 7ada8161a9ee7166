package occupancy_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/grouptest"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/occupancy"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/embedded/embeddedtest"
	"github.com/fencestream/fencestream/topology/hlc"
)

// table is occupancy-table in memory, driven as the processor drives it: a
// Forward sends the trigger on to the part PartKey names. count is the sum of
// every record's count, kept from each Apply's change, so a test can check the
// fence's total after every trigger without reading every record.
type table struct {
	t     testing.TB
	lim   occupancy.Limits
	recs  map[string]*geofencepb.Occupancy
	count int64
	hops  int
}

func newTable(t testing.TB, lim occupancy.Limits) *table {
	if lim.MaxMembers == 0 {
		lim.MaxMembers = occupancy.DefaultMaxMembers
	}
	return &table{t: t, lim: lim, recs: map[string]*geofencepb.Occupancy{}}
}

func (tb *table) apply(tr *geofencepb.Trigger) (last occupancy.Result, key string) {
	tb.t.Helper()
	key = tr.FenceId
	for {
		occ := tb.recs[key]
		if occ == nil {
			occ = &geofencepb.Occupancy{FenceId: tr.FenceId}
			tb.recs[key] = occ
		}
		before := occ.Count
		_, res := occupancy.Apply(occ, tr, tb.lim)
		tb.count += occ.Count - before
		if max := tb.lim.MaxMembers; len(occ.Members) > max {
			tb.t.Fatalf("record %s holds %d members, limit %d", key, len(occ.Members), max)
		}
		if res != occupancy.Forward {
			return res, key
		}
		key = occupancy.PartKey(key, occ, tr.DeviceId)
		tb.hops++
	}
}

func (tb *table) get(key string) (*geofencepb.Occupancy, error) { return tb.recs[key], nil }

// largest is the key and encoded size of the biggest record.
func (tb *table) largest() (string, int) {
	key, size := "", 0
	for k, occ := range tb.recs {
		if n := proto.Size(occ); n > size {
			key, size = k, n
		}
	}
	return key, size
}

// holders checks that no device is held by two records of a fence and
// returns the devices inside, sorted.
func (tb *table) holders(fence string) []string {
	tb.t.Helper()
	held := map[string]string{}
	var inside []string
	for key, occ := range tb.recs {
		if occ.FenceId != fence {
			continue
		}
		for dev, m := range occ.Members {
			if other, ok := held[dev]; ok {
				tb.t.Fatalf("device %s held by both %s and %s", dev, other, key)
			}
			held[dev] = key
			if m.Inside {
				inside = append(inside, dev)
			}
		}
	}
	sort.Strings(inside)
	return inside
}

// at is a trigger stamped in HLC time: ms is the wall part.
func at(device, fence string, typ geofencepb.TriggerType, ms int64, logical uint16) *geofencepb.Trigger {
	h := hlc.Pack(ms, logical)
	return &geofencepb.Trigger{
		TriggerId: debounce.TriggerID(device, fence, typ, h), DeviceId: device, FenceId: fence,
		Type: typ, Reason: confirmed, EventTimeMs: ms, Hlc: h, CatalogueVersion: 1,
	}
}

// TestRecordBoundWorstCase: a record at its limits with every id as long as
// the key rules allow encodes within RecordBound, which is within
// MaxRecordBytes; limits that would allow more are refused.
func TestRecordBoundWorstCase(t *testing.T) {
	lim := occupancy.Limits{}
	long := func(i int) string {
		s := fmt.Sprintf("%08d", i)
		return s + strings.Repeat("x", topology.MaxKeyBytes-len(s))
	}
	occ := &geofencepb.Occupancy{
		FenceId: long(0), Count: math.MaxInt64, EntersTotal: math.MaxUint64, ExitsTotal: math.MaxUint64,
		LastChangeMs: -1, CatalogueVersion: math.MaxUint64, DuplicatesDropped: math.MaxUint64,
		StaleDropped: math.MaxUint64, DwellsTotal: math.MaxUint64, SaltBuckets: math.MaxUint32,
		WatermarkHlc: math.MaxUint64, PrunedHlc: math.MaxUint64, ExpiredDropped: math.MaxUint64, NextPruneHlc: math.MaxUint64,
		Members: map[string]*geofencepb.Member{},
	}
	for i := range occupancy.DefaultMaxMembers {
		occ.Members[long(i)] = &geofencepb.Member{Inside: true, LastHlc: math.MaxUint64, SinceMs: -1,
			LastTriggerId: strings.Repeat("t", occupancy.MaxTriggerIDBytes)}
	}
	for i := range occupancy.DefaultDevicesCap {
		occ.Devices = append(occ.Devices, long(i))
	}
	size, bound := proto.Size(occ), lim.RecordBound()
	t.Logf("worst-case record %d bytes, bound %d, stated %d", size, bound, occupancy.MaxRecordBytes)
	if size > bound || bound > occupancy.MaxRecordBytes {
		t.Fatalf("worst-case record %d bytes, bound %d, stated %d", size, bound, occupancy.MaxRecordBytes)
	}
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (occupancy.Limits{MaxMembers: 400}).Validate(); err == nil {
		t.Error("limits above the stated bound accepted")
	}
	if _, err := occupancy.New(geofence.Topology(), occupancy.WithDevicesCap(1000)); err == nil {
		t.Error("New accepted a devices cap whose records pass the bound")
	}
	tr := trig("veh-1", "f", enter, 10)
	tr.TriggerId = strings.Repeat("t", occupancy.MaxTriggerIDBytes+1)
	if err := occupancy.Validate("veh-1", tr); err == nil {
		t.Error("an over-long trigger_id passed Validate")
	}
}

// TestHorizonPrunesAndExpires: a device that left is forgotten once the
// record's watermark is a horizon past its last trigger; afterwards its stale
// triggers are expired (never a negative count, never re-admitted), while a
// newer stay is counted. Devices inside are never forgotten.
func TestHorizonPrunesAndExpires(t *testing.T) {
	lim := occupancy.Limits{Horizon: time.Minute}
	occ := &geofencepb.Occupancy{}
	step := func(tr *geofencepb.Trigger, want occupancy.Result, count int64) {
		t.Helper()
		if _, res := occupancy.Apply(occ, tr, lim); res != want || occ.Count != count {
			t.Fatalf("%s: %v count %d, want %v %d", tr.TriggerId, res, occ.Count, want, count)
		}
		checkInvariants(t, occ, occupancy.DefaultDevicesCap)
	}
	const ms = baseMs
	aIn, aOut := at("a", "f", enter, ms, 0), at("a", "f", exit, ms+1000, 0)
	step(aIn, occupancy.Applied, 1)
	step(aOut, occupancy.Applied, 0)
	step(at("b", "f", enter, ms+2000, 0), occupancy.Applied, 1)
	if occ.Members["a"] == nil {
		t.Fatal("a forgotten within the horizon")
	}
	// Two minutes later: a left more than a horizon ago; b is inside and stays.
	step(at("c", "f", enter, ms+120_000, 0), occupancy.Applied, 2)
	if occ.Members["a"] != nil || occ.Members["b"] == nil || occ.PrunedHlc != aOut.Hlc {
		t.Fatalf("after the horizon: members %v, pruned_hlc %d (a's exit %d)", occ.Members, occ.PrunedHlc, aOut.Hlc)
	}
	step(aOut, occupancy.Expired, 2) // its last trigger again
	step(aIn, occupancy.Expired, 2)  // a stale ENTER does not re-admit it
	step(at("a", "f", exit, ms+500, 0), occupancy.Expired, 2)
	if occupancy.Inside(occ, "a") || occ.ExpiredDropped != 3 {
		t.Fatalf("a inside %v, expired %d", occupancy.Inside(occ, "a"), occ.ExpiredDropped)
	}
	// A stay newer than the forgotten one is counted.
	step(at("a", "f", enter, ms+121_000, 0), occupancy.Applied, 3)
	// A late EXIT of a device never seen, past the horizon but above
	// pruned_hlc: applied (nothing to decrement) and forgotten at once.
	step(at("d", "f", exit, ms+30_000, 0), occupancy.Applied, 3)
	if occ.Members["d"] != nil || occ.PrunedHlc != hlc.Pack(ms+30_000, 0) {
		t.Fatalf("late EXIT: member %v, pruned_hlc %d", occ.Members["d"], occ.PrunedHlc)
	}
	if !slices.Equal(occ.Devices, []string{"a", "b", "c"}) || occ.EntersTotal-occ.ExitsTotal != 3 {
		t.Fatalf("devices %v enters %d exits %d", occ.Devices, occ.EntersTotal, occ.ExitsTotal)
	}
}

// TestSplitSpreadsNewDevices: a full record admits no new device; new devices
// go to salted parts, devices it holds stay with it, and Total sums them.
func TestSplitSpreadsNewDevices(t *testing.T) {
	lim := occupancy.Limits{MaxMembers: 4, DevicesCap: 3}
	tb := newTable(t, lim)
	var devs []string
	for i := range 40 {
		d := fmt.Sprintf("veh-%02d", i)
		devs = append(devs, d)
		res, key := tb.apply(at(d, "depot", enter, baseMs+int64(i), 0))
		if res != occupancy.Applied || (i < 4) != (key == "depot") {
			t.Fatalf("%s: %v at %s", d, res, key)
		}
		if i >= 4 {
			if n, ok := strings.CutPrefix(key, "depot#"); !ok || len(n) > 2 {
				t.Fatalf("%s stored under %q, want depot#0…depot#31", d, key)
			}
		}
	}
	root := tb.recs["depot"]
	if root.SaltBuckets != occupancy.SaltBuckets || len(root.Members) != 4 {
		t.Fatalf("root: salt_buckets %d members %d", root.SaltBuckets, len(root.Members))
	}
	total, err := occupancy.Total(tb.get, "depot", 5)
	if err != nil {
		t.Fatal(err)
	}
	if total.Count != 40 || total.EntersTotal != 40 || !slices.Equal(total.Devices, devs[:5]) || len(total.Members) != 0 {
		t.Fatalf("total %v", total)
	}
	if !slices.Equal(tb.holders("depot"), devs) {
		t.Fatal("inside devices differ")
	}
	// A held device stays at the root; a part's device stays in its part.
	if _, key := tb.apply(at("veh-01", "depot", exit, baseMs+100, 0)); key != "depot" {
		t.Fatalf("veh-01 exit applied at %s", key)
	}
	_, key := tb.apply(at("veh-30", "depot", exit, baseMs+101, 0))
	if _, again := tb.apply(at("veh-30", "depot", enter, baseMs+102, 0)); again != key || key == "depot" {
		t.Fatalf("veh-30 moved from %s to %s", key, again)
	}
	if total, _ = occupancy.Total(tb.get, "depot", 5); total.Count != 39 || tb.count != 39 {
		t.Fatalf("count %d (running %d), want 39", total.Count, tb.count)
	}
	// Parts are never read as fences of their own.
	if occupancy.IsPart("depot", root) || !occupancy.IsPart(key, tb.recs[key]) {
		t.Fatal("IsPart")
	}
	// A fence that never split is its record.
	tb.apply(at("veh-1", "yard", enter, baseMs, 0))
	if y, _ := occupancy.Total(tb.get, "yard", 5); y != tb.recs["yard"] {
		t.Fatal("Total of an unsplit fence is not its record")
	}
	if o, err := occupancy.Total(tb.get, "nowhere", 5); o != nil || err != nil {
		t.Fatalf("absent fence: %v %v", o, err)
	}
}

// TestBoundedProperty: random histories of many devices over many horizons,
// delivered out of order and with duplicates but never later than the
// horizon, through records small enough to split and old enough to prune: the
// fence's total equals the ground truth, no device is held twice and no
// record exceeds its limit.
func TestBoundedProperty(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 15))
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	const horizonMs = 10_000
	pruning, splits := 0, 0
	for round := range rounds {
		lim := occupancy.Limits{MaxMembers: 2 + r.IntN(8), DevicesCap: 1 + r.IntN(5), Horizon: horizonMs * time.Millisecond}
		fence := fmt.Sprintf("f%d", round)
		nDev := 20 + r.IntN(200)
		type delivery struct {
			at int64
			tr *geofencepb.Trigger
		}
		var deliveries []delivery
		truth := map[string]bool{}
		for d := range nDev {
			dev := fmt.Sprintf("veh-%03d", d)
			ms := baseMs + int64(r.IntN(20*horizonMs))
			inside := false
			for range 1 + r.IntN(8) {
				ms += 1 + int64(r.IntN(3*horizonMs)) // some gaps are longer than the horizon
				typ := enter
				switch {
				case inside && r.IntN(4) == 0:
					typ = dwell
				case inside:
					typ, inside = exit, false
				default:
					inside = true
				}
				tr := at(dev, fence, typ, ms, uint16(d))
				// Delivered up to half a horizon late, sometimes twice.
				for range 1 + r.IntN(2) {
					deliveries = append(deliveries, delivery{ms + int64(r.IntN(horizonMs/2)), tr})
				}
			}
			truth[dev] = inside
		}
		sort.SliceStable(deliveries, func(i, j int) bool { return deliveries[i].at < deliveries[j].at })
		tb := newTable(t, lim)
		for _, dl := range deliveries {
			if res, key := tb.apply(dl.tr); res == occupancy.Invalid {
				t.Fatalf("%s invalid at %s", dl.tr.TriggerId, key)
			}
			if tb.count < 0 {
				t.Fatalf("count %d", tb.count)
			}
		}
		var want []string
		for dev, in := range truth {
			if in {
				want = append(want, dev)
			}
		}
		sort.Strings(want)
		if got := tb.holders(fence); !slices.Equal(got, want) {
			t.Fatalf("round %d: inside %v, truth %v", round, got, want)
		}
		total, _ := occupancy.Total(tb.get, fence, lim.DevicesCap)
		if total.Count != int64(len(want)) || tb.count != total.Count || !slices.Equal(total.Devices, want[:min(len(want), lim.DevicesCap)]) {
			t.Fatalf("round %d: total %d (running %d) devices %v, truth %d", round, total.Count, tb.count, total.Devices, len(want))
		}
		// Nothing delivered within the horizon is ever expired.
		for key, occ := range tb.recs {
			if occ.ExpiredDropped != 0 {
				t.Fatalf("round %d: %s expired %d triggers delivered within the horizon", round, key, occ.ExpiredDropped)
			}
			if occ.PrunedHlc > 0 {
				pruning++
			}
			checkInvariants(t, occ, lim.DevicesCap)
		}
		splits += len(tb.recs) - 1
	}
	if pruning == 0 || splits == 0 {
		t.Fatalf("the histories never pruned (%d) or split (%d)", pruning, splits)
	}
	t.Logf("%d records pruned, %d parts", pruning, splits)
}

// bigFence is the history of n devices entering one fence and then leaving
// it, a millisecond apart, delivered in shuffled blocks of 64 with every 16th
// trigger delivered twice. want[i] is the fence's count after delivery i.
func bigFence(n int) (order []*geofencepb.Trigger, want []int64) {
	r := rand.New(rand.NewPCG(uint64(n), 200))
	var count int64
	seen := map[*geofencepb.Trigger]bool{}
	for phase, typ := range []geofencepb.TriggerType{enter, exit} {
		for start := 0; start < n; start += 64 {
			var block []*geofencepb.Trigger
			for i := start; i < min(n, start+64); i++ {
				tr := at(fmt.Sprintf("veh-%06d", i), "zone-mitte-core", typ, baseMs+int64(phase*n+i), 0)
				block = append(block, tr)
				if i%16 == 0 {
					block = append(block, tr)
				}
			}
			r.Shuffle(len(block), func(i, j int) { block[i], block[j] = block[j], block[i] })
			for _, tr := range block {
				if !seen[tr] {
					seen[tr] = true
					count += 1 - 2*int64(phase)
				}
				order = append(order, tr)
				want = append(want, count)
			}
		}
	}
	return order, want
}

var bigGroup = flag.Bool("big", false, "run TestBigFenceThroughGroup with 200,000 devices (about 2 minutes) instead of 20,000")

func bigFenceSize(t *testing.T) int {
	if testing.Short() || raceEnabled {
		return 20_000
	}
	return 200_000
}

// TestBigFenceBounded: 200,000 devices enter one fence and leave it, through
// the pure functions with the default limits: the fence's count is exact
// after every trigger, and no record passes the bound at any time.
func TestBigFenceBounded(t *testing.T) {
	n := bigFenceSize(t)
	order, want := bigFence(n)
	tb := newTable(t, occupancy.Limits{})
	bound := tb.lim.RecordBound()
	biggest := 0
	for i, tr := range order {
		_, key := tb.apply(tr)
		if tb.count != want[i] {
			t.Fatalf("after %d triggers (%s): count %d, want %d", i+1, tr.TriggerId, tb.count, want[i])
		}
		if i%97 == 0 {
			biggest = max(biggest, proto.Size(tb.recs[key]))
		}
		if i == len(order)/2-1 || i == len(order)-1 {
			key, size := tb.largest()
			biggest = max(biggest, size)
			total, _ := occupancy.Total(tb.get, "zone-mitte-core", 0)
			if size > bound || total.Count != want[i] || total.EntersTotal != uint64(n) {
				t.Fatalf("after %d triggers: largest record %s %d bytes (bound %d), total %v", i+1, key, size, bound, total.GetCount())
			}
		}
	}
	t.Logf("%d devices: %d triggers, %d records, %d forwards, largest record %d bytes (bound %d)", n, len(order), len(tb.recs), tb.hops, biggest, bound)
}

// TestBigFenceThroughGroup: the big fence through the occupancy group (Goka's
// tester): triggers keyed by device, re-keyed by fence, forwarded to salted
// parts over the loop topic. The fence's count, summed from the table's
// changelog, is exact after every trigger; no record written passes the
// bound; every split is recorded once on hot-keys; and Total over the table
// equals the truth.
//
// Goka's tester costs ~0.25 ms per trigger here, so the default is 20,000
// devices (2,000 under -short or -race); -big runs 200,000:
//
//	go test ./processors/occupancy/ -run BigFenceThroughGroup -v -args -big
func TestBigFenceThroughGroup(t *testing.T) {
	n := 20_000
	switch {
	case *bigGroup:
		n = 200_000
	case testing.Short() || raceEnabled:
		n = 2_000
	}
	order, want := bigFence(n)
	h := newHarness(t)
	changelog := h.tt.NewQueueTracker(geofence.TopicOccupancy)
	hotKeys := h.tt.NewQueueTracker(topology.TopicHotKeys)
	bound := occupancy.Limits{}.RecordBound()
	counts := map[string]int64{}
	var sum int64
	biggest, writes := 0, 0
	for i, tr := range order {
		h.send(tr)
		for {
			key, _, ok := changelog.Next()
			if !ok {
				break
			}
			occ := h.occ(key) // the table, not the changelog value: the kit may wrap what it writes
			sum += occ.Count - counts[key]
			counts[key] = occ.Count
			if writes++; writes%97 == 0 {
				biggest = max(biggest, proto.Size(occ))
			}
		}
		if sum != want[i] {
			t.Fatalf("after %d triggers (%s): count %d, want %d", i+1, tr.TriggerId, sum, want[i])
		}
	}
	get := func(key string) (*geofencepb.Occupancy, error) { return h.occ(key), nil }
	total, err := occupancy.Total(get, "zone-mitte-core", 0)
	if err != nil || total.Count != 0 || total.EntersTotal != uint64(n) || total.ExitsTotal != uint64(n) {
		t.Fatalf("total %v %v", total, err)
	}
	splits := 0
	for key := range counts {
		occ := h.occ(key)
		biggest = max(biggest, proto.Size(occ))
		if occ.SaltBuckets > 0 {
			splits++
		}
	}
	decisions := map[string]bool{}
	for {
		key, v, ok := hotKeys.Next()
		if !ok {
			break
		}
		d := v.(*kitpb.HotKey)
		if decisions[key] || !d.Salted || d.SaltBuckets != occupancy.SaltBuckets || key != geofence.TopicOccupancy+"/"+d.Key || counts[d.Key] == 0 && h.occ(d.Key) == nil {
			t.Fatalf("hot-keys record %q: %v (again: %v)", key, d, decisions[key])
		}
		decisions[key] = true
	}
	if biggest > bound || splits == 0 || len(decisions) != splits {
		t.Fatalf("largest record %d bytes (bound %d), %d records split, %d decisions recorded", biggest, bound, splits, len(decisions))
	}
	t.Logf("%d devices: %d triggers, %d records, %d split, largest record %d bytes (bound %d)", n, len(order), len(counts), splits, biggest, bound)
	h.noDeadLetters()
}

// TestSplitFenceOnEmbeddedBroker: the real processor on the embedded broker,
// with records of at most 16 members: 1,000 devices enter one fence and leave
// it. The fence, read through a view with Total, counts every device and then
// none; every record stays within its limit; the split decisions are on the
// hot-keys topic.
func TestSplitFenceOnEmbeddedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	const n, maxMembers = 1_000, 16
	cl := embeddedtest.Cluster(t)
	topo := geofence.Topology(geofence.WithPartitions(itPartitions))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topo.Ensure(ctx, kadm.NewClient(embeddedtest.Client(t, cl))); err != nil {
		t.Fatal(err)
	}
	startOccupancy(t, cl, topo, t.TempDir(), occupancy.WithMaxMembers(maxMembers))
	view, err := group.NewView[geofencepb.Occupancy](cl, geofence.TopicOccupancy)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.RunView(t, view)
	prod := embeddedtest.Client(t, cl, kgo.DefaultProduceTopic(geofence.TopicTriggers))
	lim := occupancy.Limits{MaxMembers: maxMembers}
	settle := func(wantCount int64) {
		t.Helper()
		waitFor(t, 60*time.Second, fmt.Sprintf("depot counts %d", wantCount), func() (bool, string) {
			if rep, err := occupancy.Lag(ctx, cl); err != nil || rep.Total != 0 {
				return false, fmt.Sprintf("lag %v %v", rep, err)
			}
			total, err := occupancy.Total(view.Get, "depot", 0)
			if err != nil || total.GetCount() != wantCount {
				return false, fmt.Sprintf("total %v %v", total.GetCount(), err)
			}
			return true, ""
		})
		records, biggest := 0, 0
		if err := view.Each(func(key string, occ *geofencepb.Occupancy) bool {
			records++
			biggest = max(biggest, proto.Size(occ))
			if len(occ.Members) > maxMembers {
				t.Errorf("record %s holds %d members", key, len(occ.Members))
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if records < 1+occupancy.SaltBuckets || biggest > lim.RecordBound() {
			t.Fatalf("%d records, largest %d bytes (bound %d)", records, biggest, lim.RecordBound())
		}
		t.Logf("count %d: %d records, largest %d bytes", wantCount, records, biggest)
	}
	var trigs []*geofencepb.Trigger
	for i := range n {
		trigs = append(trigs, at(fmt.Sprintf("veh-%04d", i), "depot", enter, baseMs+int64(i), 0))
	}
	produce(t, prod, trigs)
	settle(n)
	trigs = trigs[:0]
	for i := range n {
		trigs = append(trigs, at(fmt.Sprintf("veh-%04d", i), "depot", exit, baseMs+n+int64(i), 0))
	}
	produce(t, prod, trigs)
	settle(0)
	recs := embeddedtest.ConsumeUntil(t, cl, topology.TopicHotKeys, func(rs []*kgo.Record) bool {
		for _, r := range rs {
			if string(r.Key) == geofence.TopicOccupancy+"/depot" {
				return true
			}
		}
		return false
	})
	var d kitpb.HotKey
	for _, r := range recs {
		if string(r.Key) == geofence.TopicOccupancy+"/depot" {
			if err := proto.Unmarshal(r.Value, &d); err != nil || !d.Salted || d.SaltBuckets != occupancy.SaltBuckets {
				t.Fatalf("hot-keys decision %v %v", &d, err)
			}
		}
	}
}
