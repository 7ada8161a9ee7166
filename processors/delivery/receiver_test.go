package delivery_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fencestream/fencestream/processors/delivery"
)

// receiver is a webhook endpoint on 127.0.0.1 that records what it is sent
// and answers as answer says (nil: 200).
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	secret string

	mu     sync.Mutex
	calls  int
	got    []delivery.Payload // accepted (2xx) deliveries, in arrival order
	bad    []string           // signature or header problems
	answer func(call int, w http.ResponseWriter) bool
	// tolerance is the signature's allowed age (0: any: the tester's
	// clock is not the receiver's).
	tolerance time.Duration
	arrived   []time.Time
}

func newReceiver(t testing.TB, secret string, answer func(call int, w http.ResponseWriter) bool) *receiver {
	r := &receiver{t: t, secret: secret, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.calls++
	call := r.calls
	answer := r.answer
	r.mu.Unlock()
	if answer != nil && !answer(call, w) {
		return // answered with an error (or not at all)
	}
	var p delivery.Payload
	problem := ""
	if err := delivery.Verify(r.secret, req.Header.Get(delivery.HeaderSignature), body, time.Now(), r.tolerance); err != nil {
		problem = "signature: " + err.Error()
	} else if err := json.Unmarshal(body, &p); err != nil {
		problem = "body: " + err.Error()
	} else if k := req.Header.Get(delivery.HeaderIdempotencyKey); k != p.TriggerID {
		problem = "idempotency key " + k + " for trigger " + p.TriggerID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if problem != "" {
		r.bad = append(r.bad, problem)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, p)
	r.arrived = append(r.arrived, time.Now())
	w.WriteHeader(http.StatusNoContent)
}

// ids is the trigger ids accepted, in arrival order.
func (r *receiver) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.got))
	for i, p := range r.got {
		out[i] = p.TriggerID
	}
	return out
}

func (r *receiver) problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

func (r *receiver) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}
