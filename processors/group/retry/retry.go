package retry

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is an exponential, capped, jittered wait for retry loops: each
// Next waits between half and all of the current step, which doubles from
// First up to Max; Reset starts over after a success. The jitter keeps many
// clients that failed together from retrying together. The zero value waits
// 100 ms doubling to 5 s. Not safe for concurrent use.
type Backoff struct {
	First, Max time.Duration
	step       time.Duration
}

// Next is the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	first, most := b.First, b.Max
	if first <= 0 {
		first = 100 * time.Millisecond
	}
	if most < first {
		most = max(first, 5*time.Second)
	}
	if b.step == 0 {
		b.step = first
	} else {
		b.step = min(2*b.step, most)
	}
	half := b.step / 2
	return half + rand.N(b.step-half+1)
}

// Reset makes the next wait the first again.
func (b *Backoff) Reset() { b.step = 0 }

// LogLimit lets a repeated log line through at most once per Every (default
// 10 s), counting the ones it held back, so a loop that fails on every
// iteration cannot flood the log. Safe for concurrent use.
type LogLimit struct {
	Every time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int
}

// Allow reports whether to log now, and how many were held back since the
// last line that was let through.
func (l *LogLimit) Allow(now time.Time) (ok bool, skipped int) {
	every := l.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.skipped++
		return false, 0
	}
	skipped, l.skipped, l.last = l.skipped, 0, now
	return true, skipped
}
