//go:build linux || darwin || freebsd || netbsd || openbsd

package store

import (
	"errors"
	"os"
	"syscall"
)

// flockExclusive takes an exclusive, non-blocking flock on f. It reports busy when another
// open file (in this process or another) holds it.
func flockExclusive(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, err
	}
	return false, err
}

// unlinked reports whether the file behind fi has no name left (deleted while open).
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
