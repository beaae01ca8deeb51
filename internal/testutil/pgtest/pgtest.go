// Package pgtest gives tests a real PostgreSQL server without anything installed by hand:
// BATON_TEST_POSTGRES_URL when it is set, else a throwaway server started from Debian's
// binaries, one per test binary. Each test gets a database of its own.
//
// Design note: a test process can die without running its cleanups (panic, -timeout,
// SIGKILL), so the server is not a child of the test process alone: a small shell runs
// postgres and blocks reading its stdin pipe; when that pipe closes (Stop, or the test
// process gone) the shell stops postgres with SIGINT and removes the data directory. The
// data directory and the unix socket live in a short os.MkdirTemp path (a socket path over
// 107 bytes makes postgres refuse to start), owned by the postgres user because initdb and
// postgres refuse to run as root.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable with the DSN of an existing server to use instead of starting
// one. Its user must be allowed to CREATE DATABASE.
const EnvURL = "BATON_TEST_POSTGRES_URL"

// Server is a PostgreSQL server that tests may create databases on.
type Server struct {
	// AdminDSN connects to the maintenance database ("postgres") as a superuser.
	AdminDSN string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string
}

// watchdog runs postgres ("$@") and stops it when its stdin reaches EOF: Stop closed the
// pipe, or the test process died and the kernel closed it.
const watchdog = `"$@" & pg=$!
read _ || true
kill -INT "$pg" 2>/dev/null; wait "$pg"; rm -rf "$PGTEST_DIR"`

var (
	mu       sync.Mutex
	shared   *Server
	whyNot   string
	tried    bool
	dbSerial atomic.Int64
)

// Start returns the server this test binary uses, starting it on first use. It returns an
// error saying why when neither BATON_TEST_POSTGRES_URL nor the local binaries work.
func Start() (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if tried {
		if shared == nil {
			return nil, errors.New(whyNot)
		}
		return shared, nil
	}
	tried = true
	if dsn := os.Getenv(EnvURL); dsn != "" {
		shared = &Server{AdminDSN: dsn}
		return shared, nil
	}
	s, err := startLocal()
	if err != nil {
		whyNot = err.Error()
		return nil, err
	}
	shared = s
	return s, nil
}

// Stop stops the server this binary started (a no-op for BATON_TEST_POSTGRES_URL or when
// none was started). Call it from TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil && shared.cmd != nil {
		_ = shared.stdin.Close()
		_ = shared.cmd.Wait()
		_ = os.RemoveAll(shared.dir)
	}
	shared = nil
}

// DSN returns the DSN of a fresh, empty database for t, dropped when t ends. Without a
// server it skips t with the reason, or fails it when the CI variable is set.
func DSN(t testing.TB) string {
	t.Helper()
	s, err := Start()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL is required when CI is set: %v", err)
		}
		t.Skipf("PostgreSQL not available (set %s or install Debian's postgresql): %v", EnvURL, err)
	}
	name := fmt.Sprintf("baton_test_%d_%d", os.Getpid(), dbSerial.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.AdminDSN)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.AdminDSN)
		if err != nil {
			t.Errorf("pgtest: connect to drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(s.AdminDSN)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	u.Path = "/" + name
	return u.String()
}

// binDir finds the PostgreSQL server binaries.
func binDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", errors.New("no PostgreSQL binaries (pg_config --bindir, /usr/lib/postgresql/*/bin)")
}

func startLocal() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("pgtest: chown temp dir: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: chmod temp dir: %w", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, lastLine(out))
	}
	var lastErr error
	for range 5 {
		// A failed launch's watchdog removed the directory; initdb again.
		if _, err := os.Stat(data); err != nil {
			return nil, lastErr
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(bin, dir, data, port, cred)
		if err == nil {
			ok = true
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func launch(bin, dir, data string, port int, cred *syscall.Credential) (*Server, error) {
	cmd := exec.Command("/bin/sh", "-c", watchdog, "pgtest", filepath.Join(bin, "postgres"),
		"-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=200")
	cmd.Env = append(os.Environ(), "PGTEST_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: log file: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s := &Server{AdminDSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), cmd: cmd, stdin: stdin, dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// A port taken meanwhile makes postgres exit at once: give up on this port early.
		if log, _ := os.ReadFile(filepath.Join(dir, "server.log")); strings.Contains(string(log), "could not create any TCP/IP sockets") {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.AdminDSN)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = stdin.Close()
	_ = cmd.Wait()
	log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
	return nil, fmt.Errorf("pgtest: postgres did not accept connections on port %d: %s", port, lastLine(log))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
