package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener caps the connections the server holds; see the package doc.
type limitListener struct {
	net.Listener
	max int
	now func() time.Time

	mu    sync.Mutex
	conns map[*heldConn]connState

	// rejecting bounds the goroutines answering 503 at once; Accept waits
	// for one to finish rather than close a connection unanswered, so the
	// cost is this many goroutines plus the listen backlog.
	rejecting chan struct{}
	body      []byte
}

type connState struct {
	busy    bool      // a request is being read or answered
	started bool      // it has had a request: an idle keep-alive when not busy
	since   time.Time // when it last became idle (or was accepted)
}

// heldConn is a connection the server holds. One evicted before it had a
// request is answered 503 by the listener: from then on the server neither
// reads a request from it nor writes to it nor closes it under the answer.
type heldConn struct {
	net.Conn
	evicted atomic.Bool
}

func (c *heldConn) Read(b []byte) (int, error) {
	if c.evicted.Load() {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(b)
	if c.evicted.Load() { // evicted while reading: the request is not served
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *heldConn) Write(b []byte) (int, error) {
	if c.evicted.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *heldConn) Close() error {
	if c.evicted.Load() {
		return nil // the 503 answer closes it
	}
	return c.Conn.Close()
}

// The deadlines are the 503 answer's once it is evicted.
func (c *heldConn) SetDeadline(t time.Time) error {
	if c.evicted.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *heldConn) SetReadDeadline(t time.Time) error {
	if c.evicted.Load() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *heldConn) SetWriteDeadline(t time.Time) error {
	if c.evicted.Load() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// CloseWrite keeps the server's graceful close of TCP connections.
func (c *heldConn) CloseWrite() error {
	if c.evicted.Load() {
		return nil
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func newLimitListener(l net.Listener, max int, now func() time.Time) *limitListener {
	return &limitListener{
		Listener:  l,
		max:       max,
		now:       now,
		conns:     make(map[*heldConn]connState, max),
		rejecting: make(chan struct{}, 64),
		body:      rejection(max),
	}
}

func rejection(max int) []byte {
	msg := fmt.Sprintf(`{"error":"too many connections: all %d are busy with requests; retry shortly","status":503}`+"\n", max)
	return []byte(fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg))
}

// Accept returns the next connection within the cap. Above it, it makes room
// by closing the longest-idle keep-alive or, failing that, by answering 503
// to the longest-waiting connection that has not sent a request yet (it may
// be on its way: a client is never left without an answer); when every
// connection is busy with a request, the newcomer is answered 503.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &heldConn{Conn: raw}
		l.mu.Lock()
		var victim *heldConn
		var answer bool // the victim gets a 503; an idle keep-alive is just closed
		if len(l.conns) >= l.max {
			victim = l.oldestIdle()
			if victim == nil {
				l.mu.Unlock()
				l.reject(raw)
				continue
			}
			answer = !l.conns[victim].started
			if answer {
				victim.evicted.Store(true) // before the server can start a request on it
			}
			delete(l.conns, victim)
		}
		l.conns[c] = connState{since: l.now()}
		l.mu.Unlock()
		switch {
		case victim == nil:
		case answer:
			l.reject(victim.Conn)
		default:
			_ = victim.Close() // the server sees the read fail and forgets it
		}
		return c, nil
	}
}

// oldestIdle is the connection to close for a newcomer: the longest-idle
// keep-alive, else the longest-waiting one that has had no request; nil when
// every one is busy.
func (l *limitListener) oldestIdle() *heldConn {
	var (
		victim *heldConn
		best   connState
	)
	for c, s := range l.conns {
		if s.busy {
			continue
		}
		if victim == nil || (s.started && !best.started) || (s.started == best.started && s.since.Before(best.since)) {
			victim, best = c, s
		}
	}
	return victim
}

// connState is the http.Server's ConnState hook.
func (l *limitListener) connState(c net.Conn, s http.ConnState) {
	hc, ok := c.(*heldConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.conns[hc]
	if !ok {
		return // evicted, or rejected before the server saw it
	}
	switch s {
	case http.StateActive:
		cur.busy, cur.started = true, true
	case http.StateIdle:
		cur.busy, cur.since = false, l.now()
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, hc)
		return
	default:
		return
	}
	l.conns[hc] = cur
}

// open is the number of connections held.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// reject answers 503 on c and closes it: the answer is written, the write
// side shut, and whatever the client sent drained for at most a second so the
// close does not reset the connection before the client reads the answer.
// With every answering goroutine busy it waits for one (at most that second):
// connections queue in the listen backlog rather than be closed unanswered.
func (l *limitListener) reject(c net.Conn) {
	l.rejecting <- struct{}{}
	go func() {
		defer func() { <-l.rejecting }()
		defer c.Close()
		_ = c.SetDeadline(l.now().Add(time.Second))
		if _, err := c.Write(l.body); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}
