package grouptest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/fencestream/fencestream/codecs"
	"github.com/fencestream/fencestream/processors/group/host"
	"github.com/fencestream/fencestream/processors/group/view"
	"github.com/fencestream/fencestream/topology/cluster"
)

// Views and routes on a harness. Goka's tester has two traps for a view:
//
//   - A view built on the tester registers a consumer that every later
//     Consume waits for, without a deadline or a message, until its Run
//     starts: a view built but started late hangs the test.
//   - A view started after records were written to its table must recover
//     them, but the tester delivers records only inside a Consume or Catchup,
//     and then races the view's recovery (it sends on the consumer the view
//     closes once recovered). Such a view stays "recovering" (503).
//
// View and Route build and start a view in one call, so the first cannot
// happen; before starting it they check that the tester's copy of the table
// (the one store every processor and view of a tester shares) already holds
// every record written to the table, and if so mark it as read up to there,
// as Goka itself does from a table's second write on. The view then starts
// recovered. A table whose copy differs fails the test at once, naming it.

// View builds a view of table on the harness's tester, runs it until the test
// ends and returns it recovered. It may be called before or after records were
// consumed.
func View[M any, PM codecs.Message[M]](h *Harness, table string, opts ...view.Opt) *view.View[M, PM] {
	h.t.Helper()
	h.Catchup()
	h.markRead(table)
	v, err := view.New[M, PM](cluster.Config{}, table, append([]view.Opt{view.Tester(h.TT)}, opts...)...)
	if err != nil {
		h.t.Fatalf("grouptest: building the view of %s: %v", table, err)
	}
	RunView(h.t, v)
	return v
}

// Route builds r on the harness's tester (its views read the tables of the
// groups the harness runs), runs it until the test ends and returns its
// handler. Call it after Start of the groups whose tables the route reads.
func (h *Harness) Route(r host.Route) http.Handler {
	h.t.Helper()
	h.Catchup()
	h.mu.Lock()
	tables := append([]string(nil), h.tables...)
	h.mu.Unlock()
	for _, tb := range tables {
		h.markRead(tb)
	}
	hd, run, err := r.Build(host.RouteEnv{View: []view.Opt{view.Tester(h.TT)}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		h.t.Fatalf("grouptest: building route %s: %v", r.Pattern, err)
	}
	if run != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx) }()
		h.t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("grouptest: route %s: %v", r.Pattern, err)
				}
			case <-time.After(30 * time.Second):
				h.t.Errorf("grouptest: route %s did not stop within 30 s", r.Pattern)
			}
		})
	}
	// The tester waits for the route's views to start consuming, which they
	// do once recovered: the route answers from its first request.
	h.Catchup()
	return hd
}

// markRead marks the tester's copy of table as read up to the table's last
// record when the copy holds exactly what those records say, and fails the
// test when it does not (a view started now could never recover).
func (h *Harness) markRead(table string) {
	h.t.Helper()
	h.markReadIf(table, true)
}

// markReadIf is markRead; unless strict, a copy that differs is left as it
// is instead of failing the test.
func (h *Harness) markReadIf(table string, strict bool) {
	h.t.Helper()
	tr := h.TT.NewQueueTracker(table)
	hwm := tr.Hwm()
	if hwm == 0 {
		return // nothing to recover
	}
	st, err := h.TT.StorageBuilder()(table, 0)
	if err != nil {
		h.t.Fatalf("grouptest: the tester's copy of %s: %v", table, err)
	}
	const unset = math.MinInt64
	if off, err := st.GetOffset(unset); err == nil && off != unset && off >= hwm-1 {
		return // read up to the end already
	}
	latest := map[string][]byte{}
	tr.Seek(0)
	for {
		key, value, ok := tr.NextRaw()
		if !ok {
			break
		}
		latest[key] = value
	}
	for key, want := range latest {
		got, err := st.Get(key)
		if err != nil || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			if !strict {
				return
			}
			h.t.Fatalf("grouptest: a view of %s started after its table got %d records, and the tester's copy of the table "+
				"differs from them at key %q (records written to a table topic by hand, or by a group this harness does not run): "+
				"Goka's tester can recover such a view only inside a Consume, which races the recovery; "+
				"build the view (grouptest.View, Harness.Route) before the first Consume", table, hwm, key)
		}
	}
	if err := st.SetOffset(hwm - 1); err != nil {
		h.t.Fatalf("grouptest: the tester's copy of %s: %v", table, err)
	}
}
