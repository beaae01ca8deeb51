package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// fileWatchEvery is how often a SQLite store checks, besides before every write, that its
// database file is still the one it opened: an idle store must still report the loss
// (readiness, the log) before anyone writes.
const fileWatchEvery = 5 * time.Second

// fileWatch keeps the database file open and compares it with what the path names now:
// SQLite in WAL mode goes on reading and writing a file that was deleted, or renamed over,
// without an error, so every write would be acknowledged and lost at the next start
// (reference: fencing.md §7). Once the file has moved, every write fails with ErrFileMoved
// and readiness reports the store down, until an operator restarts the process.
type fileWatch struct {
	path string
	f    *os.File
	// moved holds the first error that found the file moved (sticky: the orphaned inode
	// never comes back).
	moved atomic.Pointer[error]
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// watchFile opens path (which must exist) and starts the periodic check.
func watchFile(path string) (*fileWatch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("store: watch %q: %w", path, err)
	}
	w := &fileWatch{path: path, f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

func (w *fileWatch) loop() {
	defer close(w.done)
	t := time.NewTicker(fileWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			_ = w.check()
		}
	}
}

// check returns an error wrapping ErrFileMoved and ErrUnavailable when the path no longer
// names the file that was opened (deleted, or replaced by another file), nil otherwise. The
// first detection is logged as an error.
func (w *fileWatch) check() error {
	if p := w.moved.Load(); p != nil {
		return *p
	}
	open, err := w.f.Stat()
	if err != nil {
		return nil // cannot tell; the write itself will say
	}
	var why string
	now, err := os.Stat(w.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		why = "it was deleted"
	case err != nil:
		return nil
	case !os.SameFile(open, now):
		why = "another file was put in its place"
	case unlinked(open):
		why = "it was deleted"
	}
	if why == "" {
		return nil
	}
	moved := fmt.Errorf("%w: %w: %s (%s); restart Baton to open the database again (writes since are refused)",
		ErrUnavailable, ErrFileMoved, w.path, why)
	if w.moved.CompareAndSwap(nil, &moved) {
		slog.Error("store: the SQLite database file was deleted or replaced while open; every write is refused until a restart",
			"path", w.path, "reason", why)
	}
	return *w.moved.Load()
}

// close stops the periodic check and closes the file.
func (w *fileWatch) close() {
	w.once.Do(func() {
		close(w.stop)
		<-w.done
		_ = w.f.Close()
	})
}
