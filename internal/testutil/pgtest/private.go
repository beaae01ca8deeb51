package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PrivateServer is a PostgreSQL server of one test's own, which the test may stop and
// start again on the same port (a store outage: clients' connections fail while it is
// down and reach the same address once it is back). It runs under pg_ctl, as the
// postgres user when the test runs as root.
type PrivateServer struct {
	// DSN connects to its "postgres" database as the superuser.
	DSN string

	bin, dir, data string
	port           int
	cred           *syscall.Credential

	mu sync.Mutex // one pg_ctl at a time
}

// Private starts a PostgreSQL server for t alone, stopped and removed when t ends. A
// server from BATON_TEST_POSTGRES_URL cannot be stopped by the test, so Private needs the
// local binaries: without them it skips t with the reason, or fails it when CI is set.
func Private(t testing.TB) *PrivateServer {
	t.Helper()
	s, err := startPrivate()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("a private PostgreSQL server is required when CI is set: %v", err)
		}
		t.Skipf("no private PostgreSQL server (install Debian's postgresql): %v", err)
	}
	t.Cleanup(func() {
		// Immediate: the test is over, nothing of its data is needed.
		_ = s.pgCtl("stop", "-m", "immediate", "-w", "-t", "30")
		_ = os.RemoveAll(s.dir)
	})
	return s
}

func startPrivate() (*PrivateServer, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCred()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgpriv-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &PrivateServer{bin: bin, dir: dir, data: filepath.Join(dir, "data"), cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown temp dir: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: chmod temp dir: %w", err)
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, lastLine(out))
	}
	var lastErr error
	for range 5 {
		if s.port, err = freePort(); err != nil {
			break
		}
		if lastErr = s.Start(); lastErr == nil {
			s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	if err != nil {
		return nil, err
	}
	return nil, lastErr
}

// postgresCred is the postgres user's credential when the test runs as root (initdb and
// postgres refuse to run as root), else nil.
func postgresCred() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// pgCtl runs pg_ctl on the server's data directory.
func (s *PrivateServer) pgCtl(args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, "pg_ctl"), append([]string{"-D", s.data}, args...)...)
	// Its own process group: a Ctrl-C meant for the test does not reach the server first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl %s: %w: %s", args[0], err, lastLine(out))
	}
	return nil
}

// Stop stops the server (pg_ctl stop -m fast: open connections are ended) and waits until
// it is down.
func (s *PrivateServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.pgCtl("stop", "-m", "fast", "-w", "-t", "30"); err != nil {
		return err
	}
	return nil
}

// Start starts the server again on its port and waits until it accepts connections.
func (s *PrivateServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200",
		s.port, s.dir)
	if err := s.pgCtl("start", "-w", "-t", "30", "-l", filepath.Join(s.dir, "server.log"), "-o", opts); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: the private server did not accept connections on port %d: %w", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
