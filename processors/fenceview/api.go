package fenceview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paulmach/orb"
	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
	"github.com/fencestream/fencestream/topology/hlc"
)

// Bounds is a latitude/longitude box in degrees (West > East when it
// crosses the antimeridian).
type Bounds struct {
	South float64 `json:"south"`
	West  float64 `json:"west"`
	North float64 `json:"north"`
	East  float64 `json:"east"`
}

// FenceSummary is one fence of GET /v1/fences.
type FenceSummary struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is "polygon", "multipolygon" or "circle".
	Kind        string  `json:"kind"`
	RadiusM     float64 `json:"radius_m,omitempty"`
	Count       int64   `json:"count"`
	EntersTotal uint64  `json:"enters_total"`
	ExitsTotal  uint64  `json:"exits_total"`
	DwellsTotal uint64  `json:"dwells_total"`
	// LastChangeMs is the event time of the last count change (0: never).
	LastChangeMs int64  `json:"last_change_ms,omitempty"`
	Bounds       Bounds `json:"bounds"`
	// Geometry is the GeoJSON geometry ([lon, lat] positions; a circle is
	// its centre Point with RadiusM), present when asked for.
	Geometry json.RawMessage `json:"geometry,omitempty"`
}

// FenceList is the body of GET /v1/fences.
type FenceList struct {
	CatalogueVersion uint64 `json:"catalogue_version"`
	// Total is the number of fences in the catalogue, whatever the page.
	Total  int    `json:"total"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
	Sort   string `json:"sort"`
	Order  string `json:"order"`
	// Bounds covers every fence of the catalogue (absent when it is empty).
	Bounds *Bounds         `json:"bounds,omitempty"`
	Fences []*FenceSummary `json:"fences"`
}

// FenceDetail is the body of GET /v1/fences/{id}.
type FenceDetail struct {
	FenceSummary
	// Devices inside, sorted, at most the server's cap; Count stays exact.
	Devices          []string `json:"devices"`
	DevicesTruncated bool     `json:"devices_truncated"`
	LastChange       string   `json:"last_change,omitempty"`
	// InCatalogue is false for a fence deleted from the catalogue that
	// still has an occupancy record.
	InCatalogue bool `json:"in_catalogue"`
	// Settings are the fence's effective debounce settings (absent when
	// it is not in the catalogue).
	Settings *SettingsJSON `json:"settings,omitempty"`
	// Tags, Groups and Metadata (the fence's other GeoJSON properties, a
	// JSON object) are the catalogue's; absent when empty.
	Tags     []string        `json:"tags,omitempty"`
	Groups   []string        `json:"groups,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// CatalogueVersion is the version this server's catalogue is at;
	// OccupancyCatalogueVersion the one the last occupancy change saw.
	CatalogueVersion          uint64 `json:"catalogue_version"`
	OccupancyCatalogueVersion uint64 `json:"occupancy_catalogue_version"`
	// Partition of the fence in the fence-keyed occupancy table.
	Partition int32 `json:"partition"`
	// LagRecords is how far this server's copy of that partition is behind,
	// when the source knows.
	LagRecords        *int64 `json:"lag_records,omitempty"`
	DuplicatesDropped uint64 `json:"duplicates_dropped"`
	StaleDropped      uint64 `json:"stale_dropped"`
}

// FenceStateJSON is the debounce state of one (device, fence).
type FenceStateJSON struct {
	FenceID   string `json:"fence_id"`
	FenceName string `json:"fence_name,omitempty"`
	// Phase is OUTSIDE, ENTERING, INSIDE or EXITING.
	Phase            string `json:"phase"`
	CandidateSinceMs int64  `json:"candidate_since_ms,omitempty"`
	CandidateSamples uint32 `json:"candidate_samples,omitempty"`
	InsideSinceMs    int64  `json:"inside_since_ms,omitempty"`
	DwellFired       bool   `json:"dwell_fired"`
}

// DeviceDetail is the body of GET /v1/devices/{id}.
type DeviceDetail struct {
	DeviceID string `json:"device_id"`
	// Partition of the device in the device-keyed topics (pings, triggers,
	// debouncer table) by the pinned partitioner.
	Partition       int32   `json:"partition"`
	LastPingTime    string  `json:"last_ping_time,omitempty"`
	LastEventTimeMs int64   `json:"last_event_time_ms"`
	LastHLC         uint64  `json:"last_hlc"`
	LastHLCWall     string  `json:"last_hlc_wall,omitempty"`
	LastHLCLogical  uint16  `json:"last_hlc_logical"`
	LastLat         float64 `json:"last_lat"`
	LastLon         float64 `json:"last_lon"`
	Pings           uint64  `json:"pings"`
	StalePings      uint64  `json:"stale_pings"`
	Triggers        uint64  `json:"triggers"`
	// CatalogueVersion is the catalogue version the last ping was applied with.
	CatalogueVersion uint64 `json:"catalogue_version"`
	// Fences holds every fence whose phase is not a settled OUTSIDE, by id.
	Fences []FenceStateJSON `json:"fences"`
}

// TriggerJSON is one event of GET /v1/triggers/stream.
type TriggerJSON struct {
	TriggerID string `json:"trigger_id"`
	DeviceID  string `json:"device_id"`
	FenceID   string `json:"fence_id"`
	// Type is ENTER, EXIT or DWELL; Reason CONFIRMED, TIMEOUT,
	// FENCE_DELETED or GROUP_LEFT.
	Type             string   `json:"type"`
	Reason           string   `json:"reason"`
	EventTimeMs      int64    `json:"event_time_ms"`
	EventTime        string   `json:"event_time,omitempty"`
	HLC              uint64   `json:"hlc"`
	CatalogueVersion uint64   `json:"catalogue_version"`
	Lat              float64  `json:"lat"`
	Lon              float64  `json:"lon"`
	FenceName        string   `json:"fence_name,omitempty"`
	FenceTags        []string `json:"fence_tags,omitempty"`
	DeviceGroups     []string `json:"device_groups,omitempty"`
}

// PartitionAnswer is the body of GET /v1/partition.
type PartitionAnswer struct {
	Key        string `json:"key"`
	Partitions int32  `json:"partitions"`
	Partition  int32  `json:"partition"`
	// Murmur2 is Kafka's murmur2 of the UTF-8 key bytes, 8 hex digits;
	// Positive is it with the sign bit cleared, the value taken modulo
	// Partitions.
	Murmur2  string `json:"murmur2"`
	Positive string `json:"murmur2_positive"`
	Rule     string `json:"rule"`
}

func fenceSummary(f *fences.Fence, occ *geofencepb.Occupancy, geometry bool) *FenceSummary {
	b := f.Bounds()
	fs := &FenceSummary{
		ID: f.ID, Name: f.Name, Kind: fenceKind(f.Geometry), RadiusM: f.RadiusM,
		Bounds: Bounds{South: b.South, West: b.West, North: b.North, East: b.East},
	}
	fillOccupancy(fs, occ)
	if geometry {
		fs.Geometry = fences.AppendGeoJSON(nil, f.Geometry)
	}
	return fs
}

func fillOccupancy(fs *FenceSummary, occ *geofencepb.Occupancy) {
	if occ == nil {
		return
	}
	fs.Count = occ.GetCount()
	fs.EntersTotal = occ.GetEntersTotal()
	fs.ExitsTotal = occ.GetExitsTotal()
	fs.DwellsTotal = occ.GetDwellsTotal()
	fs.LastChangeMs = occ.GetLastChangeMs()
}

func fenceKind(g orb.Geometry) string {
	switch g.(type) {
	case orb.Point:
		return "circle"
	case orb.MultiPolygon:
		return "multipolygon"
	default:
		return "polygon"
	}
}

// validID applies the producers' key rules to an id from a request.
func validID(w http.ResponseWriter, what, id string) bool {
	if err := topology.ValidateKey(id, 0); err != nil {
		writeError(w, http.StatusBadRequest, what+" "+err.Error())
		return false
	}
	return true
}

type listParams struct {
	sort, order   string
	limit, offset int
	geometry      bool
}

func parseListParams(r *http.Request) (listParams, error) {
	q := r.URL.Query()
	p := listParams{sort: q.Get("sort"), order: q.Get("order"), limit: DefaultPageLimit}
	switch p.sort {
	case "":
		p.sort = "id"
	case "id", "count":
	default:
		return p, fmt.Errorf("sort %q: want count or id", p.sort)
	}
	switch p.order {
	case "":
		p.order = "asc"
		if p.sort == "count" {
			p.order = "desc"
		}
	case "asc", "desc":
	default:
		return p, fmt.Errorf("order %q: want asc or desc", p.order)
	}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageLimit {
			return p, fmt.Errorf("limit %q: want an integer from 1 to %d", v, MaxPageLimit)
		}
		p.limit = n
	}
	if v := q.Get("offset"); v != "" || q.Has("offset") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, fmt.Errorf("offset %q: want an integer >= 0", v)
		}
		p.offset = n
	}
	if v := q.Get("geometry"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, fmt.Errorf("geometry %q: want true or false", v)
		}
		p.geometry = b
	}
	return p, nil
}

func (s *Server) handleFences(w http.ResponseWriter, r *http.Request) {
	p, err := parseListParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	snap := s.src.Fences.Snapshot()
	all := snap.All()
	occ := make(map[string]*geofencepb.Occupancy, len(all))
	if len(all) > 0 {
		err = s.src.Occupancy.Each(func(o *geofencepb.Occupancy) bool {
			occ[o.GetFenceId()] = o
			return true
		})
		if err != nil {
			s.sourceError(w, r, err)
			return
		}
	}
	list := &FenceList{CatalogueVersion: snap.Version(), Total: len(all), Offset: p.offset, Limit: p.limit, Sort: p.sort, Order: p.order, Fences: []*FenceSummary{}}
	sums := make([]*FenceSummary, 0, len(all))
	for i := range all {
		sums = append(sums, fenceSummary(&all[i], occ[all[i].ID], false))
	}
	list.Bounds = unionBounds(sums)
	slices.SortStableFunc(sums, func(a, b *FenceSummary) int {
		c := 0
		if p.sort == "count" {
			c = cmp.Compare(a.Count, b.Count)
		}
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
			if p.sort == "count" {
				return c // ties by id ascending whatever the order
			}
		}
		if p.order == "desc" {
			c = -c
		}
		return c
	})
	if p.offset < len(sums) {
		list.Fences = sums[p.offset:min(len(sums), p.offset+p.limit)]
	}
	if p.geometry {
		for _, f := range list.Fences {
			if fence, ok := snap.Get(f.ID); ok {
				f.Geometry = fences.AppendGeoJSON(nil, fence.Geometry)
			}
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// unionBounds is the box around every fence, ignoring antimeridian wrap.
func unionBounds(fs []*FenceSummary) *Bounds {
	if len(fs) == 0 {
		return nil
	}
	b := Bounds{South: math.Inf(1), West: math.Inf(1), North: math.Inf(-1), East: math.Inf(-1)}
	for _, f := range fs {
		b.South = min(b.South, f.Bounds.South)
		b.North = max(b.North, f.Bounds.North)
		b.West = min(b.West, f.Bounds.West, f.Bounds.East)
		b.East = max(b.East, f.Bounds.East, f.Bounds.West)
	}
	return &b
}

func (s *Server) handleFence(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(w, "fence id", id) {
		return
	}
	snap := s.src.Fences.Snapshot()
	occ, err := s.src.Occupancy.Fence(id)
	if err != nil {
		s.sourceError(w, r, err)
		return
	}
	fence, inCat := snap.Get(id)
	if !inCat && occ == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("fence %q is not in the catalogue (version %d) and has no occupancy", id, snap.Version()))
		return
	}
	d := &FenceDetail{InCatalogue: inCat, CatalogueVersion: snap.Version(), Devices: []string{}}
	if inCat {
		d.FenceSummary = *fenceSummary(&fence, occ, true)
		d.Settings = effectiveSettings(s.cfg.defaults, &fence)
		d.Tags, d.Groups, d.Metadata = fence.Tags, fence.Groups, fence.Metadata
	} else {
		d.ID = id
		fillOccupancy(&d.FenceSummary, occ)
	}
	if occ != nil {
		d.Devices, d.DevicesTruncated = insideDevices(occ, s.cfg.deviceCap)
		d.OccupancyCatalogueVersion = occ.GetCatalogueVersion()
		d.DuplicatesDropped = occ.GetDuplicatesDropped()
		d.StaleDropped = occ.GetStaleDropped()
		if ms := occ.GetLastChangeMs(); ms > 0 {
			d.LastChange = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		}
	}
	if tp, ok := s.cfg.topo.Topic(geofence.TopicOccupancy); ok {
		d.Partition = topology.PartitionFor(id, tp.Partitions)
		if ls, ok := s.src.Occupancy.(LagSource); ok {
			if lag, ok := ls.Lag(geofence.TopicOccupancy, d.Partition); ok {
				d.LagRecords = &lag
			}
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// insideDevices lists the devices inside: from the exact member map when
// the record has one (written before occupancy-members), else the record's
// (already capped) list.
func insideDevices(occ *geofencepb.Occupancy, limit int) ([]string, bool) {
	var out []string
	if m := occ.GetMembers(); len(m) > 0 {
		for dev, mem := range m {
			if mem.GetInside() {
				out = append(out, dev)
			}
		}
	} else {
		out = slices.Clone(occ.GetDevices())
	}
	slices.Sort(out)
	out = slices.Compact(out)
	truncated := int64(len(out)) < occ.GetCount()
	if len(out) > limit {
		out, truncated = out[:limit], true
	}
	if out == nil {
		out = []string{}
	}
	return out, truncated
}

func (s *Server) handleDevice(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(w, "device id", id) {
		return
	}
	st, err := s.src.Devices.Device(id)
	if err != nil {
		s.sourceError(w, r, err)
		return
	}
	if st == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("device %q is unknown: no ping of it has been applied", id))
		return
	}
	snap := s.src.Fences.Snapshot()
	d := &DeviceDetail{
		DeviceID:         id,
		LastEventTimeMs:  st.GetLastEventTimeMs(),
		LastHLC:          st.GetLastHlc(),
		LastHLCLogical:   hlc.Logical(hlc.Timestamp(st.GetLastHlc())),
		LastLat:          st.GetLastLat(),
		LastLon:          st.GetLastLon(),
		Pings:            st.GetPings(),
		StalePings:       st.GetStalePings(),
		Triggers:         st.GetTriggers(),
		CatalogueVersion: st.GetCatalogueVersion(),
		Fences:           []FenceStateJSON{},
	}
	if tp, ok := s.cfg.topo.Topic(geofence.TopicPings); ok {
		d.Partition = topology.PartitionFor(id, tp.Partitions)
	}
	if ms := st.GetLastEventTimeMs(); ms > 0 {
		d.LastPingTime = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	if st.GetLastHlc() != 0 {
		d.LastHLCWall = hlc.Time(hlc.Timestamp(st.GetLastHlc())).UTC().Format(time.RFC3339Nano)
	}
	st = proto.Clone(st).(*geofencepb.DeviceState) // Upgrade edits; the source's value is shared
	debounce.Upgrade(st)
	for _, e := range st.GetFenceStates() {
		fid, fst := e.GetFenceId(), e.GetState()
		fj := FenceStateJSON{
			FenceID:          fid,
			Phase:            strings.TrimPrefix(fst.GetPhase().String(), "PHASE_"),
			CandidateSinceMs: fst.GetCandidateSinceMs(),
			CandidateSamples: fst.GetCandidateSamples(),
			InsideSinceMs:    fst.GetInsideSinceMs(),
			DwellFired:       fst.GetDwellFired(),
		}
		if f, ok := snap.Get(fid); ok {
			fj.FenceName = f.Name
		}
		d.Fences = append(d.Fences, fj)
	}
	slices.SortFunc(d.Fences, func(a, b FenceStateJSON) int { return strings.Compare(a.FenceID, b.FenceID) })
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handlePartition(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := q.Get("key")
	if !validID(w, "partition", key) { // "partition key refused: ...": KeyError already says "key"
		return
	}
	n := int64(topology.DefaultPartitions)
	if tp, ok := s.cfg.topo.Topic(geofence.TopicPings); ok {
		n = int64(tp.Partitions)
	}
	if v := q.Get("partitions"); v != "" || q.Has("partitions") {
		var err error
		n, err = strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > MaxPartitions {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("partitions %q: want an integer from 1 to %d", v, MaxPartitions))
			return
		}
	}
	raw := topology.Murmur2([]byte(key))
	writeJSON(w, http.StatusOK, PartitionAnswer{
		Key: key, Partitions: int32(n), Partition: topology.PartitionFor(key, int32(n)),
		Murmur2: fmt.Sprintf("%08x", raw), Positive: fmt.Sprintf("%08x", raw&0x7fffffff),
		Rule: "(murmur2(utf8 key) & 0x7fffffff) % partitions",
	})
}

// TriggerToJSON is the stream's form of a trigger.
func TriggerToJSON(t *geofencepb.Trigger) TriggerJSON {
	tj := TriggerJSON{
		TriggerID: t.GetTriggerId(), DeviceID: t.GetDeviceId(), FenceID: t.GetFenceId(),
		Type:             strings.TrimPrefix(t.GetType().String(), "TRIGGER_TYPE_"),
		Reason:           strings.TrimPrefix(t.GetReason().String(), "TRIGGER_REASON_"),
		EventTimeMs:      t.GetEventTimeMs(),
		HLC:              t.GetHlc(),
		CatalogueVersion: t.GetCatalogueVersion(),
		Lat:              t.GetLat(), Lon: t.GetLon(),
		FenceName: t.GetFenceName(), FenceTags: t.GetFenceTags(), DeviceGroups: t.GetDeviceGroups(),
	}
	if ms := t.GetEventTimeMs(); ms > 0 {
		tj.EventTime = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	return tj
}
