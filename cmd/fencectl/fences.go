package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/geo"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencestream/fencestream/codecs"
	pb "github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
)

func runFences(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageError(stderr, "fencectl fences", "missing subcommand: load, delete or list")
	}
	switch args[0] {
	case "load":
		return runFencesLoad(ctx, args[1:], stdout, stderr)
	case "delete":
		return runFencesDelete(ctx, args[1:], stdout, stderr)
	case "list":
		return runFencesList(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "Usage: fencectl fences load|delete|list [flags]")
		return exitOK
	}
	return usageError(stderr, "fencectl fences", "unknown subcommand %q (want load, delete or list)", args[0])
}

func runFencesLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("fences load", "fences load FILE|--demo --brokers B [--dry-run] [--if-empty]",
		`Validates a GeoJSON FeatureCollection of fences (Polygon, MultiPolygon, or Point with
properties.radius_m; properties.id is the fence id) and publishes every fence to the
fences topic keyed by its id. All or nothing: if any feature is invalid, the file is
rejected with every problem listed and nothing is published. A fence with an id that
is already in the topic replaces it.`)
	var kf kafkaFlags
	kf.register(c.fs)
	demo := c.fs.Bool("demo", false, "load the bundled demo fence set (Berlin) instead of a file")
	dryRun := c.fs.Bool("dry-run", false, "check the fences as a load does (against the fences topic with --brokers, else against Kafka's default record limit) and print them; publish nothing")
	ifEmpty := c.fs.Bool("if-empty", false, "publish only if the fences topic holds no records yet (idempotent first-time setup)")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	var (
		data   []byte
		source string
	)
	switch {
	case *demo && len(pos) > 0:
		return c.usageErr(stderr, "give either FILE or --demo, not both")
	case *demo:
		data, source = fences.DemoGeoJSON(), "the bundled demo set"
	case len(pos) == 1:
		source = pos[0]
		var err error
		if data, err = os.ReadFile(source); err != nil {
			return c.fail(stderr, fmt.Errorf("reading fence file: %w; nothing published", err))
		}
	case len(pos) == 0:
		return c.usageErr(stderr, "missing FILE (or --demo)")
	default:
		return c.usageErr(stderr, "want one FILE, got %d arguments", len(pos))
	}
	if !*dryRun {
		if err := kf.validate(); err != nil {
			return c.usageErr(stderr, "%v", err)
		}
	}
	parsed, err := fences.ParseFeatureCollection(data)
	if err != nil {
		return c.fail(stderr, fmt.Errorf("%s: %w\nnothing published", source, err))
	}
	if len(parsed) == 0 {
		return c.fail(stderr, fmt.Errorf("%s: the FeatureCollection has no features; nothing published", source))
	}
	codec := codecs.For[pb.Fence]()
	records := make([]*kgo.Record, 0, len(parsed))
	for _, f := range parsed {
		if err := topology.ValidateKey(f.GetFenceId(), 0); err != nil {
			return c.fail(stderr, fmt.Errorf("%s: fence %q: %w; nothing published", source, f.GetFenceId(), err))
		}
		value, err := codec.Marshal(f)
		if err != nil {
			return c.fail(stderr, fmt.Errorf("%s: encoding fence %q: %w; nothing published", source, f.GetFenceId(), err))
		}
		records = append(records, &kgo.Record{Topic: geofence.TopicFences, Key: []byte(f.GetFenceId()), Value: value})
	}
	if *dryRun {
		// The same checks as a load: against the topic when a broker is
		// given, else against Kafka's default limit, saying so.
		if len(kf.cl.Brokers) > 0 {
			if err := kf.validate(); err != nil {
				return c.usageErr(stderr, "%v", err)
			}
			if err := checkLoad(ctx, kf, records); err != nil {
				return c.fail(stderr, fmt.Errorf("%s: %w (dry run)", source, err))
			}
		} else if err := checkRecordSizes(records, defaultMaxMessageBytes, "Kafka's default"); err != nil {
			return c.fail(stderr, fmt.Errorf("%s: %w (give --brokers to check against the topic's own limit); dry run: nothing published", source, err))
		}
		printFences(stdout, parsed)
		fmt.Fprintf(stdout, "%d fences valid in %s; dry run: nothing published\n", len(parsed), source)
		return exitOK
	}
	first, last, held, err := publish(ctx, kf, records, *ifEmpty)
	if err != nil {
		return c.fail(stderr, err)
	}
	if held > 0 {
		fmt.Fprintf(stdout, "topic %s already holds %d records; --if-empty: nothing published\n", geofence.TopicFences, held)
		return exitOK
	}
	fmt.Fprintf(stdout, "published %d fences from %s to topic %s (offsets %d..%d)\n", len(records), source, geofence.TopicFences, first, last)
	return exitOK
}

func runFencesDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("fences delete", "fences delete ID... --brokers B [--hex]",
		`Deletes fences by publishing a tombstone (null value) for each ID to the compacted fences topic.
Devices inside a deleted fence get an EXIT with reason FENCE_DELETED.
An ID is a record key: a record that is not a valid fence (reported by the
processors and by fences list with the command that removes it) is deleted the
same way. A record whose fence_id differs from its key is found by either.
With --hex, each ID is the hex form of the key's bytes.`)
	var kf kafkaFlags
	kf.register(c.fs)
	asHex := c.fs.Bool("hex", false, "the IDs are hex-encoded key bytes (for keys that are not printable UTF-8)")
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return c.usageErr(stderr, "missing fence ID")
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	keys := make([][]byte, 0, len(pos))
	for _, id := range pos {
		key := []byte(id)
		if *asHex {
			var err error
			if key, err = hex.DecodeString(id); err != nil {
				return c.fail(stderr, fmt.Errorf("--hex key %q: %w; nothing deleted", id, err))
			}
		}
		// Nothing is refused: a tombstone must match whatever key the
		// record has, including one our producers would refuse (an empty
		// key, which a foreign producer can write to a compacted topic).
		keys = append(keys, key)
	}
	cur, err := readFences(ctx, kf)
	if err != nil {
		return c.fail(stderr, err)
	}
	var records []*kgo.Record
	seen := map[string]bool{}
	add := func(key string) {
		if !seen[key] {
			seen[key] = true
			// A non-nil Key even when empty: a nil one would be a null key,
			// which matches no record (and a compacted topic refuses).
			records = append(records, &kgo.Record{Topic: geofence.TopicFences, Key: append([]byte{}, key...)})
		}
	}
	for _, key := range keys {
		found := cur.keys[string(key)]
		if found {
			add(string(key))
		}
		// A record keyed otherwise that names this fence_id: the catalogue
		// refuses it, and only a tombstone for its own key removes it.
		for _, bad := range cur.invalid {
			if bad.fenceID == string(key) && bad.key != string(key) {
				fmt.Fprintf(stdout, "record with key %q names fence_id %q: deleting it by its key\n", bad.key, bad.fenceID)
				add(bad.key)
				found = true
			}
		}
		if !found {
			fmt.Fprintf(stderr, "fencectl fences delete: no record with key %q in topic %s; nothing to delete for it\n", key, geofence.TopicFences)
		}
	}
	if len(records) == 0 {
		fmt.Fprintln(stdout, "nothing deleted")
		return exitOK
	}
	first, last, _, err := publish(ctx, kf, records, false)
	if err != nil {
		return c.fail(stderr, err)
	}
	fmt.Fprintf(stdout, "deleted %d fences (tombstones at offsets %d..%d of topic %s)\n", len(records), first, last, geofence.TopicFences)
	return exitOK
}

// publish writes records to the fences topic after checking that it exists,
// and returns the first and last offsets written. With ifEmpty, a topic that
// already holds records is left alone and held says how many it holds.
func publish(ctx context.Context, kf kafkaFlags, records []*kgo.Record, ifEmpty bool) (first, last, held int64, err error) {
	kc, adm, err := kf.connect(ctx, kgo.RecordRetries(5))
	if err != nil {
		return 0, 0, 0, err
	}
	defer kc.Close()
	limit, err := checkTopic(ctx, adm, kf, records)
	if err != nil {
		return 0, 0, 0, err
	}
	prod := kc
	if limit > defaultProducerBatchBytes {
		// The topic takes records larger than the client's default batch.
		pc, _, err := kf.connect(ctx, kgo.RecordRetries(5), kgo.ProducerBatchMaxBytes(limit))
		if err != nil {
			return 0, 0, 0, err
		}
		defer pc.Close()
		prod = pc
	}
	if ifEmpty {
		counts, err := partitionCounts(ctx, adm, kf, geofence.TopicFences)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, n := range counts {
			held += n
		}
		if held > 0 {
			return 0, 0, held, nil
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 3*kf.timeout)
	defer cancel()
	res := prod.ProduceSync(pctx, records...)
	first, last = math.MaxInt64, -1
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", r.Record.Key, r.Err))
			continue
		}
		first, last = min(first, r.Record.Offset), max(last, r.Record.Offset)
	}
	if len(errs) > 0 {
		return 0, 0, 0, fmt.Errorf("publishing to %s: %d of %d records failed: %w", geofence.TopicFences, len(errs), len(records), errors.Join(errs...))
	}
	return first, last, 0, nil
}

// checkLoad connects and runs checkTopic: what a load checks before it
// publishes, for a dry run.
func checkLoad(ctx context.Context, kf kafkaFlags, records []*kgo.Record) error {
	kc, adm, err := kf.connect(ctx)
	if err != nil {
		return err
	}
	defer kc.Close()
	_, err = checkTopic(ctx, adm, kf, records)
	return err
}

// checkTopic refuses records the fences topic would not take (it is missing,
// or a record is above its max.message.bytes), here and with the fix rather
// than by the broker after the fact, and returns the topic's limit.
func checkTopic(ctx context.Context, adm *kadm.Client, kf kafkaFlags, records []*kgo.Record) (int32, error) {
	if err := requireTopic(ctx, adm, kf, geofence.TopicFences); err != nil {
		return 0, err
	}
	limit, where, err := maxMessageBytes(ctx, adm, kf, geofence.TopicFences)
	if err != nil {
		return 0, err
	}
	if err := checkRecordSizes(records, limit, where); err != nil {
		return 0, fmt.Errorf("%w; nothing published", err)
	}
	return limit, nil
}

const (
	// defaultMaxMessageBytes is Kafka's default max.message.bytes.
	defaultMaxMessageBytes = 1_048_588
	// defaultProducerBatchBytes is franz-go's default ProducerBatchMaxBytes.
	defaultProducerBatchBytes = 1_000_012
	// recordOverhead bounds a record batch's header (61 bytes) and one
	// record's framing without headers.
	recordOverhead = 61 + 32
)

// maxMessageBytes is the largest record batch topic accepts: its
// max.message.bytes (which defaults to the broker's message.max.bytes), and
// where that figure comes from.
func maxMessageBytes(ctx context.Context, adm *kadm.Client, kf kafkaFlags, topic string) (int32, string, error) {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(rctx, topic)
	if err != nil {
		return 0, "", fmt.Errorf("describing the configuration of topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, "", fmt.Errorf("describing the configuration of topic %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			var n int64
			if _, err := fmt.Sscan(*c.Value, &n); err == nil && n > 0 && n <= math.MaxInt32 {
				return int32(n), fmt.Sprintf("topic %s (max.message.bytes)", topic), nil
			}
		}
	}
	return defaultMaxMessageBytes, "Kafka's default", nil
}

// checkRecordSizes refuses records that would not fit in limit bytes,
// naming each and how to fix it.
func checkRecordSizes(records []*kgo.Record, limit int32, where string) error {
	var errs []error
	for _, r := range records {
		if n := recordOverhead + len(r.Key) + len(r.Value); n > int(limit) {
			errs = append(errs, fmt.Errorf("fence %q encodes to %s (%d bytes), above the %s a record may have (%s): "+
				"simplify its geometry to fewer vertices (e.g. mapshaper -simplify or ogr2ogr -simplify) or raise max.message.bytes of topic %s",
				r.Key, mib(n), n, mib(int(limit)), where, geofence.TopicFences))
		}
	}
	return errors.Join(errs...)
}

func mib(n int) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// requireTopic fails clearly when topic is missing on the broker.
func requireTopic(ctx context.Context, adm *kadm.Client, kf kafkaFlags, topic string) error {
	rctx, cancel := kf.requestCtx(ctx)
	defer cancel()
	details, err := adm.ListTopics(kadm.WithAuthorizedOps(rctx), topic)
	if err != nil {
		return fmt.Errorf("describing topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("topic %q does not exist on broker %s; create the topology first: fencectl topology check --create --brokers %s", topic, kf.brokers(), kf.brokers())
	}
	if d.Err != nil {
		return fmt.Errorf("describing topic %s: %w", topic, d.Err)
	}
	return nil
}

func runFencesList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("fences list", "fences list --brokers B",
		"Reads the fences topic from its start to its current end and lists the live fences:\nid, name, kind and area (polygons) or radius (circles), and each fence's effective\ndebounce settings (its own, marked *, over the debouncer's built-in defaults).")
	var kf kafkaFlags
	kf.register(c.fs)
	pos, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return c.usageErr(stderr, "unexpected arguments %q", pos)
	}
	if err := kf.validate(); err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	cur, err := readFences(ctx, kf)
	if err != nil {
		return c.fail(stderr, err)
	}
	printFences(stdout, cur.fences)
	fmt.Fprintf(stdout, "%d fences\n", len(cur.fences))
	for _, bad := range cur.invalid {
		fmt.Fprintf(stderr, "fencectl fences list: skipped invalid record with key %q at offset %d: %v\n  remove it with: %s\n",
			bad.key, bad.offset, bad.err, fences.DeleteCommand([]byte(bad.key)))
	}
	return exitOK
}

// fencesTopic is what the fences topic holds: the live, valid fences; the
// latest records per key that are not valid fences; every live key.
type fencesTopic struct {
	fences  []*pb.Fence
	invalid []invalidFence
	keys    map[string]bool
}

type invalidFence struct {
	key     string
	offset  int64
	fenceID string // as decoded, "" when undecodable
	err     error
}

// readFences reads the compacted fences topic to its end: the latest value per
// key, tombstones removing it.
func readFences(ctx context.Context, kf kafkaFlags) (fencesTopic, error) {
	var out fencesTopic
	kc, adm, err := kf.connect(ctx,
		kgo.ConsumeTopics(geofence.TopicFences),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return out, err
	}
	defer kc.Close()
	if err := requireTopic(ctx, adm, kf, geofence.TopicFences); err != nil {
		return out, err
	}
	rctx, cancel := kf.requestCtx(ctx)
	ends, err := adm.ListEndOffsets(rctx, geofence.TopicFences)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return out, fmt.Errorf("end offsets of %s: %w", geofence.TopicFences, err)
	}
	target := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			target[o.Partition] = o.Offset
		}
	})
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range target {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	latest := map[string]*pb.Fence{}
	invalid := map[string]invalidFence{}
	codec := codecs.For[pb.Fence]()
	fctx, cancel := context.WithTimeout(ctx, 6*kf.timeout)
	defer cancel()
	for !done() {
		fetches := kc.PollFetches(fctx)
		if fctx.Err() != nil {
			return out, fmt.Errorf("reading %s: %w", geofence.TopicFences, fctx.Err())
		}
		var errs []error
		fetches.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return out, fmt.Errorf("reading %s: %w", geofence.TopicFences, errors.Join(errs...))
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			id := string(r.Key)
			delete(latest, id)
			delete(invalid, id)
			if r.Value == nil {
				return
			}
			f, err := codec.Unmarshal(r.Value)
			if err == nil && f.GetFenceId() != id {
				err = fmt.Errorf("fence_id %q differs from key %q", f.GetFenceId(), id)
			}
			if err == nil {
				_, err = fences.FenceFromProto(f)
			}
			if err != nil {
				invalid[id] = invalidFence{key: id, offset: r.Offset, fenceID: f.GetFenceId(), err: err}
				return
			}
			latest[id] = f
		})
	}
	out.keys = make(map[string]bool, len(latest)+len(invalid))
	for id, f := range latest {
		out.fences = append(out.fences, f)
		out.keys[id] = true
	}
	sort.Slice(out.fences, func(i, j int) bool { return out.fences[i].GetFenceId() < out.fences[j].GetFenceId() })
	for id, bad := range invalid {
		out.invalid = append(out.invalid, bad)
		out.keys[id] = true
	}
	sort.Slice(out.invalid, func(i, j int) bool { return out.invalid[i].key < out.invalid[j].key })
	return out, nil
}

func printFences(w io.Writer, list []*pb.Fence) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKIND\tSIZE\t"+settingsHeader)
	for _, p := range list {
		kind, size := describeFence(p)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.GetFenceId(), oneLine(p.GetName()), kind, size, settingsColumns(p))
	}
	tw.Flush()
	if len(list) > 0 {
		fmt.Fprintln(w, settingsLegend())
	}
}

// describeFence names the fence's kind and its size: the radius of a circle,
// the geodesic area of a polygon (holes excluded).
func describeFence(p *pb.Fence) (kind, size string) {
	f, err := fences.FenceFromProto(p)
	if err != nil {
		return "invalid", err.Error()
	}
	switch g := f.Geometry.(type) {
	case orb.Point:
		return "circle", fmt.Sprintf("radius %s", metres(f.RadiusM))
	case orb.Polygon:
		holes := ""
		if len(g) > 1 {
			holes = fmt.Sprintf(" (%d holes)", len(g)-1)
			if len(g) == 2 {
				holes = " (1 hole)"
			}
		}
		return "polygon", "area " + area(geo.Area(g)) + holes
	case orb.MultiPolygon:
		return fmt.Sprintf("multipolygon/%d", len(g)), "area " + area(geo.Area(g))
	}
	return fmt.Sprintf("%T", f.Geometry), ""
}

func metres(m float64) string {
	if m >= 1000 {
		return fmt.Sprintf("%.2f km", m/1000)
	}
	return fmt.Sprintf("%.0f m", m)
}

func area(m2 float64) string {
	m2 = math.Abs(m2)
	if m2 >= 1e6 {
		return fmt.Sprintf("%.2f km²", m2/1e6)
	}
	if m2 >= 1e4 {
		return fmt.Sprintf("%.2f ha", m2/1e4)
	}
	return fmt.Sprintf("%.0f m²", m2)
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		return "-"
	}
	return s
}
