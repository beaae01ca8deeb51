//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package store

import "os"

// flockExclusive is a no-op where flock is not available: one process per file is then
// the operator's to ensure.
func flockExclusive(*os.File) (bool, error) { return false, nil }

// unlinked cannot tell on this platform; the path comparison still finds a deleted file.
func unlinked(os.FileInfo) bool { return false }
