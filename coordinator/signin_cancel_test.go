package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// bearerKey carries the credentials the fake sign-in attaches (as a2a-go service
// parameters carry the real bearer token).
type bearerKey struct{}

// bearerSignIn is an A2ASignIn whose signed-in principals get "tok-<principal>".
type bearerSignIn struct{ signedIn map[string]bool }

func (bearerSignIn) Start(context.Context, string, string, string, string) (string, time.Time, error) {
	return "", time.Time{}, nil
}

func (s bearerSignIn) Authorize(ctx context.Context, principal, _ string) context.Context {
	if !s.signedIn[principal] {
		return ctx
	}
	return context.WithValue(ctx, bearerKey{}, "tok-"+principal)
}

// errUnauthenticated is what an agent that requires auth answers an anonymous call: the
// a2a package's ErrAuth, which the engine does not retry.
var errUnauthenticated = fmt.Errorf("a2a: unauthenticated: %w", subagent.ErrAuth)

// securedAgent is a fakeAgent that refuses a cancel without a bearer token, records the
// token of every cancel attempt, and fails the first failFirst attempts transiently.
type securedAgent struct {
	*fakeAgent
	mu        sync.Mutex
	failFirst int
	attempts  []string // bearer per attempt ("" for none)
}

func (s *securedAgent) Cancel(ctx context.Context, taskID string) error {
	tok, _ := ctx.Value(bearerKey{}).(string)
	s.mu.Lock()
	s.attempts = append(s.attempts, tok)
	fail := s.failFirst > 0
	if fail {
		s.failFirst--
	}
	s.mu.Unlock()
	if tok == "" {
		return errUnauthenticated
	}
	if fail {
		return errors.New("a2a: agent unavailable")
	}
	return s.fakeAgent.Cancel(ctx, taskID)
}

func (s *securedAgent) bearers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.attempts...)
}

func newSecuredEngine(t *testing.T, agent *securedAgent, mut ...func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Model: &fakeModel{turn: callThenReport("research", `{"prompt":"trip"}`)},
		Agents:        []Agent{{Name: "research", Description: "Researches.", Client: agent, Timeout: time.Minute}},
		CancelTimeout: 2 * time.Second,
		A2ASignIn:     bearerSignIn{signedIn: map[string]bool{"alice": true}}}
	for _, m := range mut {
		m(&cfg)
	}
	return newStartedEngine(t, cfg)
}

func startAs(t *testing.T, e *Engine, in *agui.RunAgentInput, owner string) []agui.Event {
	t.Helper()
	r, err := e.StartRun(context.Background(), in, owner)
	require.NoError(t, err)
	return collect(t, r)
}

// TestCancelsCarryOwnersCredentials: every CancelTask of a signed-in principal's task
// carries their credentials, wherever it is issued: the expiry sweep, an expiry found by a
// resume, a cancelled answer, the run's cancel scope and the confirmer's retries of it.
// Without them an agent that requires auth refuses the cancel and the task is orphaned.
func TestCancelsCarryOwnersCredentials(t *testing.T) {
	t.Run("expiry sweep", func(t *testing.T) {
		clk := &hitlClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
		agent := &securedAgent{fakeAgent: &fakeAgent{send: askingAgent("task-sw")}}
		e := newSecuredEngine(t, agent, func(c *Config) {
			c.Now, c.InterruptTTL, c.ExpiryInterval = clk.Now, time.Minute, 5*time.Millisecond
		})
		interruptsOf(t, startAs(t, e, input("sw"), "alice"))
		clk.add(2 * time.Minute)
		require.Eventually(t, func() bool { return len(agent.cancelled()) > 0 }, 10*time.Second, 5*time.Millisecond,
			"the sweep cancels the parked task; attempts: %v", agent.bearers())
		assert.Equal(t, []string{"task-sw"}, agent.cancelled())
		assert.Equal(t, []string{"tok-alice"}, agent.bearers())
	})

	t.Run("expiry found by a resume", func(t *testing.T) {
		clk := &hitlClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
		agent := &securedAgent{fakeAgent: &fakeAgent{send: askingAgent("task-ex")}}
		e := newSecuredEngine(t, agent, func(c *Config) { c.Now, c.InterruptTTL = clk.Now, time.Minute })
		in := interruptsOf(t, startAs(t, e, input("ex"), "alice"))[0]
		clk.add(2 * time.Minute)
		evs := startAs(t, e, resumeInput("ex", "r2", resolved(in.ID, `{"text":"x"}`)), "alice")
		assert.Equal(t, "INTERRUPT_EXPIRED", runErrorCode(t, evs))
		assert.Equal(t, []string{"task-ex"}, agent.cancelled())
		assert.Equal(t, []string{"tok-alice"}, agent.bearers())
	})

	t.Run("cancelled answer", func(t *testing.T) {
		agent := &securedAgent{fakeAgent: &fakeAgent{send: askingAgent("task-cc")}}
		e := newSecuredEngine(t, agent)
		in := interruptsOf(t, startAs(t, e, input("cc"), "alice"))[0]
		startAs(t, e, resumeInput("cc", "r2", agui.ResumeEntry{InterruptID: in.ID, Status: "cancelled"}), "alice")
		assert.Equal(t, []string{"task-cc"}, agent.cancelled())
		assert.Equal(t, []string{"tok-alice"}, agent.bearers())
	})

	t.Run("run cancelled and the cancel retried", func(t *testing.T) {
		started := make(chan struct{})
		agent := &securedAgent{failFirst: 1, fakeAgent: &fakeAgent{send: func(ctx context.Context, _ subagent.Request, obs subagent.Observer) (*subagent.Result, error) {
			obs.Task("task-run", "ctx")
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}}}
		e := newSecuredEngine(t, agent, func(c *Config) { c.CancelHorizon = 20 * time.Second })
		r, err := e.StartRun(context.Background(), input("rc"), "alice")
		require.NoError(t, err)
		<-started
		r.Cancel(ErrClientGone)
		collect(t, r)
		ctx, done := context.WithTimeout(context.Background(), 15*time.Second)
		defer done()
		require.NoError(t, e.cancels.confirm.Wait(ctx), "the retried cancel settles")
		assert.Equal(t, []string{"task-run"}, agent.cancelled(), "confirmed by a retry")
		assert.Equal(t, []string{"tok-alice", "tok-alice"}, agent.bearers(), "the first attempt and its retry")
	})

	t.Run("anonymous principal without a grant", func(t *testing.T) {
		// The control: nobody signed in, the cancel goes without credentials (and this agent
		// refuses it), so the assertions above can fail.
		agent := &securedAgent{fakeAgent: &fakeAgent{send: askingAgent("task-an")}}
		e := newSecuredEngine(t, agent)
		in := interruptsOf(t, startAs(t, e, input("an"), ""))[0]
		startAs(t, e, resumeInput("an", "r2", agui.ResumeEntry{InterruptID: in.ID, Status: "cancelled"}), "")
		assert.Empty(t, agent.cancelled())
		assert.Equal(t, []string{""}, agent.bearers())
	})
}

// TestLostRunCancelCarriesOwnersCredentials: a run taken over that cannot continue has its
// tasks cancelled with the credentials of the owner its checkpoint names.
func TestLostRunCancelCarriesOwnersCredentials(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	deadRun(t, st, "gone", deadDelegationConv(), durable.Work{A2A: []durable.Task{
		{Agent: "research", TaskID: "task-a", State: string(subagent.StateWorking), ToolCallID: "call_1"},
		{Agent: "elsewhere", TaskID: "task-b", State: string(subagent.StateWorking), ToolCallID: "call_2"},
	}}, deadDelegationEvents()...)
	agent := &securedAgent{fakeAgent: &fakeAgent{}}
	newSecuredEngine(t, agent, func(c *Config) {
		c.Store, c.Heartbeat, c.Lease = st, 20*time.Millisecond, time.Second
	})
	run, _ := waitEnded(t, st, "gone", "r-gone")
	assert.Equal(t, string(OutcomeError), run.State)
	assert.Equal(t, []string{"task-a"}, agent.cancelled())
	assert.Equal(t, []string{"tok-alice"}, agent.bearers(), "deadRun's checkpoint names alice")
}
