package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file Lock creates in the directory it locks.
const FileName = ".fencestream.lock"

// ErrLocked is wrapped by Lock when another holder has the directory.
var ErrLocked = errors.New("directory is in use by another process")

// Lock is a held directory lock.
type Lock struct {
	f   *os.File
	dir string
}

// Acquire creates dir if needed and locks it (non-blocking). When it is held
// already, the error wraps ErrLocked and names dir and the holder's pid.
func Acquire(dir string) (*Lock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("locking %s: %w", abs, err)
	}
	path := filepath.Join(abs, FileName)
	// O_RDWR without O_TRUNC: a refused second opener must not erase the
	// holder's pid.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", abs, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPID(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by pid %s (%s); stop that process or use another directory", ErrLocked, abs, holder, path)
		}
		return nil, fmt.Errorf("locking %s: %w", abs, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, dir: abs}, nil
}

func readPID(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if s := strings.TrimSpace(string(b[:n])); s != "" {
		return s
	}
	return "unknown"
}

// Dir is the locked directory (absolute).
func (l *Lock) Dir() string { return l.dir }

// Release unlocks the directory. The lock file stays (removing it would race
// a process that has it open and is about to lock it). Safe on nil and twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the description drops the flock
	l.f = nil
	return err
}
