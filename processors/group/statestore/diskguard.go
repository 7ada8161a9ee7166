package statestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// Watch intervals: how often a builder's directory is checked for free space
// and write permission (statfs and access(2), a few µs), and how often a probe
// writes bytes to a file there and fsyncs them (which finds what the kernel's
// answers do not: a tmpfs with no page left, a quota, an I/O error).
const (
	watchEvery     = 100 * time.Millisecond
	fileProbeEvery = time.Second
)

// idleFlushAfter is how long a table that holds unflushed writes must go
// without one before the watch flushes it: an idle table then holds its data
// and an empty log, not the log of everything since its last flush (up to
// two memtables).
const idleFlushAfter = 30 * time.Second

// DefaultMinFreeSpace is the free space a builder's directory keeps beyond
// what its open tables' next flushes need (MinFreeSpace).
const DefaultMinFreeSpace = 4 << 20

// perTableHeadroom is what one open table may write between two checks
// besides its flush: the WAL block it writes next (32 KB) and a manifest
// edit.
const perTableHeadroom = 64 << 10

// entryOverhead is added to each written key and value when counting what a
// flush will write (sstable index and block trailers, an upper bound).
const entryOverhead = 32

// dirWatch watches the directory of one builder's tables while any is open:
// every watchEvery it checks that the file system has the free space the
// tables' next flushes need and that every table directory is writable, and
// every fileProbeEvery it writes and fsyncs a probe file. The first failure
// is sticky: every open table is marked unwritable (readiness false, the
// process stops), and so is every table opened later.
type dirWatch struct {
	dir      string
	cfg      config
	every    time.Duration // 0: watchEvery (tests shorten it)
	fileWait time.Duration // 0: fileProbeEvery
	idle     time.Duration // 0: idleFlushAfter
	clock    atomic.Int64  // unix ns, set at every tick: a write's coarse time

	mu       sync.Mutex
	tables   map[*health]struct{}
	stop     chan struct{} // closed when the last table is removed
	lastFile time.Time

	failed     atomic.Pointer[error]
	fileProbes atomic.Int64 // for tests
}

func newDirWatch(dir string, cfg config) *dirWatch {
	return &dirWatch{dir: dir, cfg: cfg, tables: map[*health]struct{}{}}
}

// add checks the directory (including a file probe) before a table at h.path
// is opened, with the space the table's log replay needs, and watches it
// from then on. An error wraps ErrUnwritable.
func (w *dirWatch) add(h *health) error {
	if e := w.failed.Load(); e != nil {
		return unwritableErr(w.dir, *e)
	}
	if err := os.MkdirAll(w.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return unwritableErr(w.dir, err)
	}
	if h.counted {
		h.unflushed.Store(logBytes(h.path)) // an open replays these and flushes them
	}
	w.clock.Store(time.Now().UnixNano())
	w.mu.Lock()
	defer w.mu.Unlock()
	tables := make([]*health, 0, len(w.tables)+1)
	for t := range w.tables {
		tables = append(tables, t)
	}
	if err := w.check(append(tables, h), true); err != nil {
		return unwritableErr(w.dir, err)
	}
	w.tables[h] = struct{}{}
	if len(w.tables) == 1 {
		w.stop = make(chan struct{})
		go w.loop(w.stop)
	}
	return nil
}

// remove stops watching h; the last table stops the watch (without waiting
// for it: a watch stuck in a wedged table's flush must not hold up Close).
func (w *dirWatch) remove(h *health) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.tables[h]; !ok {
		return
	}
	delete(w.tables, h)
	if len(w.tables) == 0 {
		close(w.stop)
	}
}

func (w *dirWatch) loop(stop chan struct{}) {
	every := w.every
	if every == 0 {
		every = watchEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		tables := make([]*health, 0, len(w.tables))
		for h := range w.tables {
			tables = append(tables, h)
		}
		err := w.check(tables, false)
		w.mu.Unlock()
		if err != nil {
			w.fail(err, tables)
			return
		}
		w.flushIdle(tables)
	}
}

// flushIdle flushes the tables that hold unflushed writes and had none for
// the idle time.
func (w *dirWatch) flushIdle(tables []*health) {
	now := time.Now().UnixNano()
	w.clock.Store(now)
	idle := w.idle
	if idle == 0 {
		idle = idleFlushAfter
	}
	for _, h := range tables {
		last := h.lastWrite.Load()
		if h.unflushed.Load()+h.flushing.Load() == 0 || now-last < int64(idle) || h.idleFlushed.Load() == last {
			continue
		}
		h.idleFlushed.Store(last) // once per idle spell
		if f := h.flushIdle.Load(); f != nil {
			(*f)()
		}
	}
}

// fail makes err sticky and marks every table.
func (w *dirWatch) fail(err error, tables []*health) {
	// mine is never written once its address is published: readers load it
	// through w.failed without a lock.
	mine := err
	if w.failed.CompareAndSwap(nil, &mine) {
		w.cfg.log.Error("state directory cannot be written; stopping", "dir", w.dir, "tables", len(tables), "err", err)
	}
	first := *w.failed.Load()
	for _, h := range tables {
		_ = h.setUnwritable(first, false)
	}
}

// need is the free space tables need: what their next flushes write (the
// bytes written since their last flush, with overhead), the WAL block and
// manifest edit each writes next, and the configured floor.
func (w *dirWatch) need(tables []*health) int64 {
	n := w.cfg.minFree
	for _, h := range tables {
		n += perTableHeadroom + h.unflushed.Load() + h.flushing.Load()
	}
	return n
}

// check runs the cheap checks, and the file probe when file is set or it is
// due. w.mu is held.
func (w *dirWatch) check(tables []*health, file bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(w.dir, &st); err != nil {
		return &fs.PathError{Op: "statfs", Path: w.dir, Err: err}
	}
	free := int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // field types differ by platform
	if need := w.need(tables); free < need {
		return fmt.Errorf("%s has %s free, less than the %s its %d open tables need for their next log writes and flushes (%s kept free); free space or give it a larger disk: %w",
			w.dir, mb(free), mb(need), len(tables), mb(w.cfg.minFree), syscall.ENOSPC)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return &fs.PathError{Op: "statfs", Path: w.dir, Err: syscall.EROFS}
	}
	for _, h := range tables {
		if err := unix.Access(h.path, unix.W_OK); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &fs.PathError{Op: "access", Path: h.path, Err: err}
		}
	}
	wait := w.fileWait
	if wait == 0 {
		wait = fileProbeEvery
	}
	if !file && time.Since(w.lastFile) < wait {
		return nil
	}
	w.lastFile = time.Now()
	return w.probeFile()
}

// probeName is the file the probe writes in a builder's directory.
const probeName = ".fencestream-probe"

// probeFile writes a block to a file in the directory, fsyncs and removes
// it: creating an empty file succeeds on a full tmpfs, writing does not.
func (w *dirWatch) probeFile() error {
	w.fileProbes.Add(1)
	p := filepath.Join(w.dir, probeName)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(probeBlock[:])
	err = errors.Join(err, f.Sync(), f.Close(), os.Remove(p))
	if err != nil {
		_ = os.Remove(p)
	}
	return err
}

var probeBlock [4096]byte

// logBytes is the size of the WAL files in a table's directory (0 when it
// has none).
func logBytes(dir string) int64 {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var n int64
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// guardFS is the file system one Pebble table writes through. Pebble panics
// with its database mutex released when its write-ahead log fails (closing
// the old log or creating the new one at a rotation): the deferred unlock
// then is a Go runtime fatal nothing can recover, and a panic recovered
// elsewhere leaves a mutex held that Close then waits on forever. So:
//   - WAL files are not preallocated (Pebble reserves 1.1 memtables per log:
//     4.4 MB of disk per idle table) and not recycled (removeCleaner);
//   - a write to a WAL that fails because the disk refuses it marks the table
//     unwritable (the process stops) and, from then on, the WAL's writes and
//     syncs are dropped instead of failing. The table's log on disk then ends
//     at the failure: a suffix of the writes is lost, never a middle, and a
//     torn tail that Pebble refuses at the next open makes the table damaged
//     (rebuilt from the changelog). Either way the stored offset never
//     covers a value the table lost.
//
// Other files' errors reach Pebble, which reports a failed flush or
// compaction as a background error.
type guardFS struct {
	vfs.FS
	h         *health
	walBroken atomic.Bool
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (g *guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(name, f, err)
}

func (g *guardFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(newname, f, err)
}

func (g *guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, opts...)
	return g.wrap(name, f, err)
}

func (g *guardFS) OpenDir(name string) (vfs.File, error) {
	f, err := g.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &guardFile{File: f, g: g}, nil
}

func (g *guardFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	wal := isWAL(name)
	if err != nil {
		if wal && unwritable(err) { // rotateWAL would panic
			g.breakWAL(err)
			return discardFile{}, nil
		}
		return nil, err
	}
	return &guardFile{File: f, g: g, wal: wal}, nil
}

// breakWAL marks the table unwritable and drops every later WAL write.
func (g *guardFS) breakWAL(err error) {
	g.walBroken.Store(true)
	_ = g.h.markUnwritable(err)
}

// failed reports whether err must be hidden from Pebble (a WAL the disk
// refuses), marking the table unwritable for any refusal.
func (f *guardFile) failed(err error) bool {
	if err == nil || !unwritable(err) {
		return false
	}
	if f.wal {
		f.g.breakWAL(err)
		return true
	}
	_ = f.g.h.markUnwritable(err)
	return false
}

type guardFile struct {
	vfs.File
	g   *guardFS
	wal bool
}

func (f *guardFile) dropped() bool { return f.wal && f.g.walBroken.Load() }

// Preallocate does nothing: see guardFS.
func (f *guardFile) Preallocate(offset, length int64) error { return nil }

func (f *guardFile) Write(p []byte) (int, error) {
	if f.dropped() {
		return len(p), nil
	}
	n, err := f.File.Write(p)
	if f.failed(err) {
		return len(p), nil
	}
	return n, err
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	if f.dropped() {
		return len(p), nil
	}
	n, err := f.File.WriteAt(p, off)
	if f.failed(err) {
		return len(p), nil
	}
	return n, err
}

func (f *guardFile) Sync() error {
	if f.dropped() {
		return nil
	}
	if err := f.File.Sync(); err != nil && !f.failed(err) {
		return err
	}
	return nil
}

func (f *guardFile) SyncData() error {
	if f.dropped() {
		return nil
	}
	if err := f.File.SyncData(); err != nil && !f.failed(err) {
		return err
	}
	return nil
}

func (f *guardFile) SyncTo(length int64) (bool, error) {
	if f.dropped() {
		return true, nil
	}
	full, err := f.File.SyncTo(length)
	if err != nil && f.failed(err) {
		return true, nil
	}
	return full, err
}

func (f *guardFile) Close() error {
	err := f.File.Close()
	if f.dropped() || f.failed(err) {
		return nil
	}
	return err
}

// discardFile stands in for a WAL the disk refused to create: its writes go
// nowhere (the table is already marked unwritable).
type discardFile struct{}

func (discardFile) Close() error             { return nil }
func (discardFile) Read([]byte) (int, error) { return 0, errors.New("statestore: discarded log") }
func (discardFile) ReadAt([]byte, int64) (int, error) {
	return 0, errors.New("statestore: discarded log")
}
func (discardFile) Write(p []byte) (int, error)            { return len(p), nil }
func (discardFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (discardFile) Preallocate(int64, int64) error         { return nil }
func (discardFile) Stat() (vfs.FileInfo, error)            { return nil, errors.New("statestore: discarded log") }
func (discardFile) Sync() error                            { return nil }
func (discardFile) SyncTo(int64) (bool, error)             { return true, nil }
func (discardFile) SyncData() error                        { return nil }
func (discardFile) Prefetch(int64, int64) error            { return nil }
func (discardFile) Fd() uintptr                            { return vfs.InvalidFd }

// removeCleaner is Pebble's default cleaner (it deletes obsolete files), with
// ArchiveCleaner embedded a level deeper only for the marker method that
// turns WAL recycling off (its Clean is shadowed): a recycled log keeps its
// full size on disk for reuse, up to three per table.
type removeCleaner struct {
	pebble.DeleteCleaner
	recycleOff
}

type recycleOff struct{ pebble.ArchiveCleaner }
