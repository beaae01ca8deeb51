package integration

// Fencing under a cut network (design/fencing.md): the owner replica reaches PostgreSQL
// through a TCP proxy that the test controls. Cut past the lease, the other replica takes
// the run over and the cut-off owner makes no side effect; cut for less than the lease
// while the run ends, the run's end is recorded once the store is back and nobody runs it
// again.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// cutProxy relays TCP connections to one address until it is cut: cut closes every
// connection and refuses new ones (accepted and closed at once), mend lets them through
// again.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track records a relayed pair, or closes it when the proxy was cut meanwhile.
func (p *cutProxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = a.Close()
		_ = b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *cutProxy) mend() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// viaProxy is dsn with its host:port replaced by a proxy in front of it.
func viaProxy(t *testing.T, dsn string) (string, *cutProxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	p := startCutProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// replicaCharges counts the charges that reach the counting MCP server through each path
// (one path per replica), by the JSON-RPC tools/call requests it is sent.
type replicaCharges struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *replicaCharges) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// perReplicaMCP serves pay's MCP server at /a/mcp and /b/mcp too, counting the tool calls
// made through each, so that a replica's side effects can be told from the other's.
func perReplicaMCP(t *testing.T, pay *countingMCP) (aURL, bURL string, counts *replicaCharges) {
	t.Helper()
	target, err := url.Parse(pay.URL)
	require.NoError(t, err)
	counts = &replicaCharges{n: map[string]int{}}
	rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = target.Path
	}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			counts.mu.Lock()
			counts.n[strings.TrimSuffix(r.URL.Path, "/mcp")]++
			counts.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/a/mcp", srv.URL + "/b/mcp", counts
}

// TestFenceCutOwner: the owner loses PostgreSQL (its proxy is cut) during the run's second
// charge, for longer than the lease. The other replica takes the run over and finishes it;
// the cut-off owner makes no charge after the cut and, once it reaches the store again,
// writes nothing to the run's log.
func TestFenceCutOwner(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	aDSN, proxy := viaProxy(t, dsn)
	pay := startCountingMCP(t)
	aMCP, bMCP, counts := perReplicaMCP(t, pay)
	model := fakellm.Start(chargingModel)
	t.Cleanup(model.Close)
	a := startHITLCoordinator(t, fenceConfig(model.URL, aMCP, aDSN))
	b := startHITLCoordinator(t, fenceConfig(model.URL, bMCP, dsn))
	waitMCPSettled(t, a.URL)
	waitMCPSettled(t, b.URL)

	thread := newThreadID("fence-cut")
	live := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"charge four orders"}]}`)
	require.Equal(t, http.StatusOK, live.StatusCode)
	defer live.Body.Close()

	deadline := time.Now().Add(30 * time.Second)
	for pay.charges.Load() < 2 {
		require.True(t, time.Now().Before(deadline), "the second charge never reached the MCP server")
		time.Sleep(10 * time.Millisecond)
	}
	proxy.cut()
	atCut := counts.get("/a")
	require.Equal(t, 2, atCut, "both charges so far were the owner's")

	// The other replica takes the run over (after the lease) and finishes it while the
	// owner is still cut off.
	before := followRun(t, b.URL, thread, 0, 90*time.Second)
	require.Equal(t, "RUN_FINISHED", before[len(before)-1].Event["type"], "%v", frameTypes(before))
	assert.Equal(t, atCut, counts.get("/a"), "the cut-off owner charged after the cut")

	// Back in touch with the store, the old owner learns it lost the run and stops.
	proxy.mend()
	waitProcLog(t, a.p, "owned by another replica now", 30*time.Second)
	after := followRun(t, b.URL, thread, 0, 30*time.Second)
	assert.Equal(t, len(before), len(after), "the old owner wrote to the run's log after the takeover: %v", frameTypes(after))
	results, terminals := resultsPerCall(after)
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(after))
	for i := 1; i <= chargeCalls; i++ {
		assert.Equal(t, 1, results[fmt.Sprintf("call_%d", i)], "TOOL_CALL_RESULTs of call_%d: %v", i, results)
	}
	assert.Len(t, results, chargeCalls, "results: %v", results)
	assert.Equal(t, atCut, counts.get("/a"), "the old owner charged after the cut")
	assert.Equal(t, int64(chargeCalls), pay.charges.Load(), "each charge is made once (the one in flight at the cut is reported in doubt)")
	assertDense(t, after)
}

// TestFenceEndDuringCut: the run's last charge and its end happen while its owner is cut
// from PostgreSQL for less than the lease. Once the store is back the run is recorded as
// ended, and a replica started later does not take it over and charge again.
func TestFenceEndDuringCut(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	aDSN, proxy := viaProxy(t, dsn)
	pay := startCountingMCP(t)
	// The store is cut off as the model is asked for the run's last turn: the run's
	// final events and its end are written while the store is unreachable.
	var cutOnce sync.Once
	cutAt := make(chan time.Time, 1)
	model := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		reply := chargingModel(req)
		if len(reply.ToolCalls) == 0 {
			cutOnce.Do(func() { proxy.cut(); cutAt <- time.Now() })
		}
		return reply
	})
	t.Cleanup(model.Close)
	// A lease longer than the cut: the owner keeps the run and finishes it.
	const lease = 6 * time.Second
	cfg := func(dsn string) string {
		return testConfig{LLMURL: model.URL, MCP: []mcpServerEntry{{Name: "pay", URL: pay.URL}}, Store: dsn, Grace: "1s"}.yaml() +
			"replication:\n  heartbeat: 500ms\n  lease: 6s\n"
	}
	a := startHITLCoordinator(t, cfg(aDSN))
	waitMCPSettled(t, a.URL)

	thread := newThreadID("fence-end-cut")
	live := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"charge four orders"}]}`)
	require.Equal(t, http.StatusOK, live.StatusCode)
	defer live.Body.Close()
	finished := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(live.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"RUN_FINISHED"`) {
				finished <- true
				return
			}
		}
		finished <- false
	}()

	// The run's last turn is answered during the cut; its end waits for the store.
	select {
	case at := <-cutAt:
		time.Sleep(3*time.Second - time.Since(at)) // a cut of about 3 s, less than the lease
	case <-time.After(60 * time.Second):
		t.Fatal("the run never reached its last turn")
	}
	proxy.mend()
	select {
	case ok := <-finished:
		require.True(t, ok, "the live stream ended without RUN_FINISHED")
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish once the store was back")
	}

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	state := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT state FROM runs WHERE thread_id = $1 AND run_id = 'r1'`, thread).Scan(&s))
		return s
	}
	deadline := time.Now().Add(30 * time.Second)
	for state() == "running" {
		require.True(t, time.Now().Before(deadline), "the run's end was never recorded after the store came back")
		time.Sleep(100 * time.Millisecond)
	}

	// A replica started later claims lapsed runs after a lease of contact; by two leases
	// it would have taken this run over had it still been "running".
	b := startHITLCoordinator(t, cfg(dsn))
	waitMCPSettled(t, b.URL)
	time.Sleep(2*lease + time.Second)
	frames := followRun(t, b.URL, thread, 0, 30*time.Second)
	results, terminals := resultsPerCall(frames)
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(frames))
	assert.Len(t, results, chargeCalls, "results: %v", results)
	assert.NotEqual(t, "running", state())
	assert.Equal(t, int64(chargeCalls), pay.charges.Load(), "the ended run was not run again")
}
