package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
)

// A stream-table join reads the table's value for the record's key: inner
// drops a record whose key the table does not hold, left passes it with nil.
func TestStreamTableJoin(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprint("left=", left), func(t *testing.T) {
			d := build(t, func(b *streams.Builder) {
				counts := b.Stream[str]("in").GroupByKey().Count("agg")
				enrich := func(v *str, n *num) *str {
					if n == nil {
						return wrapperspb.String(v.GetValue() + ":none")
					}
					return wrapperspb.String(fmt.Sprint(v.GetValue(), ":", n.GetValue()))
				}
				s := b.Stream[str]("in2")
				if left {
					s.LeftJoin(counts, enrich).To("out")
				} else {
					s.Join(counts, enrich).To("out")
				}
			})
			pipe(t, d, "in", "k1", "a", "k1", "b")
			pipe(t, d, "in2", "k1", "x", "k9", "y")
			pipe(t, d, "in", "k1", "c")
			pipe(t, d, "in2", "k1", "z")
			if left {
				want(t, read(t, d, "out"), "k1=x:2", "k9=y:none", "k1=z:3")
			} else {
				want(t, read(t, d, "out"), "k1=x:2", "k1=z:3")
			}
		})
	}
}

// A join runs in whichever group runs its stream: aggregated directly, it
// reads the table in the aggregation's group (co-partitioned, local).
func TestJoinThenAggregate(t *testing.T) {
	var joined streams.Table[str]
	d := build(t, func(b *streams.Builder) {
		counts := b.Stream[str]("in").GroupByKey().Count("agg")
		joined = b.Stream[str]("in2").
			Join(counts, func(v *str, n *num) *str { return wrapperspb.String(fmt.Sprint(v.GetValue(), n.GetValue())) }).
			GroupByKey().
			Reduce("joined", func(a, v *str) *str { return wrapperspb.String(a.GetValue() + "," + v.GetValue()) })
	})
	pipe(t, d, "in", "k1", "a", "k1", "b")
	pipe(t, d, "in2", "k1", "x", "k9", "y")
	pipe(t, d, "in", "k1", "c")
	pipe(t, d, "in2", "k1", "z")
	if got := streamstest.Get(d, joined, "k1").GetValue(); got != "x2,z3" {
		t.Fatalf("joined k1 = %q, want x2,z3 (each in2 record with agg's count then)", got)
	}
	if got := streamstest.Get(d, joined, "k9"); got != nil {
		t.Fatalf("joined k9 = %v, want nothing: agg holds no k9", got)
	}
}

// A table's group writes any type: its stream mapped to another message goes
// To a topic of that type.
func TestTableStreamWritesAnotherType(t *testing.T) {
	d := build(t, func(b *streams.Builder) {
		b.Stream[str]("in").GroupByKey().Count("agg").
			ToStream().MapValues(func(n *num) *str { return wrapperspb.String(fmt.Sprint("n=", n.GetValue())) }).To("out")
	})
	pipe(t, d, "in", "k1", "a", "k1", "b", "k2", "c")
	want(t, read(t, d, "out"), "k1=n=1", "k1=n=2", "k2=n=1")
}

// Describe and Mermaid show the join and the table it reads.
func TestJoinDescribed(t *testing.T) {
	b := streams.New(opsTopology(), "ops", nil)
	counts := b.Stream[str]("in").GroupByKey().Count("agg")
	b.Stream[str]("in2").Join(counts, func(v *str, _ *num) *str { return v }).To("out")
	app, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := app.Describe(); !strings.Contains(d, "--> join agg-table") || !strings.Contains(d, "Group ops: reads in2; writes out") {
		t.Fatalf("describe:\n%s", d)
	}
	if m := app.Mermaid(); !strings.Contains(m, "t_agg_table -. joined for the key .-> n") {
		t.Fatalf("mermaid:\n%s", m)
	}
}
