package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// The store tells the truth (DESIGN §3): a request that needs the store while it cannot be
// reached or written gets 503 STORE_UNAVAILABLE with Retry-After, never 404 or 500, and
// /readyz reports the store down when its writes fail, not only when a ping fails.

// tcpProxy forwards connections to target until cut: then it closes every connection it
// carries and refuses new ones (the database host is unreachable; the database stays up).
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cutNow bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cutNow {
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
	}
}

// cut closes the listener and every connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	p.cutNow = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
}

// viaProxy returns dsn with its host and port replaced by the proxy's.
func viaProxy(t *testing.T, dsn string) (string, *tcpProxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	p := startProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	return u.String(), p
}

// storeServer serves an engine on st, with the store's readiness check as cmd/coordinator
// registers it.
func storeServer(t *testing.T, st store.Store, model llm.Model) *httptest.Server {
	t.Helper()
	e := newStartedEngine(t, coordinator.Config{Model: model, Store: st, Heartbeat: time.Hour, Lease: time.Minute})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), ReadyChecks: []ReadyCheck{{Group: GroupStore, Check: st.Ping}}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = e.Stop(ctx)
		srv.Close()
		_ = st.Close()
	})
	return srv
}

// requireStoreUnavailable checks a response is 503 STORE_UNAVAILABLE with Retry-After.
func requireStoreUnavailable(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s: %s", what, b)
	assert.Contains(t, string(b), `"error":"STORE_UNAVAILABLE"`, what)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"), "%s: Retry-After", what)
}

// readyStore returns /readyz's status code and the store's status.
func readyStore(t *testing.T, base string) (int, string) {
	t.Helper()
	resp := get(t, base+"/readyz")
	doc := decodeJSON(t, resp)
	checks, _ := doc["checks"].(map[string]any)
	st, _ := checks["store"].(map[string]any)
	status, _ := st["status"].(string)
	return resp.StatusCode, status
}

// TestStopDuringStoreOutage: a replica cut off from PostgreSQL (a TCP proxy the test cuts;
// the database stays up) is asked to stop a run of a thread it does not hold in memory, to
// read the thread and to start a run: each is 503 STORE_UNAVAILABLE with Retry-After (the
// stop was 404 RUN_NOT_FOUND: the run exists), and /readyz says the store is down.
func TestStopDuringStoreOutage(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	direct, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	defer direct.Close()
	_, err = direct.ClaimThread(ctx, "out", "", "")
	require.NoError(t, err)
	_, err = direct.BeginRun(ctx, "out", "r1", "elsewhere", time.Minute)
	require.NoError(t, err)

	proxied, p := viaProxy(t, dsn)
	st, err := store.Open(ctx, proxied)
	require.NoError(t, err)
	srv := storeServer(t, st, blockingModel{release: make(chan struct{})})
	code, status := readyStore(t, srv.URL)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "up", status)

	p.cut()
	requireStoreUnavailable(t, post(t, srv.URL+"/agui/threads/out/runs/r1/stop", ""), "stop")
	requireStoreUnavailable(t, get(t, srv.URL+"/agui/threads/out"), "get thread")
	requireStoreUnavailable(t, post(t, srv.URL+"/agui", body("new", "r1", "")), "start")
	code, status = readyStore(t, srv.URL)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "down", status)

	run, err := direct.GetRun(ctx, "out", "r1")
	require.NoError(t, err)
	assert.Equal(t, store.RunRunning, run.State, "nothing was changed")
}

// TestDeletedSQLiteFilesRefuseWrites: the SQLite database files are deleted under a
// running coordinator. It used to go on acknowledging new threads (lost at the next
// start) with /readyz ready; now a start is 503 STORE_UNAVAILABLE and /readyz is down.
func TestDeletedSQLiteFilesRefuseWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	release := make(chan struct{})
	close(release)
	srv := storeServer(t, st, blockingModel{release: release})
	evs := readEvents(t, post(t, srv.URL+"/agui", body("kept", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])

	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	requireStoreUnavailable(t, post(t, srv.URL+"/agui", body("lost", "r1", "")), "start after the files were deleted")
	code, status := readyStore(t, srv.URL)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "down", status)
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted when t ends.
// Without the privilege it skips with the reason, or fails when CI is set.
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

// TestDiskFullSQLite: SQLite on a full disk (a small tmpfs, filled). POST /agui was
// 500 INTERNAL with /readyz ready; now it is 503 STORE_UNAVAILABLE with Retry-After and
// /readyz reports the store down. Once space is freed a run starts again and /readyz is
// ready.
func TestDiskFullSQLite(t *testing.T) {
	dir := mountTmpfs(t, 4<<20)
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "baton.db"))
	require.NoError(t, err)
	release := make(chan struct{})
	close(release)
	srv := storeServer(t, st, blockingModel{release: release})
	evs := readEvents(t, post(t, srv.URL+"/agui", body("first", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, f.Close())

	// A large first message: its run's start needs pages the WAL does not have yet.
	big := `{"threadId":"full","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u","role":"user","content":"` +
		strings.Repeat("x", 512<<10) + `"}]}`
	requireStoreUnavailable(t, post(t, srv.URL+"/agui", big), "start on a full disk")
	code, status := readyStore(t, srv.URL)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "down", status)

	require.NoError(t, os.Remove(filler))
	evs = readEvents(t, post(t, srv.URL+"/agui", body("again", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	code, status = readyStore(t, srv.URL)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "up", status)
}
