// Package dirlock gives one process at a time a directory: Lock takes an
// exclusive, non-blocking flock(2) on a lock file inside it before anything in
// it is read or written, and a second holder is refused at once with an error
// naming the directory and the holder's pid.
//
// The lock belongs to an open file description, so it ends when the holder
// closes it or dies (kill -9 included): there is no stale lock to clean up.
// The pid written into the lock file is informational only; the flock is the
// lock. Two Locks of one directory in one process also conflict.
package dirlock
