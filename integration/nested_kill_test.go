package integration

// kill -9 of the inner Baton of a nested pair (DESIGN §9b, §9c): the outer Baton A follows
// a task of the inner Baton B, whose run has charged a counting MCP server once and is
// following a task of the bottom agent when B is killed with SIGKILL.
//
//   - With a second replica of B on the same PostgreSQL store (behind a proxy that sends to
//     the first replica while it lives), the survivor takes B's run over and follows the
//     bottom task by id; A's follow of B's task continues through the proxy on the survivor
//     and A's model sees [COMPLETED]. Nothing runs twice: one charge, one bottom task.
//   - With B alone, A's model gets the contract's tag for an agent that is gone
//     ([UNREACHABLE]) and A's run ends: no hang. B started again on its SQLite file takes
//     its run over and ends the bottom task: nothing is left working at the bottom.

import (
	"context"
	"database/sql"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/fakellm"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// holdBottom is the bottom agent: each new task streams one working update and is held
// open until release is closed, then completes. It counts new tasks, follow-up calls and
// cancels.
type holdBottom struct {
	release chan struct{}
	once    sync.Once
	started chan a2a.TaskID
	tasks   atomic.Int64
	follows atomic.Int64
	cancels atomic.Int64
	mu      sync.Mutex
	states  map[a2a.TaskID]a2a.TaskState
}

func (h *holdBottom) set(id a2a.TaskID, s a2a.TaskState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.states[id] = s
}

// working lists the tasks that have not ended.
func (h *holdBottom) working() []a2a.TaskID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []a2a.TaskID
	for id, s := range h.states {
		if !s.Terminal() {
			out = append(out, id)
		}
	}
	return out
}

func (h *holdBottom) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		h.tasks.Add(1)
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		h.set(ec.TaskID, a2a.TaskStateWorking)
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working on it"))), nil) {
			return
		}
		select {
		case h.started <- ec.TaskID:
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done(): // cancelled
			return
		}
		h.set(ec.TaskID, a2a.TaskStateCompleted)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("bottom done"))), nil)
	}
}

func (h *holdBottom) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		h.cancels.Add(1)
		h.set(ec.TaskID, a2a.TaskStateCanceled)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// holdInterceptor counts the follow-up calls (after a takeover: the new owner following
// the task by id).
type holdInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	h *holdBottom
}

func (i holdInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if m := cc.Method(); m == "GetTask" || m == "SubscribeToTask" {
		i.h.follows.Add(1)
	}
	return ctx, nil, nil
}

func startHoldBottom(t *testing.T) (*holdBottom, string) {
	t.Helper()
	h := &holdBottom{release: make(chan struct{}), started: make(chan a2a.TaskID, 1),
		states: map[a2a.TaskID]a2a.TaskState{}}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	card := &a2a.AgentCard{
		Name: "bottom", Description: "Works until released.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(ts.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Capabilities: a2a.AgentCapabilities{Streaming: true},
		Skills:       []a2a.AgentSkill{{ID: "work", Name: "Work", Description: "Works.", Tags: []string{"work"}}},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(h, a2asrv.WithCallInterceptors(holdInterceptor{h: h}))))
	return h, ts.URL
}

// failoverProxy forwards every request to the first of backends that accepts a
// connection, keeping the request's Host (the inner Baton's card names the proxy).
func failoverProxy(t *testing.T, backends ...string) string {
	t.Helper()
	var addrs []string
	for _, b := range backends {
		u, err := url.Parse(b)
		require.NoError(t, err)
		addrs = append(addrs, u.Host)
	}
	first, _ := url.Parse(backends[0])
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var err error
		for _, a := range addrs {
			var c net.Conn
			if c, err = d.DialContext(ctx, network, a); err == nil {
				return c, nil
			}
		}
		return nil, err
	}}
	rp := &httputil.ReverseProxy{FlushInterval: -1, Transport: tr, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(first)
		pr.Out.Host = pr.In.Host
	}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bufferBody(r)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); tr.CloseIdleConnections() })
	return ts.URL
}

// nestedKillModel scripts both levels: the outer Baton (offered "inner") delegates the
// user's text to it; the inner one (offered "pay__charge") charges once, then delegates to
// "bottom", then says it is done.
func nestedKillModel(req fakellm.Request) fakellm.Reply {
	tools, results := offeredTools(req), resultsSoFar(req)
	switch {
	case tools["inner"] && results == 0:
		return callTool("inner", `{"prompt":"charge, then ask the bottom"}`)
	case tools["pay__charge"] && results == 0:
		return callTool("pay__charge", `{"item":"nested"}`)
	case tools["pay__charge"] && results == 1:
		return callTool("bottom", `{"prompt":"work"}`)
	}
	return fakellm.Reply{Text: modelDoneText}
}

// nestedKillInner is the inner Baton's config: the bottom agent, the counting MCP server,
// the A2A server, short leases.
func nestedKillInner(llmURL, bottom, mcpURL, store string) string {
	return testConfig{LLMURL: llmURL, Store: store, Grace: "1s",
		Agents: []agentEntry{{Name: "bottom", URL: bottom}},
		MCP:    []mcpServerEntry{{Name: "pay", URL: mcpURL}}}.yaml() +
		a2aServerYAML("inner-baton") + "replication:\n  heartbeat: 200ms\n  lease: 1s\n"
}

// waitTaskRecorded waits until a run's work document in the store names the bottom task:
// from then on a replica that takes the run over follows the task by id (before, the
// call is in doubt, as it may or may not have reached the agent).
func waitTaskRecorded(t *testing.T, dsn string, taskID a2a.TaskID) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM runs WHERE position($1 in work) > 0`, string(taskID)).Scan(&n)
		return err == nil && n > 0
	}, eventualWait, 10*time.Millisecond, "the inner Baton never recorded the bottom task")
}

// innerResult is the tool result the outer model got for its call of the inner Baton.
func innerResult(t *testing.T, evs []map[string]any) string {
	t.Helper()
	res := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	content, _ := res[0]["content"].(string)
	return content
}

func terminalEvents(evs []map[string]any) int {
	return len(eventsOfType(evs, "RUN_FINISHED")) + len(eventsOfType(evs, "RUN_ERROR"))
}

// nestedKill is the set-up of the nested kill tests: the outer Baton A delegates to the
// inner Baton B (one or more replicas of it on one PostgreSQL store), which charges a
// counting MCP server once and then follows a task of the held bottom agent; one fake model
// scripts both levels.
type nestedKill struct {
	dsn    string
	bottom *holdBottom
	pay    *countingMCP
	// cfg and env start a replica of B.
	cfg string
	env []string
	// kills holds the kill of each replica of B, in the order started.
	kills []func()
	outer string
}

// startNestedKill starts B as replicas replicas and A delegating to it: to the one replica
// directly, or to several through a failoverProxy that sends to the first while it lives.
func startNestedKill(t *testing.T, replicas int) nestedKill {
	t.Helper()
	n := nestedKill{dsn: pgtest.DSN(t), env: []string{llmKeyEnv + "=fake-key"}}
	model := fakellm.Start(nestedKillModel)
	t.Cleanup(model.Close)
	var bottomURL string
	n.bottom, bottomURL = startHoldBottom(t)
	n.pay = startCountingMCP(t)
	n.cfg = nestedKillInner(model.URL, bottomURL, n.pay.URL, n.dsn)
	var urls []string
	for range replicas {
		u, kill := startKillableCoordinator(t, n.cfg, n.env)
		urls, n.kills = append(urls, u), append(n.kills, kill)
	}
	inner := urls[0]
	if replicas > 1 {
		inner = failoverProxy(t, urls...)
	}
	n.outer = startCoordinator(t, testConfig{LLMURL: model.URL, Grace: "1s",
		Agents: []agentEntry{{Name: "inner", URL: inner, InputRequired: "ask_user", Timeout: "90s"}}}.yaml())
	return n
}

// startUntilBottom starts a run on a new thread at A and waits until B has started the
// bottom task and recorded it in its run. It returns the test's deadline (two minutes from
// the start) and a channel that gets A's events once A's run has ended.
func (n nestedKill) startUntilBottom(t *testing.T, threadPrefix string) (context.Context, <-chan []map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	done := streamRun(ctx, n.outer, runInput(newThreadID(threadPrefix), "r1", "inner: go"))
	select {
	case id := <-n.bottom.started:
		waitTaskRecorded(t, n.dsn, id)
	case <-ctx.Done():
		t.Fatal("the bottom task never started")
	}
	return ctx, done
}

// TestNestedKillInnerTakeover: B's owner replica is killed while A follows B's task; the
// other replica takes B's run over and A sees it complete; one charge, one bottom task.
func TestNestedKillInnerTakeover(t *testing.T) {
	t.Parallel()
	n := startNestedKill(t, 2)
	bottom, pay := n.bottom, n.pay
	ctx, done := n.startUntilBottom(t, "nested-kill")
	require.EqualValues(t, 1, pay.charges.Load(), "B charged before delegating")
	followsBefore := bottom.follows.Load()
	n.kills[0]()

	// The survivor takes B's run over and follows the bottom task by id; then the bottom
	// completes.
	require.Eventually(t, func() bool { return bottom.follows.Load() > followsBefore }, 30*time.Second, 20*time.Millisecond,
		"the survivor never followed the bottom task")
	bottom.once.Do(func() { close(bottom.release) })

	var evs []map[string]any
	select {
	case evs = <-done:
	case <-ctx.Done():
		t.Fatal("A's run did not end")
	}
	outcome, _ := finished(evs)
	assert.Equal(t, "success", outcome, "events: %v", eventTypes(evs))
	assert.Equal(t, 1, terminalEvents(evs))
	got := innerResult(t, evs)
	assert.True(t, strings.HasPrefix(got, "[COMPLETED]"), "A's model sees B's task complete: %q", got)
	assert.Contains(t, got, modelDoneText, "B's answer, written by the survivor")
	assert.EqualValues(t, 1, pay.charges.Load(), "nothing ran twice: one charge")
	assert.EqualValues(t, 1, bottom.tasks.Load(), "nothing ran twice: one bottom task")
	assert.Zero(t, bottom.cancels.Load())
	assert.Empty(t, bottom.working(), "no task left working at the bottom")
}

// TestNestedKillInnerAlone: B, with no other replica, is killed while A follows its task:
// A's model gets [UNREACHABLE] and A's run ends (no hang). B started again on its store
// takes its run over: the bottom task is followed to its end, nothing is left working
// there, and the charge is not repeated.
func TestNestedKillInnerAlone(t *testing.T) {
	t.Parallel()
	n := startNestedKill(t, 1)
	bottom, pay := n.bottom, n.pay
	ctx, done := n.startUntilBottom(t, "nested-kill-alone")
	n.kills[0]()

	var evs []map[string]any
	select {
	case evs = <-done:
	case <-ctx.Done():
		t.Fatal("A's run hangs on a dead inner Baton")
	}
	assert.Equal(t, 1, terminalEvents(evs), "events: %v", eventTypes(evs))
	got := innerResult(t, evs)
	assert.True(t, strings.HasPrefix(got, "[UNREACHABLE]"), "A's model is told the inner Baton is gone: %q", got)

	// B again, on its store: its run goes on from its checkpoint and follows the bottom
	// task; released, the bottom completes and nothing is left working.
	followsBefore := bottom.follows.Load()
	startKillableCoordinator(t, n.cfg, n.env)
	require.Eventually(t, func() bool { return bottom.follows.Load() > followsBefore }, 30*time.Second, 20*time.Millisecond,
		"the restarted inner Baton never followed the bottom task")
	bottom.once.Do(func() { close(bottom.release) })
	require.Eventually(t, func() bool { return len(bottom.working()) == 0 }, 30*time.Second, 20*time.Millisecond,
		"a task is left working at the bottom")
	assert.EqualValues(t, 1, pay.charges.Load(), "the charge is not repeated")
	assert.EqualValues(t, 1, bottom.tasks.Load(), "one bottom task")
}
