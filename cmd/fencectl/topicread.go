package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/modules"
	"github.com/fencestream/fencestream/topology"
)

func runTopic(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "fencectl topic", "missing subcommand: read")
	}
	switch args[0] {
	case "read":
		return runTopicRead(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "Usage: fencectl topic read TOPIC [flags]")
		return exitOK
	}
	return usageError(stderr, "fencectl topic", "unknown subcommand %q (want read)", args[0])
}

func runTopicRead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("topic read", "topic read TOPIC --brokers B [--from-beginning | --from-time T] [--follow] [--partition P] [--limit N]",
		`Prints a declared topic's records, one JSON object per line: topic, partition, offset,
timestamp, key, headers and value, the value decoded with the topic's declared message
type (protojson; a group table's value is its state, a deleted state is null). A record
that does not decode is printed with "value_base64" and "error" and reading goes on; a
topic whose declared value is not a message (the dead-letter topic) is printed as
"value_base64". Without --follow it stops at the end the topic had when it started.`)
	var kf kafkaFlags
	kf.register(c.fs)
	fromBeginning := c.fs.Bool("from-beginning", true, "read from each partition's earliest record (the default)")
	fromTime := c.fs.String("from-time", "", "read from the first record at or after this time: RFC 3339, or a duration ago (15m)")
	follow := c.fs.Bool("follow", false, "keep printing new records until interrupted")
	partition := c.fs.Int("partition", -1, "read only this partition (-1: all)")
	limit := c.fs.Int("limit", 0, "stop after this many records (0: no limit)")
	partitions := partitionsFlag(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return c.usageErr(stderr, "want exactly one TOPIC, got %q", pos)
	}
	fromBeginningSet := false
	c.fs.Visit(func(f *flag.Flag) { fromBeginningSet = fromBeginningSet || f.Name == "from-beginning" })
	if fromBeginningSet && *fromTime != "" {
		return c.usageErr(stderr, "give --from-beginning or --from-time, not both")
	}
	if !*fromBeginning && *fromTime == "" {
		return c.usageErr(stderr, "--from-beginning=false needs --from-time (where to start instead)")
	}
	var from time.Time
	if *fromTime != "" {
		t, err := parseFromTime(*fromTime, time.Now())
		if err != nil {
			return c.usageErr(stderr, "--from-time: %v", err)
		}
		from = t
	}
	if *partition < -1 {
		return c.usageErr(stderr, "--partition must be -1 (all) or a partition, got %d", *partition)
	}
	if *limit < 0 {
		return c.usageErr(stderr, "--limit must be 0 (no limit) or positive, got %d", *limit)
	}
	if err := checkPartitions(*partitions); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	topo, err := modules.Topology(int32(*partitions))
	if err != nil {
		return c.fail(stderr, err)
	}
	dec, err := decoderFor(topo, pos[0])
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	r := topicReader{kf: kf, topic: pos[0], partition: int32(*partition), from: from, follow: *follow, limit: *limit, dec: dec}
	if err := r.run(ctx, stdout); err != nil {
		return c.fail(stderr, err)
	}
	return exitOK
}

// parseFromTime reads an RFC 3339 time, or a duration meaning that long before now.
func parseFromTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-08-01T12:00:00Z) nor a positive duration ago (15m)", s)
	}
	return now.Add(-d), nil
}

// recordDecoder turns a topic's values into JSON by the type its declaration names.
type recordDecoder struct {
	msg   protoreflect.MessageType // nil: the declared value is not a registered message
	table bool                     // a group table: values are the kit's envelopes
}

// decoderFor finds topic in the topology and its declared message type.
func decoderFor(topo *topology.Topology, topic string) (recordDecoder, error) {
	tp, ok := topo.Topic(topic)
	if !ok {
		names := topo.TopicNames()
		sort.Strings(names)
		return recordDecoder{}, fmt.Errorf("topic %q is not declared in the topology; declared topics: %s", topic, strings.Join(names, ", "))
	}
	var d recordDecoder
	for _, p := range topo.Processors {
		d.table = d.table || p.Table == topic
	}
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(tp.Value)); err == nil {
		d.msg = mt
	}
	return d, nil
}

// recordJSON is one output line.
type recordJSON struct {
	Topic       string          `json:"topic"`
	Partition   int32           `json:"partition"`
	Offset      int64           `json:"offset"`
	Timestamp   string          `json:"timestamp"`
	Key         *string         `json:"key"`
	KeyBase64   string          `json:"key_base64,omitempty"`
	Headers     []headerJSON    `json:"headers"`
	Value       json.RawMessage `json:"value"`
	ValueBase64 string          `json:"value_base64,omitempty"`
	Error       string          `json:"error,omitempty"`
}

type headerJSON struct {
	Key         string `json:"key"`
	Value       string `json:"value,omitempty"`
	ValueBase64 string `json:"value_base64,omitempty"`
}

// encode renders r as one JSON line. Keys and header values that are not UTF-8
// are given in base64 so that no byte is lost.
func (d recordDecoder) encode(r *kgo.Record) []byte {
	out := recordJSON{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano),
		Headers:   []headerJSON{},
		Value:     json.RawMessage("null"),
	}
	if r.Key != nil {
		if utf8.Valid(r.Key) {
			k := string(r.Key)
			out.Key = &k
		} else {
			out.KeyBase64 = base64.StdEncoding.EncodeToString(r.Key)
		}
	}
	for _, h := range r.Headers {
		hj := headerJSON{Key: h.Key}
		if utf8.Valid(h.Value) {
			hj.Value = string(h.Value)
		} else {
			hj.ValueBase64 = base64.StdEncoding.EncodeToString(h.Value)
		}
		out.Headers = append(out.Headers, hj)
	}
	if v, err := d.value(r.Value); err != nil {
		out.ValueBase64 = base64.StdEncoding.EncodeToString(r.Value)
		out.Error = err.Error()
	} else if v != nil {
		out.Value = v
	} else if r.Value != nil && d.msg == nil {
		out.ValueBase64 = base64.StdEncoding.EncodeToString(r.Value)
	}
	b, err := json.Marshal(out)
	if err != nil { // cannot happen: every field is plain data or compacted protojson
		b = fmt.Appendf(nil, `{"topic":%q,"partition":%d,"offset":%d,"error":%q}`, r.Topic, r.Partition, r.Offset, err.Error())
	}
	return append(b, '\n')
}

// value decodes a record value: nil for a tombstone, a deleted table state or
// a value with no declared message type.
func (d recordDecoder) value(b []byte) (json.RawMessage, error) {
	if b == nil || d.msg == nil {
		return nil, nil
	}
	if d.table {
		st, ok, err := group.TableState(b)
		if err != nil || !ok {
			return nil, err
		}
		b = st
	}
	m := d.msg.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("not a %s: %w", d.msg.Descriptor().FullName(), err)
	}
	j, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s to JSON: %w", d.msg.Descriptor().FullName(), err)
	}
	return j, nil
}

// topicReader reads one topic from a start position to its end, or on.
type topicReader struct {
	kf        kafkaFlags
	topic     string
	partition int32 // -1: all
	from      time.Time
	follow    bool
	limit     int
	dec       recordDecoder
}

func (tr topicReader) run(ctx context.Context, w io.Writer) error {
	ac, adm, err := tr.kf.connect(ctx)
	if err != nil {
		return err
	}
	start, end, err := tr.offsets(ctx, adm)
	ac.Close()
	if err != nil {
		return err
	}
	consume := map[int32]kgo.Offset{}
	for p, o := range start {
		consume[p] = kgo.NewOffset().At(o)
	}
	kc, _, err := tr.kf.connect(ctx, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tr.topic: consume}))
	if err != nil {
		return err
	}
	defer kc.Close()
	next := start
	// caughtUp: every partition read up to the end it had when we started.
	caughtUp := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	printed := 0
	for {
		if tr.limit > 0 && printed >= tr.limit || !tr.follow && caughtUp() {
			return nil
		}
		fetches := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			if tr.follow {
				return nil // interrupted: the way a follow ends
			}
			return fmt.Errorf("reading %s: %w", tr.topic, ctx.Err())
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return fmt.Errorf("reading %s: %w", tr.topic, errors.Join(errs...))
		}
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			next[r.Partition] = r.Offset + 1
			if tr.limit > 0 && printed >= tr.limit {
				continue
			}
			if _, err := w.Write(tr.dec.encode(r)); err != nil {
				return err
			}
			printed++
		}
	}
}

// offsets returns, per partition read, where to start and the end it has now.
func (tr topicReader) offsets(ctx context.Context, adm *kadm.Client) (start, end map[int32]int64, err error) {
	if err := requireTopic(ctx, adm, tr.kf, tr.topic); err != nil {
		return nil, nil, err
	}
	rctx, cancel := tr.kf.requestCtx(ctx)
	defer cancel()
	var from kadm.ListedOffsets
	if tr.from.IsZero() {
		from, err = adm.ListStartOffsets(rctx, tr.topic)
	} else {
		// The first offset at or after the time; the end offset when none is.
		from, err = adm.ListOffsetsAfterMilli(rctx, tr.from.UnixMilli(), tr.topic)
	}
	if err == nil {
		err = from.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("start offsets of %s: %w", tr.topic, err)
	}
	ends, err := adm.ListEndOffsets(rctx, tr.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("end offsets of %s: %w", tr.topic, err)
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	from.Each(func(o kadm.ListedOffset) {
		if tr.partition < 0 || o.Partition == tr.partition {
			start[o.Partition] = o.Offset
		}
	})
	ends.Each(func(o kadm.ListedOffset) {
		if _, ok := start[o.Partition]; ok {
			end[o.Partition] = o.Offset
		}
	})
	if len(start) == 0 {
		return nil, nil, fmt.Errorf("topic %s has no partition %d (it has %d)", tr.topic, tr.partition, len(ends[tr.topic]))
	}
	return start, end, nil
}
