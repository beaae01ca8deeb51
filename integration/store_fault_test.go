package integration

// The store failing is a failure of the step: a real coordinator engine and HTTP
// surface, internal/demoagent's travel agent (which asks for dates on a new task), the real
// openai provider against the fake model, and a store whose writes fail on demand.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/demoagent"
	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/llm/openai"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// errDiskFull is what the failing store's writes return, as a full disk would.
var errDiskFull = errors.New("database or disk is full")

// failingStore wraps a real store; its flags make the named writes fail.
type failingStore struct {
	store.Store
	failSave, failMark atomic.Bool
}

func (s *failingStore) SaveSuspension(ctx context.Context, susp *store.Suspension) error {
	if s.failSave.Load() {
		return errDiskFull
	}
	return s.Store.SaveSuspension(ctx, susp)
}

func (s *failingStore) MarkResolved(ctx context.Context, threadID string, ids []string) error {
	if s.failMark.Load() {
		return errDiskFull
	}
	return s.Store.MarkResolved(ctx, threadID, ids)
}

// CloseSuspension records resolved interrupts too (with the suspension's deletion).
func (s *failingStore) CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	if s.failMark.Load() {
		return errDiskFull
	}
	return s.Store.CloseSuspension(ctx, threadID, runID, epoch, ids)
}

// travelModel calls the travel agent on the user's text, and reports the tool result.
func travelModel(req fakellm.Request) fakellm.Reply {
	if last := req.Last(); last.Role == "tool" {
		return fakellm.Reply{Text: "done: " + last.Content}
	}
	args, _ := json.Marshal(map[string]string{"prompt": req.Last().Content})
	return fakellm.Reply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", time.Now().UnixNano()), Name: "travel", Arguments: string(args)}}}
}

type storeFaultRig struct {
	url   string
	rec   *demoagent.Recorder
	store *failingStore
}

func startStoreFaultRig(t *testing.T) *storeFaultRig {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	rig := &storeFaultRig{rec: &demoagent.Recorder{}}

	agentSrv := httptest.NewUnstartedServer(nil)
	agentURL := "http://" + agentSrv.Listener.Addr().String()
	h, err := demoagent.NewHandler(demoagent.Options{Kind: "travel", BaseURL: agentURL, Recorder: rig.rec})
	require.NoError(t, err)
	agentSrv.Config.Handler = h
	agentSrv.Start()
	t.Cleanup(func() {
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
		agentSrv.CloseClientConnections()
		agentSrv.Close()
	})

	model := fakellm.Start(travelModel)
	t.Cleanup(model.Close)
	a2aTr, llmTr := &http.Transport{}, &http.Transport{}
	t.Cleanup(a2aTr.CloseIdleConnections)
	t.Cleanup(llmTr.CloseIdleConnections)
	m, err := openai.New(openai.Config{BaseURL: model.URL, Model: "fake", APIKey: "fake-key", HTTPClient: &http.Client{Transport: llmTr}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ag, err := subagent.Resolve(ctx, subagent.AgentConfig{Name: "travel", URL: agentURL},
		subagent.Options{HTTPClient: &http.Client{Transport: a2aTr}, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ag.Close() })

	inner, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	rig.store = &failingStore{Store: inner}
	engine := launchedEngine(t, coordinator.Config{
		Model:  m,
		Agents: []coordinator.Agent{{Name: "travel", Description: ag.Description, Skills: ag.Skills, Timeout: time.Minute, Client: ag}},
		Store:  rig.store,
		Logger: quiet,
	})
	srv := httptest.NewServer(server.New(server.Config{Engine: coordinator.NewRuns(engine, coordinator.RunsConfig{}), Logger: quiet}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = engine.Stop(sctx)
		_ = inner.Close()
	})
	rig.url = srv.URL
	return rig
}

// post runs body and returns its events, read to the end of the stream.
func (rig *storeFaultRig) post(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := postAGUI(context.Background(), rig.url, b)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs, err := readSSE(resp.Body, nil)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	return evs
}

func resumeBody(threadID, runID, interruptID, text string) map[string]any {
	body := runInput(threadID, runID, "")
	body["messages"] = []any{}
	body["resume"] = []any{map[string]any{"interruptId": interruptID, "status": "resolved", "payload": map[string]any{"text": text}}}
	return body
}

func lastOf(evs []map[string]any) map[string]any { return evs[len(evs)-1] }

func countMethod(rec *demoagent.Recorder, method string) int {
	n := 0
	for _, m := range rec.Methods() {
		if m == method {
			n++
		}
	}
	return n
}

// When the interrupt cannot be saved, the task parked at the agent is cancelled and the
// run ends with STORE_UNAVAILABLE.
func TestStoreFailureOnSuspendCancelsParkedTask(t *testing.T) {
	t.Parallel()
	rig := startStoreFaultRig(t)
	rig.store.failSave.Store(true)

	evs := rig.post(t, runInput(newThreadID("store-suspend"), "r1", "book a trip to Lisbon"))
	last := lastOf(evs)
	require.Equal(t, "RUN_ERROR", last["type"], "events: %v", eventTypes(evs))
	assert.Equal(t, "STORE_UNAVAILABLE", last["code"])

	require.Len(t, rig.rec.Cancels(), 1, "the parked task got CancelTask")
	taskID := rig.rec.Cancels()[0]
	assert.Eventually(t, func() bool { return rig.rec.LastState(taskID) == sdk.TaskStateCanceled },
		10*time.Second, 20*time.Millisecond, "the task ends canceled at the agent, not input-required")
}

// A resume whose recording fails after the answer was delivered is not reported as success;
// the same resume again recovers the task's outcome from the agent instead of sending the
// answer twice (which the agent would refuse as an invalid transition).
func TestStoreFailureOnResumeIsHonestAndRecoverable(t *testing.T) {
	t.Parallel()
	rig := startStoreFaultRig(t)
	thread := newThreadID("store-resume")

	evs := rig.post(t, runInput(thread, "r1", "book a trip to Lisbon"))
	fin := lastOf(evs)
	require.Equal(t, "RUN_FINISHED", fin["type"], "events: %v", eventTypes(evs))
	outcome, _ := fin["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"])
	ins, _ := outcome["interrupts"].([]any)
	require.Len(t, ins, 1)
	interruptID, _ := ins[0].(map[string]any)["id"].(string)
	require.NotEmpty(t, interruptID)
	require.Equal(t, 1, countMethod(rig.rec, "SendStreamingMessage"))

	// The answer reaches the agent, which completes the task; recording that fails.
	rig.store.failMark.Store(true)
	evs = rig.post(t, resumeBody(thread, "r2", interruptID, "12-19 May"))
	last := lastOf(evs)
	require.Equal(t, "RUN_ERROR", last["type"], "not reported as success: %v", eventTypes(evs))
	assert.Equal(t, "STORE_UNAVAILABLE", last["code"])
	assert.Contains(t, last["message"], "delivered")
	require.Equal(t, 2, countMethod(rig.rec, "SendStreamingMessage"), "the answer was delivered once")

	// The store is back: the same resume recovers the outcome, without sending again.
	rig.store.failMark.Store(false)
	evs = rig.post(t, resumeBody(thread, "r3", interruptID, "12-19 May"))
	fin = lastOf(evs)
	require.Equal(t, "RUN_FINISHED", fin["type"], "events: %v", eventTypes(evs))
	outcome, _ = fin["outcome"].(map[string]any)
	assert.Equal(t, "success", outcome["type"])
	assert.Equal(t, 2, countMethod(rig.rec, "SendStreamingMessage"), "nothing was sent twice")
	var results []string
	for _, ev := range eventsOfType(evs, "TOOL_CALL_RESULT") {
		results = append(results, ev["content"].(string))
	}
	require.Len(t, results, 1)
	assert.True(t, strings.HasPrefix(results[0], "[COMPLETED]"), "the outcome was recovered: %q", results[0])
	assert.Contains(t, results[0], "Booked")
	assert.NotContains(t, results[0], "invalid_transition")

	// And once recorded, a further repeat is a duplicate: nothing is sent or read again.
	gets := countMethod(rig.rec, "GetTask")
	evs = rig.post(t, resumeBody(thread, "r4", interruptID, "12-19 May"))
	assert.Equal(t, "RUN_FINISHED", lastOf(evs)["type"])
	assert.Equal(t, 2, countMethod(rig.rec, "SendStreamingMessage"))
	assert.Equal(t, gets, countMethod(rig.rec, "GetTask"))
}
