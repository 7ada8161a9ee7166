package statestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrDamaged is wrapped by a store's errors when its files cannot be read
// (corruption, a missing file, a version it does not know). The table is a
// cache of its changelog: it is moved aside at the next open and rebuilt.
var ErrDamaged = errors.New("local state is damaged")

// ErrUnwritable is wrapped when a table's directory cannot be written (read
// only, full, permissions). Retrying cannot fix that: the process must stop.
var ErrUnwritable = errors.New("state directory cannot be written")

// damagedMarker is written next to a table found damaged while open, so the
// next open moves it aside even if this process dies first.
const damagedMarker = ".damaged"

// OnDamaged is called after a damaged table at path was moved to movedTo,
// with what was wrong (default: nothing; the engine's logger gets a line
// either way). Use it for a metric.
func OnDamaged(f func(path, movedTo string, cause error)) Opt {
	return func(c *config) { c.onDamaged = f }
}

// OnUnwritable is called once per table when its directory is found
// unwritable (default: nothing). A process should stop: readiness is false
// from this call on, and every later write of the table fails.
func OnUnwritable(f func(err error)) Opt { return func(c *config) { c.onUnwritable = f } }

// unwritable reports whether err says the disk refuses writes (as opposed to
// unreadable content).
func unwritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EACCES)
}

func unwritableErr(path string, err error) error {
	return fmt.Errorf("%w: %s: %v; make it writable (permissions, free space, a read-write mount) and restart; the state is rebuilt from the changelog if it was lost", ErrUnwritable, path, err)
}

// openTable opens the table at path with open, moving the table aside first
// when it was marked damaged, or when open fails for any reason but an
// unwritable disk, and then opening it fresh (empty: Goka recovers it from
// the changelog).
func openTable[T any](path string, cfg config, open func() (T, error)) (T, error) {
	var zero T
	if _, err := os.Stat(path + damagedMarker); err == nil {
		if err := moveAside(path, cfg, errors.New("marked damaged by the last process")); err != nil {
			return zero, err
		}
	}
	db, err := open()
	if err == nil {
		return db, nil
	}
	if unwritable(err) {
		return zero, unwritableErr(path, err)
	}
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
		return zero, fmt.Errorf("table %s is open elsewhere: %w", path, err) // a lock, not damage
	}
	if err := moveAside(path, cfg, err); err != nil {
		return zero, err
	}
	db, err = open()
	if err != nil {
		if unwritable(err) {
			return zero, unwritableErr(path, err)
		}
		return zero, fmt.Errorf("opening a fresh table at %s after moving the damaged one aside: %w", path, err)
	}
	return db, nil
}

// moveAside renames the table at path to path.damaged-<time> (kept for
// inspection) and removes the damage marker.
func moveAside(path string, cfg config, cause error) error {
	to := fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405.000000000"))
	if err := os.Rename(path, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if unwritable(err) {
			return unwritableErr(filepath.Dir(path), err)
		}
		return fmt.Errorf("moving damaged table %s aside: %w", path, err)
	}
	if err := os.Remove(path + damagedMarker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unwritableErr(filepath.Dir(path), err)
	}
	cfg.log.Error("local state damaged: moved aside, rebuilding from the changelog", "table", path, "moved_to", to, "cause", cause)
	if cfg.onDamaged != nil {
		cfg.onDamaged(path, to, cause)
	}
	return nil
}

// health is a table's sticky damage and write-failure state.
type health struct {
	path         string
	cfg          config
	watch        *dirWatch // nil: the table's directory is not watched
	damaged      atomic.Pointer[error]
	broken       atomic.Pointer[error] // unwritable
	reportBroken sync.Once
	sinceProbe   atomic.Int64 // bytes written since the last probe
	counted      bool         // the engine reports its logs and flushes (Pebble): unflushed is kept
	unflushed    atomic.Int64 // bytes written since the table's current log began (with overhead)
	flushing     atomic.Int64 // bytes of the logs being flushed
	lastWrite    atomic.Int64 // the watch's clock at the last write (unix ns)
	idleFlushed  atomic.Int64 // lastWrite when the watch last flushed the table
	flushIdle    atomic.Pointer[func()]
}

// probeEvery is how many bytes of writes may go by between two checks, in the
// write path, that the table's directory is still writable (access(2): a
// read-only mount, an immutable directory, lost permissions). The builder's
// watch checks the same, and free space, every watchEvery whatever is
// written.
const probeEvery = 32 << 10

// markDamaged records that the table cannot be read and leaves a marker, so
// the next open (in this process after a restart, or the next one) moves it
// aside. It returns the error for the caller.
func (h *health) markDamaged(cause error) error {
	err := fmt.Errorf("%w: %s: %v", ErrDamaged, h.path, cause)
	if h.damaged.CompareAndSwap(nil, &err) {
		h.cfg.log.Error("local state damaged; the table is moved aside and rebuilt at the next start", "table", h.path, "cause", cause)
		if werr := os.WriteFile(h.path+damagedMarker, []byte(cause.Error()+"\n"), 0o644); werr != nil {
			h.cfg.log.Error("could not mark the damaged table; the next open checks it again", "table", h.path, "err", werr)
		}
	}
	return *h.damaged.Load()
}

// markUnwritable records that the table's directory refuses writes.
func (h *health) markUnwritable(cause error) error { return h.setUnwritable(cause, true) }

// setUnwritable is markUnwritable, logging the cause only if logCause (the
// directory's watch logs once for all its tables).
func (h *health) setUnwritable(cause error, logCause bool) error {
	mine := unwritableErr(h.path, cause)
	h.broken.CompareAndSwap(nil, &mine)
	// The first error stays; mine is not written again once its address
	// may be shared (readers load it through h.broken without a lock).
	err := *h.broken.Load()
	h.reportBroken.Do(func() {
		if logCause {
			h.cfg.log.Error("state directory cannot be written; stopping", "table", h.path, "err", cause)
		}
		if h.cfg.onUnwritable != nil {
			h.cfg.onUnwritable(err)
		}
	})
	return err
}

// failed is the sticky error of the table (nil: healthy).
func (h *health) failed() error {
	if e := h.broken.Load(); e != nil {
		return *e
	}
	if e := h.damaged.Load(); e != nil {
		return *e
	}
	return nil
}

// beforeWrite refuses a write once the table failed or its directory's
// watch did, and checks the directory after every probeEvery bytes.
func (h *health) beforeWrite(n int) error {
	if err := h.failed(); err != nil {
		return err
	}
	if h.watch != nil {
		if e := h.watch.failed.Load(); e != nil {
			return h.setUnwritable(*e, false)
		}
	}
	if h.counted {
		h.unflushed.Add(int64(n + entryOverhead))
	}
	if h.watch != nil {
		h.lastWrite.Store(h.watch.clock.Load())
	}
	if h.sinceProbe.Add(int64(n)) < probeEvery {
		return nil
	}
	h.sinceProbe.Store(0)
	if err := syscall.Access(h.path, 0x2 /* W_OK */); err != nil {
		return h.markUnwritable(&fs.PathError{Op: "access", Path: h.path, Err: err})
	}
	return nil
}
