package integration

// Fencing (design/fencing.md): two coordinator processes on one PostgreSQL, a counting MCP
// server whose "charge" is not idempotent, and a run that charges four times, one call per
// turn. The owner is paused (SIGSTOP) in the middle of a charge, past its lease; the other
// replica takes the run over and finishes it; the owner is resumed (SIGCONT). The stale
// owner must neither write to the run's log nor charge again.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
)

// chargeCalls is how many charges the test's run makes.
const chargeCalls = 4

// countingMCP is an MCP server with one tool, "charge", that is not idempotent: it counts
// every call it receives and takes chargeTime to answer.
type countingMCP struct {
	URL     string
	charges atomic.Int64

	mu    sync.Mutex
	items map[string]int // charges per item
}

// chargesOf is how many times item was charged.
func (m *countingMCP) chargesOf(item string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[item]
}

const chargeTime = 1500 * time.Millisecond

func startCountingMCP(t *testing.T) *countingMCP {
	t.Helper()
	m := &countingMCP{items: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "0.1.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "Charge the card (not idempotent)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, slowOut, error) {
			n := m.charges.Add(1)
			m.mu.Lock()
			m.items[in.Item]++
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, slowOut{}, ctx.Err()
			case <-time.After(chargeTime):
			}
			return nil, slowOut{Said: fmt.Sprintf("charged %s (#%d)", in.Item, n)}, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/mcp"
	return m
}

// chargingModel charges once per turn until chargeCalls tool results are in the
// conversation (a result "may or may not have run" counts), then says it is done.
func chargingModel(req fakellm.Request) fakellm.Reply {
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	if results >= chargeCalls {
		return fakellm.Reply{Text: modelDoneText}
	}
	n := results + 1
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: "pay__charge",
		Arguments: fmt.Sprintf(`{"item":"order-%d"}`, n)}}}
}

// fenceConfig is two replicas' config: short leases, so that the test is quick.
func fenceConfig(llmURL, mcpURL, dsn string) string {
	return testConfig{LLMURL: llmURL, MCP: []mcpServerEntry{{Name: "pay", URL: mcpURL}}, Store: dsn, Grace: "1s"}.yaml() +
		"replication:\n  heartbeat: 500ms\n  lease: 2s\n"
}

// waitProcLog waits until the process's output contains s.
func waitProcLog(t *testing.T, p *proc, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, errOut := p.Logs()
		if strings.Contains(out, s) || strings.Contains(errOut, s) {
			return
		}
		require.True(t, time.Now().Before(deadline), "the process never logged %q", s)
		time.Sleep(50 * time.Millisecond)
	}
}

// resultsPerCall counts the TOOL_CALL_RESULT events of each tool call id in frames, and
// the terminal events.
func resultsPerCall(frames []takeoverFrame) (results map[string]int, terminals int) {
	results = map[string]int{}
	for _, f := range frames {
		switch f.Event["type"] {
		case "TOOL_CALL_RESULT":
			id, _ := f.Event["toolCallId"].(string)
			results[id]++
		case "RUN_FINISHED", "RUN_ERROR":
			terminals++
		}
	}
	return results, terminals
}

func TestFencePausedOwner(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pay := startCountingMCP(t)
	model := fakellm.Start(chargingModel)
	t.Cleanup(model.Close)
	cfg := fenceConfig(model.URL, pay.URL, dsn)
	a := startHITLCoordinator(t, cfg)
	b := startHITLCoordinator(t, cfg)
	waitMCPSettled(t, a.URL)
	waitMCPSettled(t, b.URL)

	thread := newThreadID("fence-pause")
	live := postJSON(t, a.URL+"/agui", `{"threadId":"`+thread+`","runId":"r1","protocolVersion":"1.0","messages":[{"id":"u1","role":"user","content":"charge four orders"}]}`)
	require.Equal(t, http.StatusOK, live.StatusCode)
	defer live.Body.Close()

	// The owner is paused while its second charge is in flight at the MCP server.
	deadline := time.Now().Add(30 * time.Second)
	for pay.charges.Load() < 2 {
		require.True(t, time.Now().Before(deadline), "the second charge never reached the MCP server")
		time.Sleep(10 * time.Millisecond)
	}
	pid := a.p.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()

	// The other replica takes the run over and finishes it (the charge in flight is
	// reported in doubt, the others are made once).
	before := followRun(t, b.URL, thread, 0, 90*time.Second)
	require.Equal(t, "RUN_FINISHED", before[len(before)-1].Event["type"], "%v", frameTypes(before))

	// The stale owner wakes up: it learns that it lost the run and stops it, writing
	// nothing and charging nothing more.
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	resumed = true
	waitProcLog(t, a.p, "owned by another replica now", 30*time.Second)

	after := followRun(t, b.URL, thread, 0, 30*time.Second)
	assert.Equal(t, len(before), len(after), "the stale owner wrote to the run's log after the takeover: %v", frameTypes(after))
	results, terminals := resultsPerCall(after)
	assert.Equal(t, 1, terminals, "one terminal event: %v", frameTypes(after))
	for i := 1; i <= chargeCalls; i++ {
		assert.Equal(t, 1, results[fmt.Sprintf("call_%d", i)], "TOOL_CALL_RESULTs of call_%d: %v", i, results)
	}
	assert.Len(t, results, chargeCalls, "results: %v", results)
	assert.Equal(t, int64(chargeCalls), pay.charges.Load(), "each charge is made once")
	assertDense(t, after)
}
