package a2aauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/subagent"
	"github.com/baton-dev/baton/tokenexchange"
)

type fakeExchanger map[string]string // principal -> token; absent: refused

func (f fakeExchanger) Token(_ context.Context, principal string, _ *tokenexchange.Target) (string, error) {
	if tok, ok := f[principal]; ok {
		return tok, nil
	}
	return "", tokenexchange.ErrRefused
}

// TestExchangeAuthorize: a successful exchange becomes the Authorization service parameter
// of the agent's calls; a failed one makes Guarded end every call with an error wrapping
// subagent.ErrAuth, without a single request reaching the agent.
func TestExchangeAuthorize(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	ex := NewExchange(fakeExchanger{"alice": "tok-alice"}, map[string]*tokenexchange.Target{"research": {Name: "research"}})
	assert.True(t, ex.Has("research"))
	assert.False(t, ex.Has("other"))
	assert.False(t, (*Exchange)(nil).Has("research"))

	ctx := context.Background()
	assert.Equal(t, ctx, ex.Authorize(ctx, "alice", "other"), "an agent not in mode exchange gets ctx itself")
	actx := ex.Authorize(ctx, "alice", "research")
	assert.NotEqual(t, ctx, actx, "alice's token is attached (its header is checked end to end by integration.TestTokenExchange)")
	assert.NoError(t, failure(actx))

	bctx := ex.Authorize(ctx, "bob", "research")
	require.Error(t, failure(bctx))
	ag, err := subagent.New(subagent.AgentConfig{Name: "research", URL: srv.URL}, subagent.Options{})
	require.NoError(t, err)
	defer ag.Close()
	g := Guarded{Agent: ag}
	_, err = g.Send(bctx, subagent.Request{Prompt: "hi"}, subagent.Observer{})
	require.ErrorIs(t, err, subagent.ErrAuth)
	require.ErrorIs(t, err, tokenexchange.ErrRefused)
	var ee *ExchangeError
	require.True(t, errors.As(err, &ee))
	assert.Contains(t, ee.Reason(), "refused")
	_, err = g.Send(bctx, subagent.Request{Prompt: "hi", TaskID: "t1"}, subagent.Observer{})
	require.ErrorIs(t, err, subagent.ErrAuth)
	assert.Equal(t, "t1", subagent.TaskIDOf(err))
	require.ErrorIs(t, g.Cancel(bctx, "t1"), subagent.ErrAuth)
	_, err = g.CancelConfirm(bctx, "t1")
	require.ErrorIs(t, err, subagent.ErrAuth)
	_, err = g.CancelOnce(bctx, "t1")
	require.ErrorIs(t, err, subagent.ErrAuth)
	_, err = g.GetTask(bctx, "t1")
	require.ErrorIs(t, err, subagent.ErrAuth)
	_, err = g.Follow(bctx, "t1", "c1", subagent.Observer{})
	require.ErrorIs(t, err, subagent.ErrAuth)
	assert.Zero(t, requests.Load(), "nothing reached the agent")
}

// TestExchangeRedirectIsAuthRequired: a token endpoint that redirects fails the exchange
// without following it, and the model gets [AUTH_REQUIRED] saying why; nothing reaches
// the agent or the redirect's target.
func TestExchangeRedirectIsAuthRequired(t *testing.T) {
	var elsewhere, agentRequests atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	defer ep.Close()
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agentRequests.Add(1)
		http.NotFound(w, r)
	}))
	defer agentSrv.Close()
	x := tokenexchange.New(tokenexchange.Config{Subjects: subjectOf("alice-jwt")})
	ex := NewExchange(x, map[string]*tokenexchange.Target{"research": {Name: "research", TokenURL: ep.URL, ClientID: "baton", ClientSecret: "s"}})
	ag, err := subagent.New(subagent.AgentConfig{Name: "research", URL: agentSrv.URL}, subagent.Options{})
	require.NoError(t, err)
	defer ag.Close()
	req := subagent.Request{Prompt: "hi"}
	_, err = Guarded{Agent: ag}.Send(ex.Authorize(context.Background(), "alice", "research"), req, subagent.Observer{})
	require.ErrorIs(t, err, tokenexchange.ErrRedirected)
	out := bridge.FromA2AError("research", req, err, nil)
	assert.True(t, strings.HasPrefix(out, "[AUTH_REQUIRED"), out)
	assert.Contains(t, out, "redirect")
	assert.Zero(t, elsewhere.Load(), "the redirect was not followed")
	assert.Zero(t, agentRequests.Load(), "nothing reached the agent")
}

type subjectOf string

func (s subjectOf) Subject(context.Context, string) (string, error) { return string(s), nil }
