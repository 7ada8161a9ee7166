package versioned

import (
	"errors"
	"fmt"
	"slices"
	"time"

	protov2 "google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group"
	"github.com/fencestream/fencestream/processors/group/kitpb"
)

// marshalOpts encodes values deterministically: a replay writes the same
// state bytes.
var marshalOpts = protov2.MarshalOptions{Deterministic: true}

// Versioned tables: Kafka Streams' versioned key-value stores (KIP-889) and
// the stream-table join that reads them as of the stream record's time
// (KIP-914). A key's versions live in a kitpb.VersionSet inside the owning
// group's state, so they are written with the key's envelope (effectively
// once, like any state), restored from the group table's changelog, and read
// by other groups through a Goka join or lookup of that table.
//
// Where fencestream differs from Kafka Streams, and why:
//   - Retention is judged per key. Kafka's store expires history by the
//     highest timestamp put to the whole store (all keys of the partition).
//     Here a put is judged by the later of the partition's stream time and
//     what the key's set last saw, exactly as Kafka judges it; but a read
//     sees only the key's own set, whose stream time is the one of its last
//     write: a key written rarely keeps answering from history Kafka would
//     already have expired. Never a wrong version, only a longer-kept one:
//     the reading group has no reproducible view of another group's
//     partition stream time.
//   - Versions per key are bounded (Spec.MaxVersions, rule 15).
//     Beyond it the oldest versions are dropped even within retention
//     (counted in the set and fencestream_versioned_records_total
//     {result="evicted"}); no read or put older than the oldest kept
//     version is then answered, so a dropped version never makes a read
//     return the wrong one.

// Errors of versioned tables.
var (
	// ErrBeyondHistory: a put, delete or read as of a time older than the
	// history the versioned table keeps (its retention, or the oldest
	// version the bound on versions per key left). A put or delete is
	// dropped and counted; a read answers no value.
	ErrBeyondHistory = errors.New("older than the versioned table's history")
)

// Bounds of a versioned table's spec.
const (
	// MaxVersionsPerKey is the largest Spec.MaxVersions.
	MaxVersionsPerKey = 4096
	// DefaultMaxVersions is Spec.MaxVersions when it is 0.
	DefaultMaxVersions = 128
)

// Spec describes a versioned table.
type Spec struct {
	// History is how far behind its stream time the table answers reads as
	// of a time (Kafka Streams' historyRetention, which doubles as the grace
	// period of puts): a put or delete older than stream time minus History
	// is dropped, and a read older than the key's stream time minus History
	// answers nothing, except that the latest version of a key never expires.
	// 0 keeps only the latest version.
	History time.Duration
	// MaxVersions bounds the versions one key keeps (default
	// DefaultMaxVersions, at most MaxVersionsPerKey). Choose it above the
	// most changes a key sees within History: beyond it, history is lost
	// early (counted).
	MaxVersions int
}

func (s Spec) withDefaults() Spec {
	if s.MaxVersions == 0 {
		s.MaxVersions = DefaultMaxVersions
	}
	return s
}

func (s Spec) validate() error {
	var errs []error
	if s.History < 0 {
		errs = append(errs, fmt.Errorf("History: must not be negative, got %s", s.History))
	}
	if s.MaxVersions < 1 || s.MaxVersions > MaxVersionsPerKey {
		errs = append(errs, fmt.Errorf("MaxVersions: must be 1 to %d, got %d", MaxVersionsPerKey, s.MaxVersions))
	}
	return errors.Join(errs...)
}

// Version is the version of a key valid at the time asked for.
type Version[M any, PM codecs.Message[M]] struct {
	// Value is nil when no value is valid at that time: the key was
	// deleted (a tombstone), had no version yet, or the time is older than
	// the history kept (Beyond).
	Value PM
	// ValidFrom is when the version became valid (the event time of its
	// put); ValidTo when the next version did, zero for the latest. Both
	// zero when no version is valid.
	ValidFrom, ValidTo time.Time
	// Beyond: the time is older than the history the table keeps, so no
	// answer is possible (Kafka Streams answers null, too).
	Beyond bool
}

// Found reports whether a value (not a tombstone) is valid at the time.
func (v Version[M, PM]) Found() bool { return v.Value != nil }

// versionAt finds the version of set valid at atMs: its index (-1: none),
// or beyond when atMs is older than the history kept.
func versionAt(set *kitpb.VersionSet, atMs int64) (i int, beyond bool) {
	vs := set.GetVersions()
	n := len(vs)
	if n == 0 {
		return -1, false
	}
	if atMs >= vs[n-1].GetValidFromMs() {
		return n - 1, false // the latest never expires
	}
	if atMs < set.GetObservedMs()-set.GetHistoryMs() || atMs < set.GetFloorMs() {
		return -1, true
	}
	// The last version whose valid_from is at or before atMs.
	i, found := slices.BinarySearchFunc(vs, atMs, func(v *kitpb.Version, t int64) int {
		switch {
		case v.GetValidFromMs() < t:
			return -1
		case v.GetValidFromMs() > t:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	return i, false
}

// AsOf is the version of set valid at time at (a view reads a key's
// history with it). A nil set has no versions.
func AsOf[M any, PM codecs.Message[M]](set *kitpb.VersionSet, at time.Time) (Version[M, PM], error) {
	var out Version[M, PM]
	i, beyond := versionAt(set, at.UnixMilli())
	if beyond {
		out.Beyond = true
		return out, nil
	}
	if i < 0 {
		return out, nil
	}
	vs := set.GetVersions()
	v := vs[i]
	out.ValidFrom = time.UnixMilli(v.GetValidFromMs())
	if i+1 < len(vs) {
		out.ValidTo = time.UnixMilli(vs[i+1].GetValidFromMs())
	}
	if v.GetTombstone() {
		return out, nil
	}
	m := PM(new(M))
	if err := protov2.Unmarshal(v.GetValue(), m); err != nil {
		return out, fmt.Errorf("version valid from %d ms: %w", v.GetValidFromMs(), err)
	}
	out.Value = m
	return out, nil
}

// putResult is what one put did to a set.
type putResult struct {
	// validToMs is the new version's valid_to: the next version's
	// valid_from, or -1 for the latest (Kafka's
	// PUT_RETURN_CODE_VALID_TO_UNDEFINED).
	validToMs int64
	// evicted is how many versions the bound on versions dropped.
	evicted int
}

// putVersion applies a put (tomb: a delete) at atMs to set, judged at stream
// time nowMs (the partition's), keeping at most maxVersions versions and
// history behind the stream time. A put older than the history is dropped,
// counted in set.expired, and returns ErrBeyondHistory.
func putVersion(set *kitpb.VersionSet, atMs int64, value []byte, tomb bool, nowMs int64, spec Spec) (putResult, error) {
	observed := max(set.GetObservedMs(), nowMs, atMs)
	set.ObservedMs = observed
	set.HistoryMs = spec.History.Milliseconds()
	if atMs < observed-set.HistoryMs || atMs < set.GetFloorMs() {
		set.Expired++
		return putResult{}, fmt.Errorf("%w: put at %d ms, stream time %d ms, history %s, oldest kept %d ms",
			ErrBeyondHistory, atMs, observed, spec.History, max(observed-set.HistoryMs, set.GetFloorMs()))
	}
	v := &kitpb.Version{ValidFromMs: atMs, Value: value, Tombstone: tomb}
	if tomb {
		v.Value = nil
	}
	i, found := slices.BinarySearchFunc(set.Versions, atMs, func(v *kitpb.Version, t int64) int {
		switch {
		case v.GetValidFromMs() < t:
			return -1
		case v.GetValidFromMs() > t:
			return 1
		}
		return 0
	})
	if found {
		set.Versions[i] = v // the same timestamp: the new value replaces the old
	} else {
		set.Versions = slices.Insert(set.Versions, i, v)
	}
	res := putResult{validToMs: -1}
	if i+1 < len(set.Versions) {
		res.validToMs = set.Versions[i+1].GetValidFromMs()
	}
	// Versions valid only before the horizon answer nothing any more: drop
	// them (the latest stays whatever its age).
	horizon := observed - set.HistoryMs
	drop := 0
	for drop+1 < len(set.Versions) && set.Versions[drop+1].GetValidFromMs() <= horizon {
		drop++
	}
	// The bound: beyond it, the oldest go, and nothing before the oldest
	// kept is answered any more.
	if over := len(set.Versions) - drop - spec.MaxVersions; over > 0 {
		drop += over
		res.evicted = over
		set.Evicted += int64(over)
		set.FloorMs = set.Versions[drop].GetValidFromMs()
	}
	if drop > 0 {
		set.Versions = slices.Delete(set.Versions, 0, drop)
	}
	return res, nil
}

// Table keeps a versioned value of type *M for each key of a group,
// in a kitpb.VersionSet inside the group's state: the table other groups
// join as of a time (Join, Lookup). Puts come from the
// group's handlers, stamped with event time (the record's, never the wall
// clock), in any order: a put older than the latest version becomes a
// history version in its place.
type Table[M any, PM codecs.Message[M], S any, PS codecs.Message[S]] struct {
	op   *group.Operator[S, PS]
	name string
	spec Spec
	set  func(PS) *kitpb.VersionSet
}

// NewTable registers a versioned table named name (unique in the
// group, for metrics) on g. set returns the VersionSet field of a key's
// state, creating it when absent (`if st.Versions == nil { st.Versions =
// &kitpb.VersionSet{} }; return st.Versions`). The value type comes first:
// NewTable[Fence](g, ...).
func NewTable[M any, PM codecs.Message[M], S any, PS codecs.Message[S]](g *group.Group[S, PS], name string, spec Spec, set func(PS) *kitpb.VersionSet) *Table[M, PM, S, PS] {
	spec = spec.withDefaults()
	op := group.NewOperator(g, "versioned", name)
	if err := spec.validate(); err != nil {
		op.Refuse(fmt.Errorf("group %s versioned table %s: %w", g.Name(), name, err))
	}
	if set == nil {
		op.Refuse(fmt.Errorf("group %s versioned table %s: nil set function", g.Name(), name))
	}
	return &Table[M, PM, S, PS]{op: op, name: name, spec: spec, set: set}
}

// Put makes value the key's version from at (its event time) until the
// next version's. st is the key's state, which the handler stores
// (SetState), also after an error: a put older than the history kept is
// dropped, counted in the set and in
// fencestream_versioned_records_total{result="expired"}, and ErrBeyondHistory
// returned (the handler may ignore it or return it to dead-letter the input).
// A nil value is a delete.
func (v *Table[M, PM, S, PS]) Put(c *group.Context[S, PS], st PS, at time.Time, value PM) error {
	if value == nil {
		return v.put(c, st, at, nil, true)
	}
	b, err := marshalOpts.Marshal(value)
	if err != nil {
		return fmt.Errorf("versioned table %s: encoding the value: %w", v.name, err)
	}
	return v.put(c, st, at, b, false)
}

// Delete puts a tombstone at at: no value is valid from then until the next
// version. Like Put otherwise.
func (v *Table[M, PM, S, PS]) Delete(c *group.Context[S, PS], st PS, at time.Time) error {
	return v.put(c, st, at, nil, true)
}

func (v *Table[M, PM, S, PS]) put(c *group.Context[S, PS], st PS, at time.Time, value []byte, tomb bool) error {
	set := v.set(st)
	if set == nil {
		return fmt.Errorf("versioned table %s: the set function returned nil", v.name)
	}
	res, err := putVersion(set, at.UnixMilli(), value, tomb, c.StreamTime().UnixMilli(), v.spec)
	if err != nil {
		v.op.CountVersioned(c, "expired", 1)
		return fmt.Errorf("versioned table %s: %w", v.name, err)
	}
	if res.evicted > 0 {
		v.op.CountVersioned(c, "evicted", res.evicted)
	}
	return nil
}

// AsOf is the key's version valid at at, read from its state st (nil: no
// versions).
func (v *Table[M, PM, S, PS]) AsOf(st PS, at time.Time) (Version[M, PM], error) {
	if st == nil {
		return Version[M, PM]{}, nil
	}
	return AsOf[M, PM](v.set(st), at)
}

// Joined reads another group's versioned table as of a time: the
// stream-table join of Kafka Streams with a versioned table (KIP-914), where
// a stream record at time t joins the table version valid at t, not the
// latest. The table is a Goka join (co-partitioned, Join) or lookup
// (any key, Lookup) of the owning group's table, whose state type
// is *T and holds the versions where set says.
//
// What it answers depends, as in Kafka Streams, on what the table holds when
// the stream record is processed: a version put after that is not seen. What
// the joining handler emits is recorded with its input like any output, so a
// replay re-emits the same records.
type Joined[M any, PM codecs.Message[M], T any, PT codecs.Message[T]] struct {
	table  string
	joined group.Joined[T, PT] // zero for a lookup
	looked group.Looked[T, PT] // zero for a join
	set    func(PT) *kitpb.VersionSet
	lookup bool
	// beyond counts a read older than the table's history, in the reading
	// group's metrics.
	beyond func(c group.Reader)
}

// Join declares that g joins table — another group's table whose
// state *T keeps a Table of *M where set says — for the key it is
// processing (co-partitioned; the topology lists it under Joins). The value
// type comes first: Join[Fence](g, "fence-versions-table",
// func(st *FenceVersions) *kitpb.VersionSet { return st.GetVersions() }).
func Join[M any, PM codecs.Message[M], T any, PT codecs.Message[T], S any, PS codecs.Message[S]](g *group.Group[S, PS], table string, set func(PT) *kitpb.VersionSet) Joined[M, PM, T, PT] {
	op := group.NewOperator(g, "versioned", table)
	if set == nil {
		op.Refuse(fmt.Errorf("group %s versioned join %s: nil set function", g.Name(), table))
	}
	return Joined[M, PM, T, PT]{table: table, joined: group.Join[T, PT](g, table), set: set, beyond: countBeyond(op)}
}

// Lookup is Join for any key: g keeps all of table (the
// topology lists it under Lookups) and the read names its key (AsOfKey).
func Lookup[M any, PM codecs.Message[M], T any, PT codecs.Message[T], S any, PS codecs.Message[S]](g *group.Group[S, PS], table string, set func(PT) *kitpb.VersionSet) Joined[M, PM, T, PT] {
	op := group.NewOperator(g, "versioned", table)
	if set == nil {
		op.Refuse(fmt.Errorf("group %s versioned lookup %s: nil set function", g.Name(), table))
	}
	return Joined[M, PM, T, PT]{table: table, looked: group.Lookup[T, PT](g, table), set: set, lookup: true, beyond: countBeyond(op)}
}

// Table is the joined table.
func (j Joined[M, PM, T, PT]) Table() string { return j.table }

// AsOf is the version, valid at at, of the joined table's value for the key
// c is processing (a join; for a lookup, the key c is processing, too). A
// time older than the table's history answers Beyond (counted in
// fencestream_versioned_records_total{result="beyond-history"}).
func (j Joined[M, PM, T, PT]) AsOf(c group.Reader, at time.Time) (Version[M, PM], error) {
	return j.AsOfKey(c, "", at)
}

// AsOfKey is AsOf for key (a lookup; a join reads only the key c is
// processing, and key must be it or empty).
func (j Joined[M, PM, T, PT]) AsOfKey(c group.Reader, key string, at time.Time) (Version[M, PM], error) {
	var st PT
	var err error
	switch {
	case !j.lookup:
		if kr, ok := c.(keyReader); ok && key != "" && key != kr.Key() {
			return Version[M, PM]{}, fmt.Errorf("versioned join %s: key %q is not the key being processed (%q): a join reads only its own key; use Lookup", j.table, key, kr.Key())
		}
		st, err = j.joined.Get(c)
	default:
		if key == "" {
			if kr, ok := c.(keyReader); ok {
				key = kr.Key()
			}
		}
		st, err = j.looked.Get(c, key)
	}
	if err != nil {
		return Version[M, PM]{}, err
	}
	var set *kitpb.VersionSet
	if st != nil && j.set != nil {
		set = j.set(st)
	}
	v, err := AsOf[M, PM](set, at)
	if err != nil {
		return v, fmt.Errorf("versioned join %s: %w", j.table, err)
	}
	if v.Beyond && j.beyond != nil {
		j.beyond(c)
	}
	return v, nil
}

// Inner is the inner stream-table join as of at: joiner runs only when a
// value is valid at that time; the result says whether it ran.
func (j Joined[M, PM, T, PT]) Inner(c group.Reader, at time.Time, joiner func(Version[M, PM]) error) (bool, error) {
	v, err := j.AsOf(c, at)
	if err != nil || !v.Found() {
		return false, err
	}
	return true, joiner(v)
}

// Left is the left stream-table join as of at: joiner always runs, with a
// nil Value when none is valid at that time.
func (j Joined[M, PM, T, PT]) Left(c group.Reader, at time.Time, joiner func(Version[M, PM]) error) error {
	v, err := j.AsOf(c, at)
	if err != nil {
		return err
	}
	return joiner(v)
}

// keyReader is what a Reader (a Context) also offers versioned reads.
type keyReader interface{ Key() string }

// countBeyond counts, in op's group, a read older than the table's history.
// A Reader that reads through the group's handles is its Context.
func countBeyond[S any, PS codecs.Message[S]](op *group.Operator[S, PS]) func(group.Reader) {
	return func(r group.Reader) {
		if c, ok := r.(*group.Context[S, PS]); ok {
			op.CountVersioned(c, "beyond-history", 1)
		}
	}
}
