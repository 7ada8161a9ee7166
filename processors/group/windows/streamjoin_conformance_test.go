package windows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/tester"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/internal/testpb"
	"github.com/fencestream/fencestream/processors/group/kitpb"
	"github.com/fencestream/fencestream/processors/group/windows"
	"github.com/fencestream/fencestream/topology/cluster"
)

// kjRec is one input record of a conformance case, as Kafka Streams' tests
// pipe it: inputTopic1 (left) or inputTopic2 (right), key, value, timestamp.
type kjRec struct {
	right bool
	key   string
	value string
	at    int64
}

func kl(key, value string, at int64) kjRec { return kjRec{false, key, value, at} }
func kr(key, value string, at int64) kjRec { return kjRec{true, key, value, at} }

// kjEach is the records a Kafka Streams test pipes in a loop over
// expectedKeys (0..3): value prefix+key at one timestamp.
func kjEach(right bool, prefix string, at int64) []kjRec {
	var rs []kjRec
	for k := range 4 {
		rs = append(rs, kjRec{right, fmt.Sprint(k), fmt.Sprint(prefix, k), at})
	}
	return rs
}

// runJoinTable joins the left and right records by key, each result handed
// over as Kafka Streams' MockValueJoiner.TOSTRING_JOINER writes it
// (left+right, "null" for a missing side). It returns the results per key, in
// the order they came out, and the late records ("key@t"). eager looks at the
// timers after every record; otherwise once, at the end.
func runJoinTable(t *testing.T, spec windows.JoinSpec, recs []kjRec, eager bool) (map[string][]string, []string) {
	t.Helper()
	return joinWith(t, spec, recs, eager, func(l, r *testpb.Ping) string {
		ls, rs := "null", "null"
		if l != nil {
			ls = l.GetDeviceId()
		}
		if r != nil {
			rs = r.GetDeviceId()
		}
		return ls + "+" + rs
	})
}

// joinWith joins the left and right records by key (a record's value is its
// ping's device id), each result handed over as label writes it; it returns
// the results per key in the order they came out, and the late records
// ("key@t"). eager looks at the timers after every record; otherwise once,
// at the end.
func joinWith(t *testing.T, spec windows.JoinSpec, recs []kjRec, eager bool, label func(l, r *testpb.Ping) string) (map[string][]string, []string) {
	t.Helper()
	tt := tester.New(t)
	type jctx = group.Context[kitpb.JoinBuffer, *kitpb.JoinBuffer]
	g := group.New[kitpb.JoinBuffer](tableOf(joinStreamsTopology(), "fencestream.kit.v1.JoinBuffer"), testGroup, quiet)
	out := group.Output[testpb.Trigger](g, topicOut)
	j := windows.NewStreamJoin(g, "j", spec, func(jb *kitpb.JoinBuffer) *kitpb.JoinBuffer { return jb },
		func(c *jctx, _ *kitpb.JoinBuffer, l, r *testpb.Ping) error {
			out.Emit(c, c.Key(), &testpb.Trigger{FenceId: label(l, r)})
			return nil
		})
	var mu sync.Mutex
	var late []string
	handle := func(right bool) func(c *jctx, p *testpb.Ping) error {
		return func(c *jctx, p *testpb.Ping) error {
			st := c.State()
			if st == nil {
				st = &kitpb.JoinBuffer{}
			}
			add := j.AddLeft
			if right {
				add = j.AddRight
			}
			if err := add(c, st, c.EventTime(), p); errors.Is(err, windows.ErrLate) {
				mu.Lock()
				late = append(late, fmt.Sprintf("%s@%d", c.Key(), p.GetDeviceTimeMs()))
				mu.Unlock()
			} else if err != nil {
				return err
			}
			c.SetState(st)
			return nil
		}
	}
	at := group.EventTime(func(p *testpb.Ping) time.Time { return time.UnixMilli(p.GetDeviceTimeMs()) })
	group.Stream(g, topicIn, handle(false), at)
	group.Stream(g, topicRight, handle(true), at)
	wall := time.UnixMilli(base)
	proc, err := g.Processor(context.Background(), cluster.Config{}, group.Tester(tt), group.Clock(func() time.Time { return wall }))
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, proc.Run)
	q := tt.NewQueueTracker(topicOut)
	for _, r := range recs {
		topic := topicIn
		if r.right {
			topic = topicRight
		}
		tt.Consume(topic, r.key, &testpb.Ping{DeviceId: r.value, DeviceTimeMs: r.at})
		if eager {
			fireTimers(t, tt, proc)
		}
	}
	fireTimers(t, tt, proc)
	got := map[string][]string{}
	for k, v, ok := q.Next(); ok; k, v, ok = q.Next() {
		got[k] = append(got[k], v.(*testpb.Trigger).GetFenceId())
	}
	mu.Lock()
	defer mu.Unlock()
	return got, slices.Clone(late)
}

// joinCase is one conformance case. want is the results per key: Kafka
// Streams' expected records of the test, every checkAndClearProcessResult
// concatenated, grouped by key (their order across keys is a documented
// difference: see the package doc). late, when checkLate, is the records the
// test expects dropped (its dropped-records metric).
type joinCase struct {
	name      string
	from      string // the Kafka Streams test the case transcribes
	spec      windows.JoinSpec
	recs      []kjRec
	want      map[string][]string
	late      []string
	checkLate bool
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// joinConformance transcribes Kafka Streams' stream-stream join tests
// (apache/kafka streams/src/test/java/org/apache/kafka/streams/kstream/
// internals/): inputs and expected outputs as they are there.
func joinConformance() []joinCase {
	var cases []joinCase

	// KStreamKStreamJoinTest.testAsymmetricWindowingAfter:
	// JoinWindows.ofTimeDifferenceWithNoGrace(0).after(100), inner.
	{
		var recs []kjRec
		for k := range 4 {
			recs = append(recs, kl(fmt.Sprint(k), fmt.Sprint("A", k), 1000+int64(k)))
		}
		for _, s := range []struct {
			p  string
			at int64
		}{{"a", 999}, {"b", 1000}, {"c", 1001}, {"d", 1002}, {"e", 1003}, {"f", 1100}, {"g", 1101}, {"h", 1102}, {"i", 1103}, {"j", 1104}} {
			recs = append(recs, kjEach(true, s.p, s.at)...)
		}
		cases = append(cases, joinCase{
			name: "inner, asymmetric: before 0, after 100", from: "KStreamKStreamJoinTest.testAsymmetricWindowingAfter",
			spec: windows.JoinWindows(0, 0, windows.InnerJoin).WithAfter(ms(100)),
			recs: recs,
			want: map[string][]string{
				"0": {"A0+b0", "A0+c0", "A0+d0", "A0+e0", "A0+f0"},
				"1": {"A1+c1", "A1+d1", "A1+e1", "A1+f1", "A1+g1"},
				"2": {"A2+d2", "A2+e2", "A2+f2", "A2+g2", "A2+h2"},
				"3": {"A3+e3", "A3+f3", "A3+g3", "A3+h3", "A3+i3"},
			},
		})
	}
	// KStreamKStreamJoinTest.testAsymmetricWindowingBefore:
	// JoinWindows.ofTimeDifferenceWithNoGrace(0).before(100), inner.
	{
		var recs []kjRec
		for k := range 4 {
			recs = append(recs, kl(fmt.Sprint(k), fmt.Sprint("A", k), 1000+int64(k)))
		}
		for _, s := range []struct {
			p  string
			at int64
		}{{"a", 899}, {"b", 900}, {"c", 901}, {"d", 902}, {"e", 903}, {"f", 1000}, {"g", 1001}, {"h", 1002}, {"i", 1003}, {"j", 1004}} {
			recs = append(recs, kjEach(true, s.p, s.at)...)
		}
		cases = append(cases, joinCase{
			name: "inner, asymmetric: before 100, after 0", from: "KStreamKStreamJoinTest.testAsymmetricWindowingBefore",
			spec: windows.JoinWindows(0, 0, windows.InnerJoin).WithBefore(ms(100)),
			recs: recs,
			want: map[string][]string{
				"0": {"A0+b0", "A0+c0", "A0+d0", "A0+e0", "A0+f0"},
				"1": {"A1+c1", "A1+d1", "A1+e1", "A1+f1", "A1+g1"},
				"2": {"A2+d2", "A2+e2", "A2+f2", "A2+g2", "A2+h2"},
				"3": {"A3+e3", "A3+f3", "A3+g3", "A3+h3", "A3+i3"},
			},
		})
	}
	// KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted:
	// JoinWindows.ofTimeDifferenceWithNoGrace(100).after(ZERO), left.
	{
		var recs []kjRec
		for k := range 4 {
			recs = append(recs, kl(fmt.Sprint(k), fmt.Sprint("A", k), 1000+int64(k)))
		}
		for _, s := range []struct {
			p  string
			at int64
		}{{"a", 999}, {"b", 1000}, {"c", 1001}, {"d", 1002}, {"e", 1003}, {"f", 1100}} {
			recs = append(recs, kjEach(true, s.p, s.at)...)
		}
		cases = append(cases, joinCase{
			name: "left, asymmetric: after 0 hands over A0..A2 alone, then joins them", from: "KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted",
			spec: windows.JoinWindows(ms(100), 0, windows.LeftJoin).WithAfter(0),
			recs: recs,
			want: map[string][]string{
				"0": {"A0+null", "A0+a0", "A0+b0"},
				"1": {"A1+null", "A1+a1", "A1+b1", "A1+c1"},
				"2": {"A2+null", "A2+a2", "A2+b2", "A2+c2", "A2+d2"},
				"3": {"A3+a3", "A3+b3", "A3+c3", "A3+d3", "A3+e3"},
			},
		})
	}
	cases = append(cases,
		joinCase{
			name: "left: unmatched duplicates once their window closed; joined duplicates", from: "KStreamKStreamLeftJoinTest.testLeftJoinDuplicates",
			spec: windows.JoinWindows(ms(100), ms(10), windows.LeftJoin),
			recs: []kjRec{kl("0", "A0", 0), kl("0", "A0-0", 0), kr("1", "a0", 111), kr("2", "dummy", 500),
				kl("2", "A2", 1000), kl("2", "A2-0", 1000), kr("2", "a2", 1001), kr("3", "a3", 315)},
			want: map[string][]string{"0": {"A0+null", "A0-0+null"}, "2": {"A2+a2", "A2-0+a2"}},
		},
		joinCase{
			name: "left: expired left records, stream time moved by a left record", from: "KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.LeftJoin),
			recs: []kjRec{kl("0", "A0", 1), kl("1", "A1", 2), kl("0", "A0-0", 3), kr("1", "a1", 3), kl("2", "dummy", 401), kr("2", "dummy", 401)},
			want: map[string][]string{"0": {"A0+null", "A0-0+null"}, "1": {"A1+a1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "left: expired left records, stream time moved by a right record", from: "KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.LeftJoin),
			recs: []kjRec{kl("0", "A0", 1), kl("1", "A1", 2), kl("0", "A0-0", 3), kr("1", "a1", 3), kr("2", "dummy", 401), kl("2", "dummy", 402)},
			want: map[string][]string{"0": {"A0+null", "A0-0+null"}, "1": {"A1+a1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "left: unmatched right records are never handed over", from: "KStreamKStreamLeftJoinTest.testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.LeftJoin),
			recs: []kjRec{kr("0", "A0", 1), kr("1", "A1", 2), kr("0", "A0-0", 3), kl("1", "a1", 3), kl("2", "dummy", 401), kr("2", "dummy", 402)},
			want: map[string][]string{"1": {"a1+A1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "left: unmatched right records are never handed over (right record moves time)", from: "KStreamKStreamLeftJoinTest.testRightNonJoinedRecordsAreNeverEmittedByTheRightProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.LeftJoin),
			recs: []kjRec{kr("0", "A0", 1), kr("1", "A1", 2), kr("0", "A0-0", 3), kl("1", "a1", 3), kr("2", "dummy", 401), kl("2", "dummy", 402)},
			want: map[string][]string{"1": {"a1+A1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "outer: unmatched duplicates of both sides; joined duplicates", from: "KStreamKStreamOuterJoinTest.testOuterJoinDuplicates",
			spec: windows.JoinWindows(ms(100), ms(10), windows.OuterJoin),
			recs: []kjRec{kl("0", "A0", 0), kl("0", "A0-0", 0), kr("1", "a1", 0), kr("1", "a1-0", 0), kr("1", "a0", 111), kr("3", "dummy", 211),
				kl("2", "A2", 200), kl("2", "A2-0", 200), kr("2", "a2", 201), kr("2", "a2-0", 201), kr("3", "dummy", 1500)},
			want: map[string][]string{
				"0": {"A0+null", "A0-0+null"},
				"1": {"null+a1", "null+a1-0", "null+a0"},
				"2": {"A2+a2", "A2-0+a2", "A2+a2-0", "A2-0+a2-0"},
				"3": {"null+dummy"},
			},
		},
		joinCase{
			name: "outer: expired left records, stream time moved by a left record", from: "KStreamKStreamOuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.OuterJoin),
			recs: []kjRec{kl("0", "A0", 1), kl("1", "A1", 2), kl("0", "A0-0", 3), kr("1", "a1", 3), kl("2", "dummy", 401), kr("2", "dummy", 401)},
			want: map[string][]string{"0": {"A0+null", "A0-0+null"}, "1": {"A1+a1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "outer: expired left records, stream time moved by a right record", from: "KStreamKStreamOuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheRightProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.OuterJoin),
			recs: []kjRec{kl("0", "A0", 1), kl("1", "A1", 2), kl("0", "A0-0", 3), kr("1", "a1", 3), kr("2", "dummy", 401), kl("2", "dummy", 402)},
			want: map[string][]string{"0": {"A0+null", "A0-0+null"}, "1": {"A1+a1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			name: "outer: expired right records, stream time moved by a left record", from: "KStreamKStreamOuterJoinTest.testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor",
			spec: windows.JoinWindows(ms(100), 0, windows.OuterJoin),
			recs: []kjRec{kr("0", "A0", 1), kr("1", "A1", 2), kr("0", "A0-0", 3), kl("1", "a1", 3), kl("2", "dummy", 401), kr("2", "dummy", 402)},
			want: map[string][]string{"0": {"null+A0", "null+A0-0"}, "1": {"a1+A1"}, "2": {"dummy+dummy"}},
		},
		joinCase{
			// Kafka Streams hands A0+null over before A1+a1 (a1's arrival
			// closes A0's window); here A0's timer does, after a1: the order
			// across keys is the documented difference.
			name: "outer: a closed unmatched record and a pair", from: "KStreamKStreamOuterJoinTest.testOrdering",
			spec: windows.JoinWindows(ms(100), 0, windows.OuterJoin),
			recs: []kjRec{kl("0", "A0", 0), kl("1", "A1", 100), kr("1", "a1", 110)},
			want: map[string][]string{"0": {"A0+null"}, "1": {"A1+a1"}},
		},
		joinCase{
			name: "outer: unmatched records wait for the grace", from: "KStreamKStreamOuterJoinTest.testGracePeriod",
			spec: windows.JoinWindows(ms(100), ms(10), windows.OuterJoin),
			recs: []kjRec{kl("0", "A0", 0), kr("1", "a1", 0), kr("0", "a0", 101), kl("1", "A1", 101), kr("0", "dummy", 211)},
			want: map[string][]string{"0": {"A0+null"}, "1": {"null+a1"}},
		},
		joinCase{
			name: "outer: every pair, nothing unmatched", from: "KStreamKStreamOuterJoinTest.testOuterJoinWithDefaultSuppliers (runOuterJoin)",
			spec: windows.JoinWindows(ms(100), 0, windows.OuterJoin),
			recs: slices.Concat(
				[]kjRec{kl("0", "A0", 0), kl("1", "A1", 0), kr("0", "a0", 0), kr("1", "a1", 0), kl("0", "B0", 0), kl("1", "B1", 0), kl("2", "B2", 0)},
				kjEach(true, "b", 0), kjEach(false, "C", 0), []kjRec{kl("0", "dummy", 400)}),
			want: map[string][]string{
				"0": {"A0+a0", "B0+a0", "A0+b0", "B0+b0", "C0+a0", "C0+b0"},
				"1": {"A1+a1", "B1+a1", "A1+b1", "B1+b1", "C1+a1", "C1+b1"},
				"2": {"B2+b2", "C2+b2"},
				"3": {"C3+b3"},
			},
		},
	)
	// KStreamKStreamWindowCloseTest.recordsArrivingPostWindowCloseShouldBeDropped,
	// JoinWindows.ofTimeDifferenceAndGrace(10, 5), for each of its three
	// joins: the records it counts as dropped are late here. (The test
	// asserts the drop count only; keys -1 are its "bumpTime" records.)
	closeRecs := []kjRec{kl("0", "left", 15), kr("-1", "bumpTime", 40), kr("0", "closedAt40", 24), kr("0", "closedAt41", 25),
		kr("-1", "bumpTime", 41), kr("0", "closedAt41", 25), kr("1", "right", 115), kl("-1", "bumpTime", 140), kl("1", "closedAt140", 124),
		kl("1", "closedAt141", 125), kl("-1", "bumpTime", 141), kl("1", "closedAt141", 125)}
	for _, k := range []struct {
		name string
		kind windows.JoinKind
	}{{"inner", windows.InnerJoin}, {"left", windows.LeftJoin}, {"outer", windows.OuterJoin}} {
		cases = append(cases, joinCase{
			name: k.name + ": records arriving after their window closed are late", from: "KStreamKStreamWindowCloseTest.recordsArrivingPostWindowCloseShouldBeDropped",
			spec: windows.JoinWindows(ms(10), ms(5), k.kind), recs: closeRecs,
			late: []string{"0@24", "0@25", "1@124", "1@125"}, checkLate: true,
		})
	}
	return cases
}

// The conformance tables: each case runs twice, with a timer look after
// every record and with one look at the end, and both give the results of
// the Kafka Streams test it transcribes.
func TestStreamJoinConformance(t *testing.T) {
	for _, tc := range joinConformance() {
		t.Run(tc.name, func(t *testing.T) {
			var runs [2]string
			for i, eager := range []bool{true, false} {
				got, late := runJoinTable(t, tc.spec, tc.recs, eager)
				if tc.want != nil && fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("%s (eager=%v):\n got  %v\n want %v", tc.from, eager, got, tc.want)
				}
				if tc.checkLate && strings.Join(late, ",") != strings.Join(tc.late, ",") {
					t.Errorf("%s (eager=%v): late %v, want %v", tc.from, eager, late, tc.late)
				}
				runs[i] = fmt.Sprint(got, late)
			}
			if runs[0] != runs[1] {
				t.Errorf("a look after every record and one at the end differ:\n %s\n %s", runs[0], runs[1])
			}
		})
	}
}
