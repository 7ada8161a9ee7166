package fenceview

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DefaultMaxStaleness is how old the views' data may be (not confirmed
// current with the brokers for this long) before fenceview stops being
// ready. Below it reads are answered with the age in X-Data-Age-Seconds.
const DefaultMaxStaleness = 30 * time.Second

// DataAgeHeader carries, on every answer, how old the data served is: the
// seconds since the views last confirmed with the brokers that they held
// every record of their tables (absent while unknown, before the first
// confirmation).
const DataAgeHeader = "X-Data-Age-Seconds"

// AgeSource reports how old the data a server reads is, and whether that is
// known yet.
type AgeSource interface {
	DataAge() (age time.Duration, known bool)
}

// DataAge implements AgeSource: the age of the older of the two views (now
// minus the last time the broker confirmed it current). A view that cannot
// reach the brokers keeps serving its copy; this is what says how old it is.
func (v *ViewSources) DataAge() (age time.Duration, known bool) {
	_ = v.guard(func() error { age, known = v.dataAge(); return nil })
	return age, known
}

// dataAge is DataAge for callers holding the guard.
func (v *ViewSources) dataAge() (time.Duration, bool) {
	var oldest time.Time
	for _, at := range []func() (time.Time, bool){v.Devices.UpToDate, v.Occupancy.UpToDate} {
		t, ok := at()
		if !ok {
			return 0, false
		}
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	return max(0, time.Since(oldest)), true
}

// staleness is the part of the views' readiness that bounds the data's age
// (called holding the guard).
func (v *ViewSources) staleness() (bool, string) {
	bound := v.MaxStaleness
	if bound <= 0 {
		bound = DefaultMaxStaleness
	}
	age, known := v.dataAge()
	if !known || age <= bound {
		return true, ""
	}
	return false, fmt.Sprintf("views' data is %s old, over the %s bound: the brokers have not confirmed it current since %s",
		age.Round(100*time.Millisecond), bound, time.Now().Add(-age).UTC().Format(time.RFC3339))
}

// setAge puts the data's age on an answer.
func (s *Server) setAge(w http.ResponseWriter) (age time.Duration, known bool) {
	if s.src.Age == nil {
		return 0, false
	}
	age, known = s.src.Age.DataAge()
	if known {
		w.Header().Set(DataAgeHeader, strconv.FormatFloat(age.Seconds(), 'f', 1, 64))
	}
	return age, known
}
