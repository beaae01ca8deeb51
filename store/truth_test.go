package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holderEnv makes the test binary a helper process that holds a SQLite store open
// (TestSecondProcessOnSQLiteFile): it opens the path it names, prints "ready" and waits.
const holderEnv = "BATON_TEST_STORE_HOLDER"

// TestSecondProcessOnSQLiteFile: a second process on a SQLite file that another process
// holds is refused at Open, with a message naming the file and the holder's pid; once the
// holder is killed (kill -9: no cleanup of its own runs), the file opens again.
func TestSecondProcessOnSQLiteFile(t *testing.T) {
	if path := os.Getenv(holderEnv); path != "" {
		s, err := Open(context.Background(), "sqlite:"+path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		defer s.Close()
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
		return
	}
	path := filepath.Join(t.TempDir(), "baton.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondProcessOnSQLiteFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready", strings.TrimSpace(line), "the holder did not open the store")

	_, err = Open(context.Background(), "sqlite:"+path)
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), path, "the message names the file")
	assert.Contains(t, err.Error(), fmt.Sprintf("process %d", cmd.Process.Pid), "the message names the running process")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	s, err := Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err, "the kernel drops the lock of a killed process")
	require.NoError(t, s.Close())
}

// TestSecondHandleOnSQLiteFileRefused: within one process too, the file has one owner.
func TestSecondHandleOnSQLiteFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baton.db")
	s, err := Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	_, err = Open(context.Background(), "sqlite:"+path)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, s.Close())
	s, err = Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err, "Close releases the lock")
	require.NoError(t, s.Close())
}

// TestDeletedSQLiteFile: the database files are deleted while the store is open. SQLite
// would go on writing into the orphaned inode (every thread acknowledged, all gone at the
// next start); the store refuses every write with ErrUnavailable and ErrFileMoved and
// Ping reports it down. A file put in the place of the database counts the same.
func TestDeletedSQLiteFile(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			path := filepath.Join(dir, "baton.db")
			s, err := Open(ctx, "sqlite:"+path)
			require.NoError(t, err)
			defer s.Close()
			_, err = s.ClaimThread(ctx, "before", "alice", "")
			require.NoError(t, err)
			require.NoError(t, s.Ping(ctx))

			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
					require.NoError(t, err)
				}
			}
			if how == "replaced" {
				require.NoError(t, os.WriteFile(path, nil, 0o600))
			}

			_, err = s.ClaimThread(ctx, "after", "alice", "")
			require.Error(t, err, "a write into a deleted file must not be acknowledged")
			assert.ErrorIs(t, err, ErrUnavailable)
			assert.ErrorIs(t, err, ErrFileMoved)
			_, err = s.StartRun(ctx, RunStart{ThreadID: "t2", RunID: "r", Owner: "alice", Replica: "x", Lease: time.Minute})
			assert.ErrorIs(t, err, ErrUnavailable)
			perr := s.Ping(ctx)
			require.ErrorIs(t, perr, ErrUnavailable, "readiness reports the store down")
			assert.ErrorIs(t, perr, ErrFileMoved)
		})
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and returns it; unmounted when
// t ends. Without the privilege (not root, no CAP_SYS_ADMIN, a container without mount) it
// skips with the reason, or fails when CI is set.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): %v: %s", err, out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			return name
		}
	}
}

// TestDiskFullSQLite: SQLite on a full disk (a 2 MiB tmpfs, filled). A write fails with
// ErrUnavailable (not an error the HTTP layer would call internal), Ping reports the store
// down although it still reads, and once space is freed a write succeeds and Ping is
// clean again, with the data written before intact.
func TestDiskFullSQLite(t *testing.T) {
	ctx := context.Background()
	dir := mountTmpfs(t, 2<<20)
	s, err := Open(ctx, "sqlite:"+filepath.Join(dir, "baton.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.ClaimThread(ctx, "before", "alice", "")
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))

	filler := fillDisk(t, dir)
	big := Message{ID: "m1", Data: []byte(`"` + strings.Repeat("x", 256<<10) + `"`)}
	err = s.SaveMessages(ctx, "before", []Message{big})
	require.Error(t, err, "a write on a full disk cannot succeed")
	assert.ErrorIs(t, err, ErrUnavailable)
	perr := s.Ping(ctx)
	require.ErrorIs(t, perr, ErrUnavailable, "readiness reports a store that cannot write as down")
	_, err = s.GetThread(ctx, "before")
	require.NoError(t, err, "reads still work")

	require.NoError(t, os.Remove(filler))
	require.NoError(t, s.SaveMessages(ctx, "before", []Message{big}))
	require.NoError(t, s.Ping(ctx), "a write succeeded since: up again")
	msgs, err := s.LoadMessages(ctx, "before")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}
