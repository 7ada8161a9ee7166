package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// limitListener caps the connections the server holds; see the package doc.
type limitListener struct {
	net.Listener
	max int
	now func() time.Time

	mu    sync.Mutex
	conns map[net.Conn]connState

	// rejecting bounds the goroutines answering 503 at once; beyond it a
	// connection above the cap is closed without an answer.
	rejecting chan struct{}
	body      []byte
}

type connState struct {
	busy  bool      // a request is being read or answered
	since time.Time // when it last became idle (or was accepted)
}

func newLimitListener(l net.Listener, max int, now func() time.Time) *limitListener {
	return &limitListener{
		Listener:  l,
		max:       max,
		now:       now,
		conns:     make(map[net.Conn]connState, max),
		rejecting: make(chan struct{}, 64),
		body:      rejection(max),
	}
}

func rejection(max int) []byte {
	msg := fmt.Sprintf(`{"error":"too many connections: all %d are busy with requests; retry shortly","status":503}`+"\n", max)
	return []byte(fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg))
}

// Accept returns the next connection within the cap, closing the
// longest-idle one to make room, or answering 503 to connections that find
// every slot busy.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim net.Conn
		if len(l.conns) >= l.max {
			victim = l.oldestIdle()
			if victim == nil {
				l.mu.Unlock()
				l.reject(c)
				continue
			}
			delete(l.conns, victim)
		}
		l.conns[c] = connState{since: l.now()}
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Close() // the server sees the read fail and forgets it
		}
		return c, nil
	}
}

func (l *limitListener) oldestIdle() net.Conn {
	var (
		victim net.Conn
		oldest time.Time
	)
	for c, s := range l.conns {
		if !s.busy && (victim == nil || s.since.Before(oldest)) {
			victim, oldest = c, s.since
		}
	}
	return victim
}

// connState is the http.Server's ConnState hook.
func (l *limitListener) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok := l.conns[c]
	if !ok {
		return // evicted, or rejected before the server saw it
	}
	switch s {
	case http.StateActive:
		cur.busy = true
	case http.StateIdle:
		cur.busy, cur.since = false, l.now()
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, c)
		return
	default:
		return
	}
	l.conns[c] = cur
}

// open is the number of connections held.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// reject answers 503 on c and closes it, without blocking Accept: the answer
// is written, the write side shut, and whatever the client sent drained for
// at most a second so the close does not reset the connection before the
// client reads the answer.
func (l *limitListener) reject(c net.Conn) {
	select {
	case l.rejecting <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
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
