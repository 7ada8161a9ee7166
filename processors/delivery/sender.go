package delivery

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencestream/fencestream/codecs/geofencepb"
	"github.com/fencestream/fencestream/processors/delivery/deliverypb"
)

// Headers of a delivery request.
const (
	HeaderSignature      = "Fencestream-Signature"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderSubscription   = "Fencestream-Subscription"
)

// Payload is the JSON body posted for a trigger. Every field comes from the
// trigger (event time), so every attempt of a trigger posts the same bytes.
type Payload struct {
	SubscriptionID   string  `json:"subscription_id"`
	TriggerID        string  `json:"trigger_id"`
	DeviceID         string  `json:"device_id"`
	FenceID          string  `json:"fence_id"`
	Type             string  `json:"type"`
	Reason           string  `json:"reason"`
	EventTime        string  `json:"event_time"`
	EventTimeMs      int64   `json:"event_time_ms"`
	HLC              uint64  `json:"hlc"`
	CatalogueVersion uint64  `json:"catalogue_version"`
	Lat              float64 `json:"lat"`
	Lon              float64 `json:"lon"`
	// The fence's name and tags at catalogue_version, and the device's
	// groups from its ping: what the subscription's filters matched on.
	FenceName    string   `json:"fence_name,omitempty"`
	FenceTags    []string `json:"fence_tags,omitempty"`
	DeviceGroups []string `json:"device_groups,omitempty"`
}

// Body is the JSON a subscription receives for a trigger.
func Body(subID string, tr *geofencepb.Trigger) ([]byte, error) {
	return json.Marshal(Payload{
		SubscriptionID: subID, TriggerID: tr.GetTriggerId(), DeviceID: tr.GetDeviceId(), FenceID: tr.GetFenceId(),
		Type:      strings.TrimPrefix(tr.GetType().String(), "TRIGGER_TYPE_"),
		Reason:    strings.TrimPrefix(tr.GetReason().String(), "TRIGGER_REASON_"),
		EventTime: time.UnixMilli(tr.GetEventTimeMs()).UTC().Format(time.RFC3339Nano), EventTimeMs: tr.GetEventTimeMs(),
		HLC: tr.GetHlc(), CatalogueVersion: tr.GetCatalogueVersion(), Lat: tr.GetLat(), Lon: tr.GetLon(),
		FenceName: tr.GetFenceName(), FenceTags: tr.GetFenceTags(), DeviceGroups: tr.GetDeviceGroups(),
	})
}

// Sign is the Fencestream-Signature header of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<unix seconds>.<body>" keyed by
// the secret>". The timestamp is the sending time (wall clock): it lets a
// receiver refuse an old request replayed by someone else.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// ErrBadSignature is Verify's answer to a header that does not sign the body.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks a Fencestream-Signature header against body and secret, and
// that its timestamp is within tolerance of now (0: any age). It is what a
// receiver written in Go runs.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrBadSignature, ts)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, ts, body)) {
		return ErrBadSignature
	}
	if age := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (age > tolerance || age < -tolerance) {
		return fmt.Errorf("%w: timestamp %s is %s from now", ErrBadSignature, ts, age)
	}
	return nil
}

// result is one attempt's outcome.
type result struct {
	// skipped: no request was sent (breaker open, endpoint at its
	// concurrency cap); retry at notBefore, the attempt not counted.
	skipped   bool
	notBefore time.Time
	ok        bool
	gone      bool // 410 Gone: the subscription is disabled
	status    int
	err       string
	// retryAfter is the endpoint's Retry-After, 0 if none.
	retryAfter time.Duration
	took       time.Duration
}

// sender posts triggers: one HTTP client, a breaker and a concurrency cap per
// endpoint (scheme://host:port), shared by every partition of the process.
type sender struct {
	cfg    *config
	client *http.Client
	mu     sync.Mutex
	eps    map[string]*endpoint
	m      *metrics
}

func newSender(cfg *config, m *metrics) *sender {
	client := cfg.client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: cfg.endpointConcurrency,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: cfg.attemptTimeout,
		}}
	}
	// No redirects: a redirect would carry the signed body somewhere else.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &sender{cfg: cfg, client: &c, eps: map[string]*endpoint{}, m: m}
}

// slow reports whether sub's endpoint answered its last attempt slower than
// the attempt wait.
func (s *sender) slow(sub *deliverypb.Subscription) bool {
	return s.endpoint(endpointOf(sub.GetUrl())).slow.Load()
}

// endpointOf is the breaker's key of a URL: its origin.
func endpointOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Scheme + "://" + u.Host
}

func (s *sender) endpoint(name string) *endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	ep := s.eps[name]
	if ep == nil {
		ep = &endpoint{name: name, slots: make(chan struct{}, s.cfg.endpointConcurrency)}
		s.eps[name] = ep
	}
	return ep
}

// attempt posts tr to sub unless the endpoint's breaker is open or its
// concurrency cap is reached (then it is skipped, not waited for).
func (s *sender) attempt(ctx context.Context, sub *deliverypb.Subscription, tr *geofencepb.Trigger) result {
	now := s.cfg.now()
	ep := s.endpoint(endpointOf(sub.GetUrl()))
	if ok, until := ep.allow(now); !ok {
		s.m.skipped.WithLabelValues("breaker-open").Inc()
		return result{skipped: true, notBefore: until}
	}
	select {
	case ep.slots <- struct{}{}:
	default:
		ep.release() // a half-open probe that was not sent
		s.m.skipped.WithLabelValues("concurrency").Inc()
		return result{skipped: true, notBefore: now.Add(s.cfg.capDelay + rand.N(s.cfg.capDelay))}
	}
	defer func() { <-ep.slots }()
	r := s.post(ctx, sub, tr)
	if ctx.Err() != nil && !r.ok && !r.gone {
		// The processor is stopping (or losing the partition): not the
		// endpoint's failure, and not an attempt.
		ep.release()
		return result{skipped: true, notBefore: now}
	}
	ep.slow.Store(r.took > s.cfg.attemptWait)
	failed := !r.ok && !r.gone && (r.status == 0 || r.status == http.StatusTooManyRequests || r.status >= 500)
	if ep.record(failed, s.cfg.now(), s.cfg.breakerFailures, s.cfg.breakerCooldown) {
		s.m.breakerOpens.WithLabelValues(ep.name).Inc()
	}
	s.m.breakerOpen.WithLabelValues(ep.name).Set(ep.openGauge())
	return r
}

func (s *sender) post(ctx context.Context, sub *deliverypb.Subscription, tr *geofencepb.Trigger) result {
	body, err := Body(sub.GetId(), tr)
	if err != nil {
		return result{err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.GetUrl(), bytes.NewReader(body))
	if err != nil {
		return result{err: err.Error()}
	}
	start := s.cfg.now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "fencestream-delivery")
	req.Header.Set(HeaderIdempotencyKey, tr.GetTriggerId())
	req.Header.Set(HeaderSubscription, sub.GetId())
	req.Header.Set(HeaderSignature, Sign(sub.GetSecret(), start, body))
	resp, err := s.client.Do(req)
	took := time.Since(start)
	s.m.latency.Observe(took.Seconds())
	if err != nil {
		msg := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer within %s", s.cfg.attemptTimeout)
		}
		return result{err: msg, took: took}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drained for connection reuse only
	r := result{status: resp.StatusCode, took: took}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		r.ok = true
	case resp.StatusCode == http.StatusGone:
		r.gone, r.err = true, "410 Gone"
	default:
		r.err = resp.Status
		r.retryAfter = retryAfter(resp.Header.Get("Retry-After"), s.cfg.now())
	}
	return r
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// maxRetryAfter bounds what an endpoint may ask for: the dead-letter age
// bound decides beyond it anyway.
const maxRetryAfter = 24 * time.Hour

// backoff is the delay before attempt n+1 after n failed attempts:
// exponential from base, capped, with jitter (a uniform half of it), at
// least the endpoint's Retry-After.
func backoff(n uint32, base, ceiling, retryAfter time.Duration) time.Duration {
	d := base
	for i := uint32(1); i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}

// endpoint is one origin's breaker and concurrency cap. Closed: requests
// flow and consecutive failures are counted; at the threshold it opens for
// the cooldown, during which nothing is sent (retries are scheduled for
// its end); then one probe is let through (half-open): its success closes
// it, its failure opens it again.
type endpoint struct {
	name  string
	slots chan struct{}
	// slow: its last answer took longer than the attempt wait, so a
	// handler does not wait for its next one.
	slow atomic.Bool

	mu       sync.Mutex
	failures int
	until    time.Time // open until
	probing  bool
}

func (e *endpoint) allow(now time.Time) (bool, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.until.IsZero() {
		return true, time.Time{}
	}
	if now.Before(e.until) || e.probing {
		return false, maxTime(e.until, now.Add(time.Second))
	}
	e.probing = true
	return true, time.Time{}
}

// release ends a probe that was not sent.
func (e *endpoint) release() {
	e.mu.Lock()
	e.probing = false
	e.mu.Unlock()
}

// record counts an answer; it reports whether the breaker opened.
func (e *endpoint) record(failed bool, now time.Time, threshold int, cooldown time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	wasProbe := e.probing
	e.probing = false
	if !failed {
		e.failures, e.until = 0, time.Time{}
		return false
	}
	e.failures++
	if wasProbe || e.failures >= threshold {
		e.until = now.Add(cooldown)
		return true
	}
	return false
}

func (e *endpoint) openGauge() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.until.IsZero() {
		return 0
	}
	return 1
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
