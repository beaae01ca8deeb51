package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrLocked is wrapped by Open's error when another process holds the SQLite database.
var ErrLocked = errors.New("store: the database is in use by another process")

// processLock is the one-process lock of a SQLite database: an exclusive flock on
// "<path>.lock", held for as long as the store is open. SQLite's own locks do not keep a
// second process out in WAL mode (two processes may both read and write; reference:
// fencing.md §7), and a second Baton on the same file would take over the first one's live
// runs. The kernel drops the lock when the process dies, so a crash never leaves it
// behind. The file holds the holder's pid, for the message of the process refused. Not for
// NFS, where flock is not reliable.
type processLock struct {
	f *os.File
}

// lockDatabase takes the lock of the database at path, or fails with ErrLocked naming the
// file and the process that holds it.
func lockDatabase(path string) (*processLock, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("store: open the lock file %q: %w", name, err)
	}
	busy, err := flockExclusive(f)
	if busy {
		holder := "another process"
		if b, rerr := os.ReadFile(name); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s is held by %s (lock file %s); one Baton process per SQLite file: stop it, or give this one another database",
			ErrLocked, path, holder, name)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: lock %q: %w", name, err)
	}
	// The pid is written after the lock is held, so a refused process reads the holder's.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &processLock{f: f}, nil
}

// release drops the lock. The lock file stays: removing it would let a process that opened
// it just before lock a file that no longer has the name.
func (l *processLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
