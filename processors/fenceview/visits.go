package fenceview

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencestream/fencestream/processors/geofence"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/processors/visits"
	"github.com/fencestream/fencestream/processors/visits/visitspb"
	"github.com/fencestream/fencestream/topology/cluster"
)

// VisitSource answers the visit statistics of a fence (processors/visits):
// nil, nil for a fence without any.
type VisitSource interface {
	FenceVisits(id string) (*visitspb.FenceVisits, error)
}

// VisitsView is a VisitSource over a view of the visit-stats table.
type VisitsView struct {
	v *view.View[visitspb.FenceVisits, *visitspb.FenceVisits]
	// t is set on a sharded replica: v's partitions here, the others at peers.
	t table[visitspb.FenceVisits, *visitspb.FenceVisits]
}

func (v *VisitsView) shard(r *router) {
	v.t = shardedTable[visitspb.FenceVisits, *visitspb.FenceVisits]{v.v, r}
}

// NewVisitsView builds the view; opts as for view.New (default: in
// memory, rebuilt at every start).
func NewVisitsView(cl cluster.Config, opts ...view.Opt) (*VisitsView, error) {
	v, err := view.New[visitspb.FenceVisits](cl, geofence.TopicVisitStatsTable, opts...)
	if err != nil {
		return nil, err
	}
	return &VisitsView{v: v}, nil
}

// Run keeps the view up to date until ctx ends.
func (v *VisitsView) Run(ctx context.Context) error { return v.v.Run(ctx) }

// Ready implements Readiness.
func (v *VisitsView) Ready() (bool, string) {
	if v.v.Recovered() {
		return true, ""
	}
	return false, "view of " + geofence.TopicVisitStatsTable + " is recovering"
}

// FenceVisits implements VisitSource.
func (v *VisitsView) FenceVisits(id string) (*visitspb.FenceVisits, error) {
	var st *visitspb.FenceVisits
	var err error
	if v.t != nil {
		st, err = v.t.Get(id)
	} else {
		st, err = v.v.Get(id)
	}
	if errors.Is(err, view.ErrNotRecovered) {
		return nil, fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	return st, err
}

type visitJSON struct {
	VisitID    string    `json:"visit_id"`
	DeviceID   string    `json:"device_id"`
	Entered    time.Time `json:"entered"`
	Left       time.Time `json:"left"`
	DurationS  float64   `json:"duration_s"`
	ExitReason string    `json:"exit_reason"`
}

type fenceVisitsJSON struct {
	FenceID string        `json:"fence_id"`
	Hours   []visits.Hour `json:"hours"`
	Recent  []visitJSON   `json:"recent"`
	// Records that came after their hour had closed (dropped).
	LateEnters int64 `json:"late_enters"`
	LateVisits int64 `json:"late_visits"`
}

// handleFenceVisits serves GET /v1/fences/{id}/visits: the fence's hourly
// ENTER counts and mean dwell for the last 24 hours of stream time, and its
// latest completed visits.
func (s *Server) handleFenceVisits(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(w, "fence id", id) {
		return
	}
	if s.src.Visits == nil {
		writeError(w, http.StatusNotFound, "visits are not served by this instance")
		return
	}
	st, err := s.src.Visits.FenceVisits(id)
	if err != nil {
		s.sourceError(w, r, err)
		return
	}
	if _, inCat := s.src.Fences.Snapshot().Get(id); !inCat && st == nil {
		writeError(w, http.StatusNotFound, "no fence "+id)
		return
	}
	out := fenceVisitsJSON{FenceID: id, Hours: []visits.Hour{}, Recent: []visitJSON{}}
	if st != nil {
		hours, err := visits.Hours(st)
		if err != nil {
			s.sourceError(w, r, err)
			return
		}
		out.Hours = append(out.Hours, hours...)
		out.LateEnters, out.LateVisits = st.GetEnters().GetLate(), st.GetDwell().GetLate()
		for i := len(st.GetRecent()) - 1; i >= 0; i-- { // newest first
			v := st.GetRecent()[i]
			out.Recent = append(out.Recent, visitJSON{VisitID: v.GetVisitId(), DeviceID: v.GetDeviceId(),
				Entered: time.UnixMilli(v.GetEnteredMs()).UTC(), Left: time.UnixMilli(v.GetLeftMs()).UTC(),
				DurationS: float64(v.GetDurationMs()) / 1000, ExitReason: v.GetExitReason().String()})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
