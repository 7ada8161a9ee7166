package debounce_test

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/debounce"
	"github.com/fencestream/fencestream/processors/fences"
	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/topology"
)

// fuzzCatalogueGeoJSON: small fences of every kind, close enough together
// that one stream of pings wanders through several, with settings from a raw
// detector (min_samples 1) to the defaults, plus a hole, a pole and the
// antimeridian.
const fuzzCatalogueGeoJSON = `{"type":"FeatureCollection","features":[
{"type":"Feature","properties":{"id":"circle","radius_m":50,"min_samples":1},"geometry":{"type":"Point","coordinates":[13.4,52.5]}},
{"type":"Feature","properties":{"id":"ring","radius_m":200,"min_samples":2,"min_dwell_s":1,"hysteresis_m":5,"loiter_s":20},"geometry":{"type":"Point","coordinates":[13.4,52.5]}},
{"type":"Feature","properties":{"id":"holed"},"geometry":{"type":"Polygon","coordinates":[[[13.401,52.5],[13.406,52.5],[13.406,52.503],[13.401,52.503],[13.401,52.5]],[[13.402,52.501],[13.402,52.502],[13.405,52.502],[13.405,52.501],[13.402,52.501]]]}},
{"type":"Feature","properties":{"id":"pole","radius_m":300,"min_samples":1,"hysteresis_m":0.5},"geometry":{"type":"Point","coordinates":[0,89.999]}},
{"type":"Feature","properties":{"id":"anti","min_samples":2},"geometry":{"type":"MultiPolygon","coordinates":[[[[179.999,-0.001],[180,-0.001],[180,0.001],[179.999,0.001],[179.999,-0.001]]],[[[-180,-0.001],[-179.999,-0.001],[-179.999,0.001],[-180,0.001],[-180,-0.001]]]]}}
]}`

// fuzzAnchors are the places the pings of a fuzz input start from: inside or
// near each fence.
var fuzzAnchors = [][2]float64{{52.5, 13.4}, {52.5015, 13.4035}, {89.999, 0}, {0, 180}, {0, -179.9995}, {52.4985, 13.399}}

var fuzzSnap = sync.OnceValues(func() (*fences.Snapshot, error) {
	fs, err := fences.ParseFences([]byte(fuzzCatalogueGeoJSON))
	if err != nil {
		return nil, err
	}
	cat := fences.New()
	if err := cat.Apply(3, fs, nil); err != nil {
		return nil, err
	}
	return cat.Snapshot(), nil
})

// fuzzPingBytes is the size of one encoded ping in a fuzz input, without the
// 16 extra bytes of a raw-coordinates ping.
const fuzzPingBytes = 10

// decodeFuzzPings turns fuzz bytes into pings for key. Each ping is 10 bytes:
//
//	0     mode: bits 0-2 anchor (6 = raw lat/lon bits in 16 more bytes, 7 =
//	      stay where the last ping was); bit 3 device_id empty, bit 4
//	      device_id differs from the key; bit 5 time goes backwards; bit 6
//	      HLC goes backwards; bit 7 accuracy is NaN, -1 or +Inf (by b5)
//	1-2   latitude offset, int16 × 5e-7°; 3-4 longitude offset
//	5     accuracy, metres / 4
//	6-7   device time step, ms
//	8-9   HLC step
//
// Time and HLC wrap freely: 0, negative times and 2^64-1 all occur.
func decodeFuzzPings(key string, data []byte) []*geofencepb.Ping {
	var out []*geofencepb.Ping
	lat, lon := fuzzAnchors[0][0], fuzzAnchors[0][1]
	timeMs, h := int64(1_700_000_000_000), uint64(1)
	for len(data) >= fuzzPingBytes {
		rec := data[:fuzzPingBytes]
		data = data[fuzzPingBytes:]
		mode := rec[0]
		dLat := float64(int16(binary.LittleEndian.Uint16(rec[1:]))) * 5e-7
		dLon := float64(int16(binary.LittleEndian.Uint16(rec[3:]))) * 5e-7
		switch a := int(mode & 7); {
		case a < len(fuzzAnchors):
			lat, lon = fuzzAnchors[a][0]+dLat, fuzzAnchors[a][1]+dLon
		case a == 6 && len(data) >= 16:
			lat = math.Float64frombits(binary.LittleEndian.Uint64(data))
			lon = math.Float64frombits(binary.LittleEndian.Uint64(data[8:]))
			data = data[16:]
		default:
			lat, lon = lat+dLat, lon+dLon
		}
		acc := float64(rec[5]) / 4
		if mode&0x80 != 0 {
			acc = []float64{math.NaN(), -1, math.Inf(1), 0}[rec[5]&3]
		}
		dt := int64(binary.LittleEndian.Uint16(rec[6:]))
		if mode&0x20 != 0 {
			dt = -dt
		}
		timeMs += dt
		dh := uint64(binary.LittleEndian.Uint16(rec[8:]))
		if mode&0x40 != 0 {
			h -= dh
		} else {
			h += dh
		}
		id := key
		switch {
		case mode&0x08 != 0:
			id = ""
		case mode&0x10 != 0:
			id = key + "-other"
		}
		out = append(out, &geofencepb.Ping{DeviceId: id, Lat: lat, Lon: lon, AccuracyM: acc, DeviceTimeMs: timeMs, Hlc: h})
	}
	return out
}

// encodeFuzzPing is the inverse of decodeFuzzPings for one ping (no raw
// coordinates), for seeds.
func encodeFuzzPing(mode byte, dLat, dLon int16, acc byte, dt, dh uint16) []byte {
	b := []byte{mode}
	b = binary.LittleEndian.AppendUint16(b, uint16(dLat))
	b = binary.LittleEndian.AppendUint16(b, uint16(dLon))
	b = append(b, acc)
	b = binary.LittleEndian.AppendUint16(b, dt)
	return binary.LittleEndian.AppendUint16(b, dh)
}

// FuzzApply feeds arbitrary pings of one device through ValidatePing, the
// HLC rule of the kit (a ping not newer than the state is not applied) and
// Apply, storing the state through its codec between pings as the group
// table does. Nothing panics, the state stays consistent with the triggers
// emitted (fuzzModel.check), and a replay gives the same triggers and state.
func FuzzApply(f *testing.F) {
	var park, wander, bad []byte
	for range 20 { // drive into the circle, park (DWELL in the ring), leave
		park = append(park, encodeFuzzPing(0, 0, 0, 8, 1500, 1)...)
	}
	park = append(park, encodeFuzzPing(0, 4000, 0, 8, 60000, 1)...)
	park = append(park, encodeFuzzPing(7, 0, 0, 8, 60000, 1)...)
	for a := range byte(6) {
		for i := range 4 {
			wander = append(wander, encodeFuzzPing(a, int16(i*300-600), int16(i*-200), byte(i*10), 4000, 2)...)
		}
	}
	bad = append(bad, encodeFuzzPing(0x80, 0, 0, 0, 10, 1)...)   // NaN accuracy
	bad = append(bad, encodeFuzzPing(0x08, 0, 0, 4, 10, 1)...)   // no device id: fine
	bad = append(bad, encodeFuzzPing(0x10, 0, 0, 4, 10, 1)...)   // wrong device id
	bad = append(bad, encodeFuzzPing(0x40, 0, 0, 4, 10, 9)...)   // HLC backwards
	bad = append(bad, encodeFuzzPing(0x20, 0, 0, 4, 9000, 1)...) // time backwards
	bad = append(bad, encodeFuzzPing(0x40, 0, 0, 4, 10, 0)...)   // HLC wraps below zero
	raw := append(encodeFuzzPing(6, 0, 0, 0, 10, 1), make([]byte, 16)...)
	binary.LittleEndian.PutUint64(raw[fuzzPingBytes:], math.Float64bits(math.Copysign(0, -1)))
	binary.LittleEndian.PutUint64(raw[fuzzPingBytes+8:], math.Float64bits(180))
	f.Add("veh-0004", park)
	f.Add("пристрій-1", wander)
	f.Add("veh-1", append(bad, raw...))
	f.Add("", park)
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		snap, err := fuzzSnap()
		if err != nil {
			t.Fatal(err)
		}
		if topology.ValidateKey(key, 0) != nil {
			return // the kit dead-letters the record before the handler runs
		}
		defaults := debounce.DefaultSettings()
		defaults.MinDwell, defaults.Loiter = 2*time.Second, 30*time.Second
		pings := decodeFuzzPings(key, data)
		first := fuzzRun(t, key, pings, snap, defaults, true)
		// Apply is pure: a replay of the same pings (a redelivery after a
		// crash, a takeover) yields the same triggers, ids and state.
		if again := fuzzRun(t, key, pings, snap, defaults, false); string(again) != string(first) {
			t.Fatalf("replaying %d pings gave other triggers or state", len(pings))
		}
	})
}

// fuzzRun applies pings to a new device state the way the processor does
// (checking every step when check is set) and returns the encoded triggers
// and final state.
func fuzzRun(t *testing.T, key string, pings []*geofencepb.Ping, snap *fences.Snapshot, defaults debounce.Settings, check bool) []byte {
	t.Helper()
	codec := codecs.For[geofencepb.DeviceState]()
	trig := codecs.For[geofencepb.Trigger]()
	var trace []byte
	st := &geofencepb.DeviceState{DeviceId: key}
	m := &fuzzModel{inside: map[string]bool{}, dwelled: map[string]bool{}}
	for _, p := range pings {
		if err := debounce.ValidatePing(key, p); err != nil {
			checkRefusedPing(t, key, p, err)
			continue
		}
		checkValidPing(t, key, p)
		// As the processor does: a ping without an HLC gets one from its
		// device time, and the kit applies only HLCs above the state's.
		p.Hlc = debounce.PingHLC(p)
		if p.GetHlc() == 0 || p.GetHlc() <= st.GetLastHlc() {
			continue // dead-lettered (no HLC, stale) or a replay: not applied
		}
		beforeBytes, _ := codec.Marshal(&geofencepb.DeviceState{FenceStates: st.FenceStates})
		prev := st.Pings
		out := debounce.Apply(st, p, snap, defaults)
		for _, tr := range out.Triggers {
			b, _ := trig.Marshal(tr)
			trace = append(trace, b...)
		}
		if check {
			afterBytes, _ := codec.Marshal(&geofencepb.DeviceState{FenceStates: st.FenceStates})
			if string(beforeBytes) != string(afterBytes) && !out.Changed {
				t.Fatalf("fence states changed but Outcome.Changed is false")
			}
			if st.LastHlc != p.GetHlc() || st.Pings != prev+1 || st.LastEventTimeMs < p.GetDeviceTimeMs() || st.DeviceId != key {
				t.Fatalf("device bookkeeping after ping %v: %v", p, st)
			}
			m.check(t, st, p, out, snap, defaults)
		}
		// Through the table's codec, as the next record would see it.
		b, err := codec.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if st, err = codec.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
	}
	final, _ := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	return append(trace, final...)
}

func checkRefusedPing(t *testing.T, key string, p *geofencepb.Ping, err error) {
	t.Helper()
	for _, sentinel := range []error{debounce.ErrDeviceMismatch, debounce.ErrBadCoordinates, debounce.ErrBadAccuracy, debounce.ErrNoEventTime} {
		if errors.Is(err, sentinel) {
			return
		}
	}
	t.Fatalf("ValidatePing(%q, %v) = %v: no sentinel to dead-letter it by", key, p, err)
}

// checkValidPing: what Apply is entitled to assume of a ping ValidatePing let
// through.
func checkValidPing(t *testing.T, key string, p *geofencepb.Ping) {
	t.Helper()
	lat, lon, acc := p.GetLat(), p.GetLon(), p.GetAccuracyM()
	if id := p.GetDeviceId(); id != "" && id != key ||
		!(lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180) ||
		!(acc >= 0) || math.IsInf(acc, 0) ||
		p.GetDeviceTimeMs() <= 0 {
		t.Fatalf("ValidatePing(%q) accepted %v", key, p)
	}
}

// fuzzModel is the trigger history of one device: which fences it is inside
// according to the triggers emitted so far, and whether DWELL fired in the
// current stay.
type fuzzModel struct {
	inside, dwelled map[string]bool
}

func (m *fuzzModel) check(t *testing.T, st *geofencepb.DeviceState, p *geofencepb.Ping, out debounce.Outcome, snap *fences.Snapshot, defaults debounce.Settings) {
	t.Helper()
	fired := map[string]bool{}
	for _, tr := range out.Triggers {
		f, ok := snap.Get(tr.FenceId)
		if !ok || fired[tr.FenceId] {
			t.Fatalf("trigger %v: unknown fence or second trigger for it from one ping", tr)
		}
		fired[tr.FenceId] = true
		if tr.DeviceId != st.DeviceId || tr.Hlc != p.GetHlc() || tr.EventTimeMs != p.GetDeviceTimeMs() ||
			tr.TriggerId != geofence.TriggerID(st.DeviceId, tr.FenceId, tr.Type, tr.Hlc) ||
			tr.Reason != geofencepb.TriggerReason_TRIGGER_REASON_CONFIRMED || tr.CatalogueVersion != snap.Version() {
			t.Fatalf("trigger %v for ping %v", tr, p)
		}
		d := f.SignedDistance(p.GetLat(), p.GetLon())
		cfg := debounce.Resolved(defaults, &f)
		switch tr.Type {
		case geofencepb.TriggerType_TRIGGER_TYPE_ENTER:
			// The confirming fix is evidence for inside: its whole accuracy
			// circle under the strict rule; under sprt, its own evidence
			// (which pushed the sum over the threshold, or was the last of a
			// run of clear fixes) is not negative: censoring and the floor on
			// σ scale a fix's evidence but never change its sign.
			need := p.GetAccuracyM()
			if cfg.Detector == debounce.DetectorSPRT {
				need = 0
			}
			if m.inside[tr.FenceId] || !(d >= 0 && d >= need) {
				t.Fatalf("ENTER %s at %v m (accuracy %v) while the history says inside=%v", tr.FenceId, d, p.GetAccuracyM(), m.inside[tr.FenceId])
			}
			m.inside[tr.FenceId], m.dwelled[tr.FenceId] = true, false
		case geofencepb.TriggerType_TRIGGER_TYPE_EXIT:
			need := max(cfg.Hysteresis, p.GetAccuracyM())
			if cfg.Detector == debounce.DetectorSPRT {
				need = cfg.Hysteresis // evidence is measured against the edge moved out by it
			}
			if !m.inside[tr.FenceId] || !(-d >= need) {
				t.Fatalf("EXIT %s at %v m (hysteresis %v, accuracy %v) while the history says inside=%v", tr.FenceId, d, cfg.Hysteresis, p.GetAccuracyM(), m.inside[tr.FenceId])
			}
			m.inside[tr.FenceId] = false
		case geofencepb.TriggerType_TRIGGER_TYPE_DWELL:
			if !m.inside[tr.FenceId] || m.dwelled[tr.FenceId] {
				t.Fatalf("DWELL %s: inside=%v, already dwelled=%v", tr.FenceId, m.inside[tr.FenceId], m.dwelled[tr.FenceId])
			}
			m.dwelled[tr.FenceId] = true
		default:
			t.Fatalf("trigger of type %v", tr.Type)
		}
	}
	if !slices.IsSortedFunc(st.FenceStates, func(a, b *geofencepb.FenceEntry) int { return strings.Compare(a.FenceId, b.FenceId) }) {
		t.Fatalf("fence states not sorted: %v", st.FenceStates)
	}
	live := map[string]bool{}
	for i, e := range st.FenceStates {
		f, ok := snap.Get(e.FenceId)
		if !ok || e.State == nil || (i > 0 && st.FenceStates[i-1].FenceId == e.FenceId) {
			t.Fatalf("fence state entry %v: unknown fence, nil state or duplicate", e)
		}
		cfg := debounce.Resolved(defaults, &f)
		s := e.State
		switch s.Phase {
		case geofencepb.Phase_PHASE_ENTERING, geofencepb.Phase_PHASE_EXITING:
			if s.CandidateSamples < 1 || int(s.CandidateSamples) > max(cfg.MinSamples, 1) {
				t.Fatalf("%s: candidate with %d samples (min_samples %d)", e.FenceId, s.CandidateSamples, cfg.MinSamples)
			}
		case geofencepb.Phase_PHASE_INSIDE:
		default:
			t.Fatalf("%s: stored phase %v (OUTSIDE is no entry)", e.FenceId, s.Phase)
		}
		// The sprt detector's run of clear fixes belongs to a candidate and
		// saturates at max(MinSamples, 2); no other state carries one.
		candidate := s.Phase == geofencepb.Phase_PHASE_ENTERING || s.Phase == geofencepb.Phase_PHASE_EXITING
		if int(s.ClearRun) > max(cfg.MinSamples, 2) || s.ClearRun != 0 && (!candidate || cfg.Detector != debounce.DetectorSPRT) {
			t.Fatalf("%s: clear run %d in %v (min_samples %d, detector %v)", e.FenceId, s.ClearRun, s.Phase, cfg.MinSamples, cfg.Detector)
		}
		in := s.Phase != geofencepb.Phase_PHASE_ENTERING
		if in != m.inside[e.FenceId] || in && s.DwellFired != m.dwelled[e.FenceId] {
			t.Fatalf("%s: state %v, but the triggers say inside=%v dwelled=%v", e.FenceId, s, m.inside[e.FenceId], m.dwelled[e.FenceId])
		}
		live[e.FenceId] = true
	}
	for id, in := range m.inside {
		if in && !live[id] {
			t.Fatalf("%s: the triggers say inside, the state says OUTSIDE", id)
		}
	}
}
