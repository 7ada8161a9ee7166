package fenceview

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/fencestream/fencestream/codecs/geofencepb"
)

// DefaultHistory is how many recent triggers a Feed keeps: what
// GET /v1/triggers answers from, so a page opened now shows what happened
// before it connected. The trigger consumer fills it from the end of the
// triggers topic at start-up.
const DefaultHistory = 500

// history keeps the most recent triggers by event time, bounded.
type history struct {
	mu    sync.Mutex
	limit int
	seq   uint64
	items []historyItem // ascending by (event time, seq)
}

type historyItem struct {
	t   *geofencepb.Trigger
	seq uint64
}

func (h *history) less(a, b historyItem) int {
	if c := cmp.Compare(a.t.GetEventTimeMs(), b.t.GetEventTimeMs()); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func (h *history) add(t *geofencepb.Trigger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	it := historyItem{t: t, seq: h.seq}
	if len(h.items) >= h.limit && h.less(it, h.items[0]) < 0 {
		return // older than everything kept
	}
	i, _ := slices.BinarySearchFunc(h.items, it, h.less)
	h.items = slices.Insert(h.items, i, it)
	if over := len(h.items) - h.limit; over > 0 {
		h.items = slices.Delete(h.items, 0, over)
	}
}

// recent returns up to limit triggers matching f, newest first, each trigger
// id once (a re-emitted trigger is the same trigger).
func (h *history) recent(f Filter, limit int) []*geofencepb.Trigger {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []*geofencepb.Trigger{}
	seen := map[string]bool{}
	for i := len(h.items) - 1; i >= 0 && len(out) < limit; i-- {
		t := h.items[i].t
		if !f.Match(t) || seen[t.GetTriggerId()] {
			continue
		}
		seen[t.GetTriggerId()] = true
		out = append(out, t)
	}
	return out
}

// Remember adds t to the feed's history without publishing it to
// subscribers: a trigger from before the live feed started.
func (f *Feed) Remember(t *geofencepb.Trigger) {
	if t != nil {
		f.hist.add(t)
	}
}

// Recent returns up to limit of the triggers the feed remembers (at most
// DefaultHistory) that match filter, newest event time first.
func (f *Feed) Recent(filter Filter, limit int) []*geofencepb.Trigger {
	return f.hist.recent(filter, limit)
}

// TriggerList is the body of GET /v1/triggers.
type TriggerList struct {
	// Triggers are the most recent first, by event time.
	Triggers []TriggerJSON `json:"triggers"`
	Limit    int           `json:"limit"`
	// History is how many triggers of all fences and devices the server
	// keeps; a filtered answer may hold fewer than Limit.
	History int `json:"history"`
}

// DefaultTriggerLimit is the page size of GET /v1/triggers.
const DefaultTriggerLimit = 50

// handleTriggers serves GET /v1/triggers?limit=&fence=&device=: the recent
// triggers this server remembers, read back from the triggers topic at
// start-up and kept up to date by the live feed.
func (s *Server) handleTriggers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultTriggerLimit
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > DefaultHistory {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want an integer from 1 to %d", v, DefaultHistory))
			return
		}
		limit = n
	}
	filter, ok := s.streamFilter(w, r)
	if !ok {
		return
	}
	list := TriggerList{Triggers: []TriggerJSON{}, Limit: limit, History: DefaultHistory}
	for _, t := range s.src.Feed.Recent(filter, limit) {
		list.Triggers = append(list.Triggers, TriggerToJSON(t))
	}
	writeJSON(w, http.StatusOK, list)
}
