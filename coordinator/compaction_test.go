package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// recordingModel is fakeModel that keeps every request it was sent.
type recordingModel struct {
	fakeModel
	mu   sync.Mutex
	reqs []*llm.Request
}

func (m *recordingModel) requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.reqs...)
}

func newRecordingModel(turn turnFunc) *recordingModel {
	m := &recordingModel{}
	m.turn = func(req *llm.Request) []llm.Delta {
		m.mu.Lock()
		m.reqs = append(m.reqs, req)
		m.mu.Unlock()
		return turn(req)
	}
	return m
}

// TestLargeToolResultReachesModelCut: a 5 MiB sub-agent artifact reaches the model cut to
// history.max_tool_result_bytes, ending with [TRUNCATED:bytes=N] (N the whole result's
// size), while the AG-UI client gets it whole: in the streamed sub-agent text and in the
// TOOL_CALL_RESULT, and the thread keeps it whole.
func TestLargeToolResultReachesModelCut(t *testing.T) {
	t.Parallel()
	artifact := strings.Repeat("0123456789abcdé\n", 5<<20/17+1)
	// The artifact streams in chunks, as agents send it, then completes the task.
	agent := &fakeAgent{send: func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		obs.Task("t-big", "c-big")
		for rest := artifact; rest != ""; {
			n := min(len(rest), 64<<10)
			obs.Text(rest[:n])
			rest = rest[n:]
		}
		return &subagent.Result{State: subagent.StateCompleted, TaskID: "t-big", ContextID: "c-big", Text: artifact}, nil
	}}
	model := newRecordingModel(callThenReport("research", `{"prompt":"big"}`))
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	// The test reads the live stream only: its buffer holds the whole run.
	e := newEngine(t, model, agent, func(c *Config) { c.Store = st; c.StreamBufferBytes = 64 << 20 })

	// 5 MiB through the escaping of outside text is slow under the race detector: the run
	// gets longer than collect's default to end.
	run, err := e.StartRun(context.Background(), input("big"), "")
	require.NoError(t, err)
	evs := collectWithin(t, run, 3*time.Minute)
	res := toolResults(evs)
	require.Len(t, res, 1)
	whole := "[COMPLETED]\n" + artifact
	assert.Equal(t, len(whole), len(res[0]), "TOOL_CALL_RESULT holds the whole result")
	assert.True(t, res[0] == whole, "TOOL_CALL_RESULT is the whole result")
	var streamed strings.Builder
	for _, ev := range evs {
		if c, ok := ev.(*agui.TextMessageContent); ok && c.SubagentRunID != "" {
			streamed.WriteString(c.Delta)
		}
	}
	assert.True(t, streamed.String() == artifact, "the sub-agent's text streams whole")

	reqs := model.requests()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	require.Equal(t, llm.RoleTool, last.Role)
	assert.LessOrEqual(t, len(last.Content), history.DefaultMaxToolResultBytes)
	assert.True(t, strings.HasSuffix(last.Content, fmt.Sprintf("\n[TRUNCATED:bytes=%d]", len(whole))), "ends %q", last.Content[max(0, len(last.Content)-40):])
	assert.True(t, strings.HasPrefix(last.Content, "[COMPLETED]\n0123456789"))

	msgs, err := st.LoadMessages(context.Background(), "big")
	require.NoError(t, err)
	var kept string
	for _, m := range msgs {
		var am agui.Message
		require.NoError(t, json.Unmarshal(m.Data, &am))
		if am.Role == agui.RoleTool {
			kept = am.Text()
		}
	}
	assert.True(t, kept == whole, "the thread keeps the whole result (%d bytes of %d)", len(kept), len(whole))
}

// collectWithin is collect with a longer limit on the run's end.
func collectWithin(t *testing.T, r *Run, limit time.Duration) []agui.Event {
	t.Helper()
	var all []agui.Event
	timeout := time.After(limit)
	for {
		evs, ended := r.Stream().Next()
		all = append(all, evs...)
		if ended {
			<-r.Done()
			return all
		}
		select {
		case <-r.Stream().Wake():
		case <-timeout:
			t.Fatalf("run did not end; %d events so far", len(all))
		}
	}
}

// windowChars is the context window the fake model enforces, in characters.
const windowChars = 24000

// TestLongConversationCompacts: a 40-turn conversation with tool calls goes on past the
// model's window (enforced by the fake OpenAI server, which answers
// context_length_exceeded), compaction at the turns where the request would pass
// compact_at; the model is never sent more than the window; a task_id from turn 3 is still
// in what the model reads at turn 40 and continues the task; the thread keeps every
// message and the summaries, marked; the journal has the compaction steps.
func TestLongConversationCompacts(t *testing.T) {
	t.Parallel()
	const turns = 40
	var (
		mu        sync.Mutex
		step      int
		summaries int
		refused   int
		biggest   int
		sawTask   bool
	)
	inner := func(req fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		biggest = max(biggest, req.Chars())
		if strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
			summaries++
			return fakellm.Reply{Text: fmt.Sprintf("Summary %d: the user asked for research in steps; each step completed.", summaries)}
		}
		step++
		switch {
		case step < turns:
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", step), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"step %d"}`, step)}}}
		case step == turns:
			for _, m := range req.Messages {
				sawTask = sawTask || strings.Contains(m.Content, "task_id=t-3")
			}
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: "call_40", Name: "research", Arguments: `{"prompt":"May 12","task_id":"t-3"}`}}}
		default:
			return fakellm.Reply{Text: "all done"}
		}
	}
	srv := fakellm.Start(func(req fakellm.Request) fakellm.Reply {
		rep := fakellm.WithWindow(windowChars, inner)(req)
		if rep.Status != 0 {
			mu.Lock()
			refused++
			mu.Unlock()
		}
		return rep
	})
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	model, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "fake-window", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)

	agent := &fakeAgent{send: func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		if req.Prompt == "step 3" {
			obs.Task("t-3", "c-3")
			return &subagent.Result{State: subagent.StateInputRequired, TaskID: "t-3", ContextID: "c-3", Text: "Which day?"}, nil
		}
		if req.TaskID == "t-3" {
			return &subagent.Result{State: subagent.StateCompleted, TaskID: "t-3", ContextID: "c-3", Text: "booked for May 12"}, nil
		}
		id := "task-" + strings.TrimPrefix(req.Prompt, "step ")
		obs.Task(id, "c")
		return &subagent.Result{State: subagent.StateCompleted, TaskID: id, ContextID: "c", Text: req.Prompt + ": " + strings.Repeat("finding ", 250)}, nil
	}}
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := newEngine(t, model, agent, func(c *Config) {
		c.Store = st
		c.Agents[0].InputRequired = "model"
		c.Limits.MaxIterations = 100
		c.History = history.Options{Window: windowChars / 4, CompactAt: 0.8, KeepRecentTurns: 4}.WithDefaults()
	})

	evs := startAndCollect(t, e, input("long"))
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "events: %v", types(evs))
	res := toolResults(evs)
	require.Len(t, res, turns)
	assert.True(t, strings.HasPrefix(res[2], "[INPUT_REQUIRED:task_id=t-3]"), res[2])
	assert.True(t, strings.HasPrefix(res[turns-1], "[COMPLETED]\nbooked for May 12"), res[turns-1])

	mu.Lock()
	assert.Zero(t, refused, "compaction kept every request inside the window")
	assert.LessOrEqual(t, biggest, windowChars)
	assert.True(t, sawTask, "turn 40 still reads task t-3")
	nSummaries := summaries
	mu.Unlock()

	var compactions []*agui.ActivitySnapshot
	for _, ev := range evs {
		if a, ok := ev.(*agui.ActivitySnapshot); ok && a.ActivityType == ActivityCompaction {
			compactions = append(compactions, a)
		}
	}
	require.GreaterOrEqual(t, len(compactions), 2, "a 40-turn conversation is compacted more than once")
	assert.GreaterOrEqual(t, nSummaries, len(compactions))
	for _, c := range compactions {
		assert.True(t, strings.HasPrefix(c.Content["summary"].(string), history.SummaryPrefix))
		assert.NotEmpty(t, c.Content["replaces"])
	}

	// The thread keeps every message, and the summaries marked as such.
	msgs, err := st.LoadMessages(context.Background(), "long")
	require.NoError(t, err)
	var tools, marked int
	for _, m := range msgs {
		var am agui.Message
		require.NoError(t, json.Unmarshal(m.Data, &am))
		switch {
		case am.Role == agui.RoleTool:
			tools++
		case am.Role == agui.RoleActivity && am.ActivityType == ActivityCompaction:
			marked++
		}
	}
	assert.Equal(t, turns, tools, "every tool result is in the thread")
	assert.Equal(t, len(compactions), marked, "every summary is in the thread, marked")

	steps, err := st.Steps(context.Background(), "long", 0, store.MaxStepsRead)
	require.NoError(t, err)
	var journaled int
	for _, s := range steps {
		if s.Kind == store.StepCompaction {
			journaled++
			assert.Equal(t, store.StepOK, s.Outcome)
			assert.Contains(t, s.Detail, "replaced")
		}
	}
	assert.Equal(t, len(compactions), journaled)

	// A later run on the thread replays the compactions: it is not summarised again from
	// scratch, and its first request fits the window.
	mu.Lock()
	before := summaries
	mu.Unlock()
	more := input("long")
	more.RunID = "r-long-2"
	var sent []agui.Message
	for _, m := range msgs {
		var am agui.Message
		require.NoError(t, json.Unmarshal(m.Data, &am))
		sent = append(sent, am)
	}
	content, _ := json.Marshal("thanks")
	more.Messages = append(sent, agui.Message{ID: "u2", Role: agui.RoleUser, Content: content})
	evs = startAndCollect(t, e, more)
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "events: %v", types(evs))
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, refused)
	assert.LessOrEqual(t, summaries-before, 1, "the stored compactions were replayed")
}

// overflowRig is a fake OpenAI server that refuses requests longer than window characters
// as OpenAI does (context_length_exceeded), behind an engine that believes the window is
// far larger: only the provider's refusal can reveal the overflow.
func overflowRig(t *testing.T, window int, inner fakellm.Handler) (*Engine, *fakellm.Server) {
	t.Helper()
	srv := fakellm.Start(fakellm.WithWindow(window, inner))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	model, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "fake-window", HTTPClient: &http.Client{Transport: tr}})
	require.NoError(t, err)
	agent := &fakeAgent{send: func(_ context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
		return &subagent.Result{State: subagent.StateMessage, Text: req.Prompt + ": " + strings.Repeat("finding ", 300)}, nil
	}}
	e := newEngine(t, model, agent, func(c *Config) {
		c.Limits.MaxIterations = 100
		c.History = history.Options{Window: 1 << 20, KeepRecentTurns: 1}.WithDefaults()
	})
	return e, srv
}

// TestContextOverflowCompactsAndRetries: a provider's "too long" is context_overflow; the
// run compacts its history and asks again, once, and goes on.
func TestContextOverflowCompactsAndRetries(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	step := 0
	e, srv := overflowRig(t, 20000, func(req fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
			return fakellm.Reply{Text: "Summary: eight research steps completed."}
		}
		step++
		if step <= 8 {
			return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", step), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"step %d"}`, step)}}}
		}
		return fakellm.Reply{Text: "done"}
	})
	evs := startAndCollect(t, e, input("overflow"))
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "events: %v", types(evs))
	fails := failureValues(evs)
	require.Len(t, fails, 1, "one context_overflow, decided once")
	assert.Equal(t, "context_overflow", string(fails[0].Kind))
	assert.Equal(t, "retry", string(fails[0].Action))
	var compacted bool
	for _, ev := range evs {
		if a, ok := ev.(*agui.ActivitySnapshot); ok && a.ActivityType == ActivityCompaction {
			compacted = true
			assert.Equal(t, "context_overflow", a.Content["reason"])
		}
	}
	assert.True(t, compacted)
	var refused int
	for _, r := range srv.Requests() {
		if r.Chars() > 20000 {
			refused++
		}
	}
	assert.Equal(t, 1, refused, "the refused request was not sent again as it was")
}

// TestContextOverflowEndsWithClearMessage: a request that is still too long after the
// compaction (here the user's own request, which is never summarised away) ends the run
// with a handoff that says what to do, not a provider error.
func TestContextOverflowEndsWithClearMessage(t *testing.T) {
	t.Parallel()
	e, _ := overflowRig(t, 20000, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "never"} })
	in := input("too-long")
	content, _ := json.Marshal(strings.Repeat("please read all of this ", 1000))
	in.Messages[0].Content = content
	evs := startAndCollect(t, e, in)
	fails := failureValues(evs)
	require.NotEmpty(t, fails)
	last := fails[len(fails)-1]
	assert.Equal(t, "context_overflow", string(last.Kind))
	assert.Equal(t, "handoff", string(last.Action))
	assert.Contains(t, last.Explanation, "larger context window")
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType(), "a handoff, not RUN_ERROR: %v", types(evs))
}

// storedConv reads the model history of the run's stored checkpoint (nil when none yet).
func storedConv(t *testing.T, st store.Store, thread, run string) []llm.Message {
	t.Helper()
	rec, err := st.GetRun(context.Background(), thread, run)
	require.NoError(t, err)
	var w durable.Work
	require.NoError(t, json.Unmarshal(rec.Work, &w))
	var cp durable.Checkpoint
	require.NoError(t, json.Unmarshal(w.Checkpoint, &cp))
	if len(cp.Conv) == 0 {
		return nil
	}
	// The messages the thread keeps are named, not copied (convrefs.go).
	conv, err := decodeConv(context.Background(), cp.Conv, &storedMessages{}, func(ctx context.Context, ids []string) (map[string]agui.Message, error) {
		msgs, err := st.LoadMessages(ctx, thread)
		out := map[string]agui.Message{}
		for _, m := range msgs {
			var am agui.Message
			require.NoError(t, json.Unmarshal(m.Data, &am))
			out[m.ID] = am
		}
		return out, err
	})
	require.NoError(t, err)
	return conv
}

// TestCompactionIsOneWrite: while the summary is being written (a kill then would lose
// the process), the stored checkpoint holds the whole old history; once it is written, the
// summary with the turns kept. Never a history with turns dropped and no summary in their
// place, nor a call without its result.
func TestCompactionIsOneWrite(t *testing.T) {
	t.Parallel()
	inSummary, release := make(chan struct{}), make(chan struct{})
	inNext, releaseNext := make(chan struct{}), make(chan struct{})
	var once, onceNext sync.Once
	var mu sync.Mutex
	step, summarised := 0, false
	model := &fakeModel{turn: func(req *llm.Request) []llm.Delta {
		if strings.HasPrefix(req.Messages[0].Content, "You maintain the memory") {
			once.Do(func() { close(inSummary) })
			<-release
			mu.Lock()
			summarised = true
			mu.Unlock()
			return []llm.Delta{{Text: "Summary: steps done."}, {Done: &llm.Completion{FinishReason: "stop"}}}
		}
		mu.Lock()
		step++
		n, after := step, summarised
		mu.Unlock()
		if after {
			onceNext.Do(func() { close(inNext) })
			<-releaseNext
		}
		if n <= 12 {
			return []llm.Delta{{ToolCall: &llm.ToolCallDelta{Index: 0, ID: fmt.Sprintf("call_%d", n), Name: "research", Arguments: fmt.Sprintf(`{"prompt":"step %d"}`, n)}},
				{Done: &llm.Completion{FinishReason: "tool_calls"}}}
		}
		return []llm.Delta{{Text: "done"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	agent := &fakeAgent{send: func(_ context.Context, req subagent.Request, _ subagent.Observer) (*subagent.Result, error) {
		return &subagent.Result{State: subagent.StateMessage, Text: req.Prompt + ": " + strings.Repeat("finding ", 250)}, nil
	}}
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := newEngine(t, model, agent, func(c *Config) {
		c.Store = st
		c.Limits.MaxIterations = 100
		c.History = history.Options{Window: windowChars / 4, KeepRecentTurns: 2}.WithDefaults()
	})
	run, err := e.StartRun(context.Background(), input("one-write"), "")
	require.NoError(t, err)
	<-inSummary
	during := storedConv(t, st, "one-write", run.RunID)
	require.NotEmpty(t, during)
	for _, m := range during {
		assert.False(t, history.IsSummary(m), "no summary is stored before it is written")
	}
	assert.Equal(t, "hello", during[0].Content, "the old history, whole from its start")
	assertCallsAnswered(t, during)
	mu.Lock()
	calls := 0
	for _, m := range during {
		calls += len(m.ToolCalls)
	}
	assert.GreaterOrEqual(t, calls, step-1, "the completed turns are in it")
	mu.Unlock()

	close(release)
	<-inNext
	var after []llm.Message
	require.Eventually(t, func() bool {
		after = storedConv(t, st, "one-write", run.RunID)
		return len(after) > 0 && history.IsSummary(after[0])
	}, 10*time.Second, 5*time.Millisecond, "the compacted history is stored")
	assert.Equal(t, "hello", after[1].Content, "the user's request is kept")
	assertCallsAnswered(t, after)
	close(releaseNext)
	evs := collect(t, run)
	require.Equal(t, agui.EventRunFinished, evs[len(evs)-1].EventType())
}

// assertCallsAnswered checks that every tool result of conv follows its call.
func assertCallsAnswered(t *testing.T, conv []llm.Message) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range conv {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		if m.Role == llm.RoleTool {
			assert.True(t, open[m.ToolCallID], "result of %s follows its call", m.ToolCallID)
		}
	}
}
