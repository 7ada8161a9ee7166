package streams_test

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/fencestream/fencestream/processors/group/streams"
	"github.com/fencestream/fencestream/processors/group/streams/streamstest"
	"github.com/fencestream/fencestream/topology"
)

// wordTopology declares what the word count reads, writes and keeps: every
// topic is named here, none is generated.
func wordTopology() *topology.Topology {
	const str, count, empty = "google.protobuf.StringValue", "google.protobuf.Int64Value", "google.protobuf.Empty"
	return &topology.Topology{Name: "quickstart", Topics: []topology.Topic{
		{Name: topology.TopicDeadLetter, Key: topology.KeyOriginal, Partitions: 4, Cleanup: topology.CleanupDelete},
		{Name: "lines", Key: "line", Value: str, Partitions: 4, Cleanup: topology.CleanupDelete},
		{Name: "words", Key: "word", Value: str, Partitions: 4, Cleanup: topology.CleanupDelete},
		{Name: "wordcount-table", Key: "line", Value: empty, Partitions: 4, Cleanup: topology.CleanupCompact},
		{Name: "word-counts-table", Key: "word", Value: count, Partitions: 4, Cleanup: topology.CleanupCompact},
		{Name: "word-counts", Key: "word", Value: count, Partitions: 4, Cleanup: topology.CleanupDelete},
	}}
}

// byWord is the boundary the word count crosses: lines are keyed by line,
// counts by word.
var byWord = topology.Boundary{
	Preserved: "the order of one line's words",
	Lost:      "order between lines: a word's occurrences arrive from every line partition, interleaved",
	Lag:       "a word is counted one hop after its line is read",
}

// wordCount is Kafka Streams' WordCountDemo in the DSL.
func wordCount(topo *topology.Topology) (*streams.App, streams.Table[wrapperspb.Int64Value], error) {
	b := streams.New(topo, "wordcount", nil)
	counts := defineWordCount(b)
	app, err := b.Build()
	return app, counts, err
}

// defineWordCount declares the word count on b and returns its table.
func defineWordCount(b *streams.Builder) streams.Table[wrapperspb.Int64Value] {
	counts := b.Stream[wrapperspb.StringValue]("lines").
		FlatMapValues(func(l *wrapperspb.StringValue) []*wrapperspb.StringValue {
			var out []*wrapperspb.StringValue
			for _, w := range strings.Fields(strings.ToLower(l.GetValue())) {
				out = append(out, wrapperspb.String(w))
			}
			return out
		}).
		GroupBy(byWord, "words", func(_ string, w *wrapperspb.StringValue) string { return w.GetValue() }).
		Count("word-counts")
	counts.ToStream().To("word-counts")
	return counts
}

// Kafka Streams' quickstart: three lines, and the counts it prints.
func Example_wordCount() {
	app, _, err := wordCount(wordTopology())
	if err != nil {
		fmt.Println(err)
		return
	}
	t := &exampleT{}
	defer t.done()
	d := streamstest.New(t, app, time.Unix(0, 0))
	lines := streamstest.InputTopic[wrapperspb.StringValue](d, "lines")
	out := streamstest.OutputTopic[wrapperspb.Int64Value](d, "word-counts")
	for i, l := range []string{"all streams lead to kafka", "hello kafka streams", "join kafka summit"} {
		lines.Pipe(fmt.Sprint("line-", i), wrapperspb.String(l))
		for _, r := range out.Read() {
			fmt.Printf("%s %d\n", r.Key, r.Value.GetValue())
		}
	}
	// Output:
	// all 1
	// streams 1
	// lead 1
	// to 1
	// kafka 1
	// hello 1
	// kafka 2
	// streams 2
	// join 1
	// kafka 3
	// summit 1
}

// Describe shows each group, what it reads and writes, and the boundary the
// re-key crosses.
func ExampleApp_Describe() {
	app, _, err := wordCount(wordTopology())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(app.Describe())
	// Output:
	// App wordcount (topology quickstart)
	//   Group wordcount: reads lines; writes words; table wordcount-table
	//     Source lines (key line, google.protobuf.StringValue)
	//       --> flatMapValues
	//         --> selectKey
	//           --> write words across the boundary below (re-key)
	//   Group word-counts: reads words; writes word-counts; table word-counts-table
	//     Source words (key word, google.protobuf.StringValue)
	//       --> count -> table word-counts-table
	//     Table word-counts-table (google.protobuf.Int64Value), on each update
	//       --> write word-counts
	//   Boundaries
	//     lines -> words (key line -> word), in group wordcount
	//       keeps: the order of one line's words
	//       loses: order between lines: a word's occurrences arrive from every line partition, interleaved
	//       lag: a word is counted one hop after its line is read
}

func ExampleApp_Mermaid() {
	app, _, err := wordCount(wordTopology())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(app.Mermaid())
	// Output:
	// flowchart LR
	//   t_lines[("lines")]
	//   t_words[("words")]
	//   t_word_counts_table[("word-counts-table")]
	//   t_word_counts[("word-counts")]
	//   subgraph g_wordcount ["group wordcount"]
	//     n1_wordcount["flatMapValues"]
	//     n2_wordcount["selectKey"]
	//     n3_wordcount["selectKey -> words"]
	//   end
	//   subgraph g_word_counts ["group word-counts"]
	//     n5_word_counts["count -> table word-counts-table"]
	//     n7_word_counts["to word-counts"]
	//   end
	//   t_lines --> n1_wordcount
	//   n1_wordcount --> n2_wordcount
	//   n2_wordcount --> n3_wordcount
	//   n3_wordcount -->|"re-key: keeps the order of one line's words"| t_words
	//   t_words --> n5_word_counts
	//   n5_word_counts --> t_word_counts_table
	//   t_word_counts_table --> n7_word_counts
	//   n7_word_counts --> t_word_counts
}
