package fenceview

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/fencestream/fencestream/processors/group/httpguard"
	"github.com/fencestream/fencestream/topology"
)

// handleStream serves GET /v1/triggers/stream as Server-Sent Events: one
// "trigger" event per trigger (id = trigger id, data = TriggerJSON), a
// "dropped" event when this client fell behind and lost triggers, and a
// comment line every heartbeat. It ends when the client goes away or the
// server's base context ends.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	filter, ok := s.streamFilter(w, r)
	if !ok {
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many trigger streams open (the cap is %d); retry later", cap(s.streams)))
		return
	}
	rc := http.NewResponseController(w)
	// A stream lasts as long as its client wants: exempt from the server's
	// whole-response deadlines, but every write must get through within
	// streamWriteTimeout, so a client that stops reading frees its slot.
	if err := httpguard.Unbounded(w); err != nil {
		s.cfg.log.Warn("trigger stream: deadlines cannot be lifted", "err", err)
	}
	bound := func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	bound()
	sub := s.src.Feed.Subscribe(filter) // before the headers: a client that saw them misses nothing
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: connected\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		s.cfg.log.Warn("trigger stream: response cannot be flushed", "err", err)
		return
	}
	tick := time.NewTicker(s.cfg.heartbeat)
	defer tick.Stop()
	var reported uint64
	for {
		select {
		case <-r.Context().Done():
			return
		case t, ok := <-sub.C:
			if !ok {
				return
			}
			bound()
			data, err := json.Marshal(TriggerToJSON(t))
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %s\nevent: trigger\ndata: %s\n\n", sseLine(t.GetTriggerId()), data); err != nil {
				return
			}
			if d := sub.Dropped(); d != reported {
				reported = d
				if _, err := fmt.Fprintf(w, "event: dropped\ndata: {\"dropped\":%d}\n\n", d); err != nil {
					return
				}
			}
		case now := <-tick.C:
			bound()
			if _, err := fmt.Fprintf(w, ": heartbeat %s\n\n", now.UTC().Format(time.RFC3339)); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// streamFilter reads the fence and device parameters of the trigger routes;
// it answers the request itself (400, 404, 503) and returns false when they
// are not usable.
func (s *Server) streamFilter(w http.ResponseWriter, r *http.Request) (Filter, bool) {
	q := r.URL.Query()
	var filter Filter
	for _, f := range []struct {
		name string
		dst  *string
	}{{"fence", &filter.FenceID}, {"device", &filter.DeviceID}} {
		v := q.Get(f.name)
		if v == "" {
			continue // absent or empty: no filter
		}
		if !validID(w, f.name, v) {
			return filter, false
		}
		*f.dst = v
	}
	if filter.FenceID != "" && !s.knownFence(w, r, filter.FenceID) {
		return filter, false
	}
	return filter, true
}

// knownFence answers 404 (or 503 while the sources are incomplete) unless
// the fence is in the catalogue or has occupancy: a stream filtered by a
// misspelt id would otherwise stay silent forever.
func (s *Server) knownFence(w http.ResponseWriter, r *http.Request, id string) bool {
	snap := s.src.Fences.Snapshot()
	if _, ok := snap.Get(id); ok {
		return true
	}
	if ok, why := s.src.Ready.Ready(); !ok {
		writeNotReady(w, why)
		return false
	}
	occ, err := s.src.Occupancy.Fence(id)
	if err != nil {
		s.sourceError(w, r, err)
		return false
	}
	if occ == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("fence %q is not in the catalogue (version %d) and has no occupancy", id, snap.Version()))
		return false
	}
	return true
}

// sseLine keeps a value on one SSE line.
func sseLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' || r == 0 {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// TopologyJSON is the body of GET /v1/topology.
type TopologyJSON struct {
	Name       string          `json:"name"`
	Describe   string          `json:"describe"`
	Mermaid    string          `json:"mermaid"`
	Topics     []TopicJSON     `json:"topics"`
	Processors []ProcessorJSON `json:"processors"`
	Boundaries []BoundaryJSON  `json:"boundaries"`
}

// TopicJSON is one declared topic.
type TopicJSON struct {
	Name       string `json:"name"`
	Key        string `json:"key"`
	Value      string `json:"value"`
	Partitions int32  `json:"partitions"`
	Cleanup    string `json:"cleanup"`
	Salting    bool   `json:"salting"`
	Doc        string `json:"doc,omitempty"`
}

// ProcessorJSON is one declared processor.
type ProcessorJSON struct {
	Group     string     `json:"group"`
	Streams   []string   `json:"streams"`
	Broadcast []string   `json:"broadcast"`
	Emits     []string   `json:"emits"`
	Loop      string     `json:"loop,omitempty"`
	Table     string     `json:"table,omitempty"`
	Flows     []FlowJSON `json:"flows"`
	Doc       string     `json:"doc,omitempty"`
}

// FlowJSON is one flow; Boundary marks a declared re-key.
type FlowJSON struct {
	From     string `json:"from"`
	To       string `json:"to"`
	FromKey  string `json:"from_key"`
	ToKey    string `json:"to_key"`
	Boundary bool   `json:"boundary"`
}

// BoundaryJSON is one declared ordering boundary.
type BoundaryJSON struct {
	Processor string `json:"processor"`
	From      string `json:"from"`
	To        string `json:"to"`
	FromKey   string `json:"from_key"`
	ToKey     string `json:"to_key"`
	Preserved string `json:"preserved"`
	Lost      string `json:"lost"`
	Lag       string `json:"lag,omitempty"`
}

// DescribeTopology is the structured form of t that /v1/topology serves.
func DescribeTopology(t *topology.Topology) TopologyJSON {
	key := func(name string) string { tp, _ := t.Topic(name); return tp.Key }
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	out := TopologyJSON{Name: t.Name, Describe: t.Describe(), Mermaid: t.Mermaid(),
		Topics: []TopicJSON{}, Processors: []ProcessorJSON{}, Boundaries: []BoundaryJSON{}}
	for _, tp := range t.Topics {
		out.Topics = append(out.Topics, TopicJSON{Name: tp.Name, Key: tp.Key, Value: tp.Value, Partitions: tp.Partitions,
			Cleanup: string(tp.Cleanup), Salting: tp.Salting, Doc: tp.Doc})
	}
	for _, p := range t.Processors {
		pj := ProcessorJSON{Group: p.Group, Streams: nonNil(p.Streams), Broadcast: nonNil(p.Broadcast), Emits: nonNil(p.Emits),
			Loop: p.Loop, Table: p.Table, Doc: p.Doc, Flows: []FlowJSON{}}
		for _, f := range p.EffectiveFlows(t) {
			_, b := t.Boundary(p.Group, f.From, f.To)
			pj.Flows = append(pj.Flows, FlowJSON{From: f.From, To: f.To, FromKey: key(f.From), ToKey: key(f.To), Boundary: b})
		}
		out.Processors = append(out.Processors, pj)
	}
	for _, b := range t.Boundaries {
		out.Boundaries = append(out.Boundaries, BoundaryJSON{Processor: b.Processor, From: b.From, To: b.To,
			FromKey: key(b.From), ToKey: key(b.To), Preserved: b.Preserved, Lost: b.Lost, Lag: b.Lag})
	}
	return out
}

func (s *Server) handleTopology(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, DescribeTopology(s.cfg.topo))
}
