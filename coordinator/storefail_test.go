package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
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

// When the suspension cannot be saved, the work parked on it is cancelled at once:
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

// noMarkStore is a memory store that cannot record resolved interrupts while fail is set.
type noMarkStore struct {
	store.Store
	fail *atomic.Bool
}

func (s noMarkStore) MarkResolved(ctx context.Context, threadID string, ids []string) error {
	if s.fail.Load() {
		return errors.New("database or disk is full")
	}
	return s.Store.MarkResolved(ctx, threadID, ids)
}

// CloseSuspension records resolved interrupts too (with the suspension's deletion).
func (s noMarkStore) CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	if s.fail.Load() {
		return errors.New("database or disk is full")
	}
	return s.Store.CloseSuspension(ctx, threadID, runID, epoch, ids)
}

// movingAgent asks on a new task; afterwards GetTask reports the task working for the first
// reads, then completed, as an agent still busy with an answer it already got.
type movingAgent struct {
	fakeAgent
	waiting atomic.Bool
	reads   atomic.Int32
}

func (m *movingAgent) GetTask(_ context.Context, taskID string) (*subagent.Result, error) {
	if m.waiting.Load() {
		return &subagent.Result{State: subagent.StateInputRequired, TaskID: taskID, ContextID: "ctx-" + taskID, Text: "Which dates?"}, nil
	}
	if m.reads.Add(1) <= 2 {
		return &subagent.Result{State: subagent.StateWorking, TaskID: taskID, ContextID: "ctx-" + taskID}, nil
	}
	return &subagent.Result{State: subagent.StateCompleted, TaskID: taskID, ContextID: "ctx-" + taskID, Text: "booked for 12-19 May"}, nil
}

// A repeated resume whose task is still working on the earlier answer follows it to its
// outcome instead of sending the answer again.
func TestRepeatedResumeFollowsWorkingTask(t *testing.T) {
	mem, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	var fail atomic.Bool
	agent := &movingAgent{fakeAgent: fakeAgent{send: askingAgent("task-7")}}
	e := newStartedEngine(t, Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"plan a trip"}`)},
		Agents: []Agent{{Name: "research", Description: "Researches.", Client: agent, Timeout: time.Minute}},
		Store:  noMarkStore{Store: mem, fail: &fail}, CancelTimeout: time.Second})

	// The first run parks on the question; reading the task then is not needed.
	ins := interruptsOf(t, startAndCollect(t, e, input("th")))
	require.Len(t, ins, 1)

	// The answer is delivered, recording it fails: an error, not a success. The task was
	// waiting when it was read, so the answer went out.
	agent.waiting.Store(true)
	fail.Store(true)
	evs := startAndCollect(t, e, resumeInput("th", "r2", resolved(ins[0].ID, `{"text":"12-19 May"}`)))
	assert.Equal(t, "STORE_UNAVAILABLE", runErrorCode(t, evs))
	require.Len(t, agent.sent, 2)

	// The repeat finds the task still working on that answer and follows it.
	agent.waiting.Store(false)
	fail.Store(false)
	evs = startAndCollect(t, e, resumeInput("th", "r3", resolved(ins[0].ID, `{"text":"12-19 May"}`)))
	assert.IsType(t, &agui.RunFinished{}, lastEvent(evs), "events: %v", types(evs))
	assert.Len(t, agent.sent, 2, "the answer is not sent twice")
	res := toolResults(evs)
	require.Len(t, res, 1)
	assert.Contains(t, res[0], "booked for 12-19 May")
	assert.GreaterOrEqual(t, agent.reads.Load(), int32(3), "the task was read until it completed")
}
