package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// noSaveStore is a memory store whose suspensions cannot be saved (a full disk).
type noSaveStore struct{ store.Store }

func (noSaveStore) SaveSuspension(context.Context, *store.Suspension) error {
	return errors.New("database or disk is full")
}

// parkingTools parks every call on a form question (MRTR) and records what is abandoned.
type parkingTools struct {
	mu        sync.Mutex
	abandoned []*mcpclient.InputRequired
}

func (p *parkingTools) Tools() []mcpclient.Tool {
	return []mcpclient.Tool{{Name: "ops__deploy", Server: "ops", ToolName: "deploy", Description: "Deploy.", InputSchema: map[string]any{"type": "object"}}}
}

func (p *parkingTools) Call(_ context.Context, _ string, args json.RawMessage, _ mcpclient.CallOptions) (mcpclient.Result, error) {
	return mcpclient.Result{}, &mcpclient.InputRequired{Server: "ops", Tool: "ops__deploy", ToolName: "deploy", Args: args,
		Requests: []mcpclient.InputRequest{{Key: "env", Mode: "form", Message: "Which environment?"}}}
}

func (p *parkingTools) Resume(context.Context, *mcpclient.InputRequired, map[string]*mcp.ElicitResult, mcpclient.CallOptions) (mcpclient.Result, error) {
	return mcpclient.Result{}, errors.New("not expected")
}

func (p *parkingTools) Abandon(_ context.Context, in *mcpclient.InputRequired) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.abandoned = append(p.abandoned, in)
	return nil
}

// Issue 12: when the suspension cannot be saved, the work parked on it is cancelled at once:
// the A2A task gets CancelTask (see integration TestStoreFailureOnSuspendCancelsParkedTask)
// and the parked MCP call is abandoned; the run ends with STORE_UNAVAILABLE.
func TestUnsavedSuspensionAbandonsParkedMCPCall(t *testing.T) {
	mem, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	tools := &parkingTools{}
	e := newEngine(t, &fakeModel{turn: callThenReport("ops__deploy", `{"service":"api"}`)}, &fakeAgent{}, func(c *Config) {
		c.Tools = tools
		c.Store = noSaveStore{mem}
	})
	evs := startAndCollect(t, e, input("unsaved"))
	assert.Equal(t, "STORE_UNAVAILABLE", runErrorCode(t, evs))
	tools.mu.Lock()
	defer tools.mu.Unlock()
	require.Len(t, tools.abandoned, 1, "the parked call is abandoned")
	assert.Equal(t, "ops__deploy", tools.abandoned[0].Tool)
}
