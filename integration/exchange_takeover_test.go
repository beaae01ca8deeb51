package integration

// Token exchange across a takeover: the replica that runs alice's delegation to an agent in
// auth mode exchange is killed (SIGKILL) while the agent's task is open; the survivor takes
// the run over and follows the task by id. The agent refuses every call without a valid
// token for its audience, so the survivor can follow only by exchanging alice's token
// itself - from the subject token sealed in the store, as no request of alice's reached it.

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// heldAgent streams one working update, then holds its task open until the first
// follow-up call (GetTask or SubscribeToTask) with a valid token, and completes it with the
// subject of the token that started it. Every call without a valid token is refused and
// counted.
type heldAgent struct {
	v       *oidc.IDTokenVerifier
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	calls   []string // "<method> sub=<sub>"
	refused int
}

func (h *heldAgent) sub(ctx context.Context, cc *a2asrv.CallContext) string {
	v, ok := cc.ServiceParams().Get("authorization")
	if !ok || len(v) == 0 {
		return ""
	}
	raw, ok := strings.CutPrefix(v[0], "Bearer ")
	if !ok {
		return ""
	}
	tok, err := h.v.Verify(ctx, raw)
	if err != nil {
		return ""
	}
	return tok.Subject
}

func (h *heldAgent) log() (calls []string, refused int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...), h.refused
}

// heldInterceptor authenticates every call.
type heldInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	h *heldAgent
}

func (i heldInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	sub := i.h.sub(ctx, cc)
	i.h.mu.Lock()
	defer i.h.mu.Unlock()
	if sub == "" {
		i.h.refused++
		return ctx, nil, a2a.ErrUnauthenticated
	}
	i.h.calls = append(i.h.calls, cc.Method()+" sub="+sub)
	if m := cc.Method(); m == "GetTask" || m == "SubscribeToTask" {
		i.h.once.Do(func() { close(i.h.release) })
	}
	return ctx, nil, nil
}

func (h *heldAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		sub := ""
		if cc, ok := a2asrv.CallContextFrom(ctx); ok {
			sub = h.sub(ctx, cc)
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working on it"))), nil) {
			return
		}
		select {
		case <-h.release:
		case <-time.After(2 * time.Minute):
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done for sub="+sub))), nil)
	}
}

func (h *heldAgent) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
}

func startHeldAgent(t *testing.T, v *oidc.IDTokenVerifier) (string, *heldAgent) {
	t.Helper()
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	card := &a2a.AgentCard{
		Name: "research", Description: "Works for the user.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(ts.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Streaming: true},
		Skills:       []a2a.AgentSkill{{ID: "work", Name: "Work", Description: "Works.", Tags: []string{"work"}}},
	}
	h := &heldAgent{v: v, release: make(chan struct{})}
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(h, a2asrv.WithCallInterceptors(heldInterceptor{h: h}))))
	return ts.URL, h
}

// startKillableCoordinator starts a coordinator with env; the returned func kills it with
// SIGKILL (its Cleanup then expects nothing of its exit).
func startKillableCoordinator(t *testing.T, cfg string, env []string) (string, func()) {
	t.Helper()
	bin := buildBinaries(t)["coordinator"]
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		path := filepath.Join(t.TempDir(), "baton.yaml")
		require.NoError(t, os.WriteFile(path, []byte("listen: 127.0.0.1:"+strconv.Itoa(freePort(t))+"\n"+cfg), 0o600))
		var p *proc
		p, err = startProcErr(t, "coordinator", []string{bin, "--config", path, "--log-level", "debug"},
			env, readyOnLine(`Baton coordinator listening on (http://\S+)`))
		if err == nil {
			killed := false
			t.Cleanup(func() {
				if !killed {
					p.Stop()
				}
			})
			return p.Match[1], func() {
				killed = true
				require.NoError(t, syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL))
				select {
				case <-p.Done():
				case <-time.After(coordinatorExitBound):
					t.Fatal("the coordinator did not die of SIGKILL")
				}
			}
		}
	}
	t.Fatalf("starting the coordinator: %v", err)
	return "", nil
}

func TestTokenExchangeTakeover(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	p := startIDP(t)
	tokenURL, exchanges := countingProxy(t, p.issuer)
	agentURL, agent := startHeldAgent(t, audienceVerifier(t, p.issuer, "research-agent"))
	llm := startFakeLLM(t)
	cfg := exchangeConfig{LLMURL: llm.URL, Issuer: p.issuer, TokenURL: tokenURL + "/token", AgentURL: agentURL,
		Store: dsn, Grace: "1s", Replication: "  heartbeat: 200ms\n  lease: 1s\n"}.yaml()
	a, killA := startKillableCoordinator(t, cfg, exchangeEnv())
	b, _ := startKillableCoordinator(t, cfg, exchangeEnv())
	alice := p.token(t, "alice", "urn:baton")

	// alice's run on a: read its stream until the agent's task streams its first update.
	thread := newThreadID("ex-takeover")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a+"/agui",
		strings.NewReader(string(mustJSON(t, runInput(thread, "r1", "research: long work")))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+alice)
	live, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, live.StatusCode)
	s := newTakeoverStream(live.Body)
	var lastID int64
	for {
		f, ok := s.next(t)
		require.True(t, ok, "the live stream ended before the agent's update")
		lastID = f.ID
		if f.Event["type"] == "TEXT_MESSAGE_CONTENT" && f.Event["subagentRunId"] != nil {
			break
		}
	}
	require.EqualValues(t, 1, exchanges.Load(), "a exchanged alice's token once")
	killA()
	live.Body.Close()

	// Follow the run on the survivor as alice: it takes the run over, follows the task with
	// its own exchange of alice's stored token, and the run ends with the agent's answer.
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, b+"/agui/threads/"+thread+"/runs/r1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	fs := newTakeoverStream(resp.Body)
	var last map[string]any
	result := ""
	for {
		f, ok := fs.next(t)
		if !ok {
			break
		}
		if f.Event["type"] == "TOOL_CALL_RESULT" {
			result, _ = f.Event["content"].(string)
		}
		if typ := f.Event["type"]; typ == "RUN_FINISHED" || typ == "RUN_ERROR" {
			last = f.Event
			break
		}
	}
	require.NotNil(t, last, "the run did not end on the survivor")
	assert.Equal(t, "RUN_FINISHED", last["type"], "%v", last)
	assert.Contains(t, result, "done for sub=alice")
	calls, refused := agent.log()
	assert.Zero(t, refused, "no call reached the agent without alice's token: %v", calls)
	followed := false
	for _, c := range calls {
		followed = followed || c == "GetTask sub=alice" || c == "SubscribeToTask sub=alice"
	}
	assert.True(t, followed, "the survivor followed the task as alice: %v", calls)
	assert.EqualValues(t, 2, exchanges.Load(), "the survivor exchanged alice's stored token itself")
}
