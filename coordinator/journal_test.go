package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/store"
)

// TestJournalAfterTakeover: a replica died with two MCP calls begun (their intents in the
// journal, no outcome): a non-idempotent write and an idempotent read. The replica taking
// the run over reports both in doubt in the journal, records the takeover, re-issues the
// read (a new step with its outcome) and never the write, and ends the run: no step is
// left pending.
func TestJournalAfterTakeover(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	conv := []llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
		{ID: "c-read", Name: "fs__read", Arguments: `{}`},
		{ID: "c-write", Name: "fs__write", Arguments: `{}`},
	}}}
	deadRun(t, st, "jt", conv, durable.Work{MCP: []durable.Call{
		{ToolCallID: "c-read", Tool: "fs__read", Idempotent: true, State: "started"},
		{ToolCallID: "c-write", Tool: "fs__write", State: "started"}}})
	runID := input("jt").RunID
	for _, ref := range []string{"c-read", "c-write"} {
		require.NoError(t, st.RecordStep(ctx, &store.Step{ThreadID: "jt", RunID: runID, Kind: store.StepToolCall,
			Target: map[string]string{"c-read": "fs__read", "c-write": "fs__write"}[ref], Ref: ref, Replica: "replica-dead"}))
	}
	calls := make(chan string, 4)
	tools := &fakeTools{
		tools: []mcpclient.Tool{{Name: "fs__read", Server: "fs", ToolName: "read", Idempotent: true, InputSchema: map[string]any{"type": "object"}},
			{Name: "fs__write", Server: "fs", ToolName: "write", InputSchema: map[string]any{"type": "object"}}},
		status: func(name string, _ json.RawMessage) mcpclient.Result {
			calls <- name
			return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "fs", Content: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents"}}}}
		},
	}
	model := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	newStartedEngine(t, Config{Model: model, Tools: tools, Store: st, Heartbeat: 20 * time.Millisecond, Lease: time.Second, Replica: "replica-new"})
	run, _ := waitEnded(t, st, "jt", runID)
	assert.Equal(t, string(OutcomeCompleted), run.State)
	close(calls)
	var sent []string
	for c := range calls {
		sent = append(sent, c)
	}
	assert.Equal(t, []string{"fs__read"}, sent, "the write is never sent again")

	// run_end is recorded before the run's record ends; wait for nothing else.
	steps, err := st.Steps(ctx, "jt", 0, 0)
	require.NoError(t, err)
	byRef := map[string][]store.Step{}
	var kinds []string
	for _, s := range steps {
		assert.NotEqual(t, store.StepPending, s.Outcome, "step %d (%s %s) left pending", s.Seq, s.Kind, s.Ref)
		kinds = append(kinds, s.Kind)
		if s.Ref != "" {
			byRef[s.Ref] = append(byRef[s.Ref], s)
		}
	}
	require.Len(t, byRef["c-write"], 1, "the write: its old intent only")
	w := byRef["c-write"][0]
	assert.Equal(t, store.StepInDoubt, w.Outcome)
	assert.True(t, w.InDoubt)
	assert.Equal(t, "replica-dead", w.Replica)
	require.Len(t, byRef["c-read"], 2, "the read: its old intent, then the re-issued call")
	assert.True(t, byRef["c-read"][0].InDoubt)
	assert.Equal(t, store.StepOK, byRef["c-read"][1].Outcome)
	assert.Equal(t, "replica-new", byRef["c-read"][1].Replica)
	assert.Contains(t, kinds, store.StepTakeover)
	assert.Contains(t, kinds, store.StepModelCall)
	assert.Equal(t, store.StepRunEnd, kinds[len(kinds)-1])
}

// awayJournal is a memory store whose journal refuses the first `away` intents of tool
// calls (a store that is away for a moment) and counts them.
type awayJournal struct {
	store.Store
	away    atomic.Int32
	refused atomic.Int32
}

func (s *awayJournal) RecordStep(ctx context.Context, st *store.Step) error {
	if st.Kind == store.StepToolCall && s.away.Add(-1) >= 0 {
		s.refused.Add(1)
		return fmt.Errorf("journal: %w", store.ErrUnavailable)
	}
	return s.Store.RecordStep(ctx, st)
}

// TestIntentRetriedUntilStored: the intent of a non-idempotent call cannot be written at
// first (the store is away). The call waits and is sent once, after its intent is stored;
// it is neither dropped nor sent unrecorded.
func TestIntentRetriedUntilStored(t *testing.T) {
	ctx := context.Background()
	mem, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	st := &awayJournal{Store: mem}
	st.away.Store(3)
	var sentRecorded []bool
	tools := &fakeTools{
		tools: []mcpclient.Tool{{Name: "pay__charge", Server: "pay", ToolName: "charge", InputSchema: map[string]any{"type": "object"}}},
		status: func(name string, _ json.RawMessage) mcpclient.Result {
			steps, err := mem.Steps(ctx, "intent-away", 0, 0)
			require.NoError(t, err)
			recorded := false
			for _, s := range steps {
				recorded = recorded || (s.Kind == store.StepToolCall && s.Outcome == store.StepPending)
			}
			sentRecorded = append(sentRecorded, recorded)
			return mcpclient.Result{Status: mcpclient.StatusOK, Tool: name, Server: "pay", Content: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}}
		},
	}
	e := newEngine(t, &fakeModel{turn: callThenReport("pay__charge", `{}`)}, &fakeAgent{}, func(c *Config) {
		c.Tools = tools
		c.Store = st
	})
	evs := startAndCollect(t, e, input("intent-away"))
	require.IsType(t, &agui.RunFinished{}, lastEvent(evs), "%v", types(evs))
	assert.Equal(t, int32(3), st.refused.Load(), "the intent was asked again until stored")
	assert.Equal(t, []bool{true}, sentRecorded, "the call is sent once, after its intent is stored")
}
