package streams_test

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
)

// runExample builds what define declares over the operator tests'
// topology and drives it.
func runExample(define func(b *streams.Builder), drive func(d *streamstest.Driver)) {
	b := streams.New(opsTopology(), "ops", nil)
	define(b)
	app, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	drive(streamstest.New(t, app, time.Unix(1_800_000_000, 0)))
}

// Stateless operators: a chain of functions in the routing group, no
// topic between them. A filter that names a reason dead-letters.
func Example_stateless() {
	runExample(func(b *streams.Builder) {
		b.Stream[str]("in").
			Filter(func(_ string, v *str) bool { return v.GetValue() != "" }, streams.DeadLetter("empty")).
			MapValues(func(v *str) *str { return wrapperspb.String(strings.ToUpper(v.GetValue())) }).
			FlatMapValues(func(v *str) []*str {
				var out []*str
				for _, w := range strings.Fields(v.GetValue()) {
					out = append(out, wrapperspb.String(w))
				}
				return out
			}).
			To("out")
	}, func(d *streamstest.Driver) {
		in := streamstest.InputTopic[str](d, "in")
		in.Pipe("k1", wrapperspb.String("hello kafka"))
		in.Pipe("k2", wrapperspb.String(""))
		for _, r := range streamstest.OutputTopic[str](d, "out").Read() {
			fmt.Println(r.Key, r.Value.GetValue())
		}
		for _, dl := range d.DeadLetters() {
			fmt.Println("dead letter:", dl.Key, dl.Reason)
		}
	})
	// Output:
	// k1 HELLO
	// k1 KAFKA
	// dead letter: k2 empty
}

// Split sends each record to its first matching branch; Merge joins
// streams of one type.
func Example_split() {
	runExample(func(b *streams.Builder) {
		br := b.Stream[str]("in").Split(func(_ string, v *str) bool { return strings.HasPrefix(v.GetValue(), "a") })
		br[0].To("out")
		br[1].Merge(b.Stream[str]("in2")).To("out2")
	}, func(d *streamstest.Driver) {
		streamstest.InputTopic[str](d, "in").Pipe("k1", wrapperspb.String("apple"))
		streamstest.InputTopic[str](d, "in").Pipe("k2", wrapperspb.String("pear"))
		streamstest.InputTopic[str](d, "in2").Pipe("k3", wrapperspb.String("fig"))
		for _, topic := range []string{"out", "out2"} {
			for _, r := range streamstest.OutputTopic[str](d, topic).Read() {
				fmt.Println(topic, r.Key, r.Value.GetValue())
			}
		}
	})
	// Output:
	// out k1 apple
	// out2 k2 pear
	// out2 k3 fig
}

// A re-key crosses a declared boundary into a declared topic; an
// aggregation is a group whose table the driver (or a view) reads.
func Example_aggregate() {
	var total streams.Table[num]
	runExample(func(b *streams.Builder) {
		total = b.Stream[str]("in").
			GroupBy(byLen, "by-len", func(_ string, v *str) string { return fmt.Sprint(len(v.GetValue())) }).
			Aggregate("lens", func() *num { return &num{} }, func(_ string, _ *str, n *num) *num {
				n.Value++
				return n
			})
	}, func(d *streamstest.Driver) {
		in := streamstest.InputTopic[str](d, "in")
		for _, w := range []string{"ab", "cd", "xyz"} {
			in.Pipe("k", wrapperspb.String(w))
		}
		fmt.Println("words of 2 letters:", streamstest.Get(d, total, "2").GetValue())
		fmt.Println("words of 3 letters:", streamstest.Get(d, total, "3").GetValue())
		fmt.Println("words of 4 letters:", streamstest.Get(d, total, "4"))
	})
	// Output:
	// words of 2 letters: 2
	// words of 3 letters: 1
	// words of 4 letters: <nil>
}

// A table's operators run on each update, in the aggregation's group.
func Example_table() {
	runExample(func(b *streams.Builder) {
		b.Stream[str]("in").GroupByKey().
			Reduce("joined", func(agg, v *str) *str { return wrapperspb.String(agg.GetValue() + "," + v.GetValue()) }).
			Filter(func(_ string, v *str) bool { return strings.Contains(v.GetValue(), ",") }).
			ToStream().To("out")
	}, func(d *streamstest.Driver) {
		in := streamstest.InputTopic[str](d, "in")
		in.Pipe("k", wrapperspb.String("a"))
		in.Pipe("k", wrapperspb.String("b"))
		in.Pipe("k", wrapperspb.String("c"))
		for _, r := range streamstest.OutputTopic[str](d, "out").Read() {
			fmt.Println(r.Key, r.Value.GetValue())
		}
	})
	// Output:
	// k a,b
	// k a,b,c
}
