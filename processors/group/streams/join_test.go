package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
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

// A join runs in the routing group: aggregating its result directly is
// refused, with the way out.
func TestJoinThenAggregateRefused(t *testing.T) {
	b := streams.New(opsTopology(), "ops", nil)
	counts := b.Stream[str]("in").GroupByKey().Count("agg")
	b.Stream[str]("in2").Join(counts, func(v *str, _ *num) *str { return v }).GroupByKey().Reduce("joined", func(a, _ *str) *str { return a })
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "join agg-table runs in the routing group, but aggregation joined reads it") {
		t.Fatalf("err %v, want the join refused in aggregation joined", err)
	}
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
