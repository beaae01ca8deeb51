package a2aauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/a2a"
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
// a2a.ErrAuth, without a single request reaching the agent.
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
	ag, err := a2a.New(a2a.AgentConfig{Name: "research", URL: srv.URL}, a2a.Options{})
	require.NoError(t, err)
	defer ag.Close()
	g := Guarded{Agent: ag}
	_, err = g.Send(bctx, a2a.Request{Prompt: "hi"}, a2a.Observer{})
	require.ErrorIs(t, err, a2a.ErrAuth)
	require.ErrorIs(t, err, tokenexchange.ErrRefused)
	var ee *ExchangeError
	require.True(t, errors.As(err, &ee))
	assert.Contains(t, ee.Reason(), "refused")
	_, err = g.Send(bctx, a2a.Request{Prompt: "hi", TaskID: "t1"}, a2a.Observer{})
	require.ErrorIs(t, err, a2a.ErrAuth)
	assert.Equal(t, "t1", a2a.TaskIDOf(err))
	require.ErrorIs(t, g.Cancel(bctx, "t1"), a2a.ErrAuth)
	_, err = g.CancelConfirm(bctx, "t1")
	require.ErrorIs(t, err, a2a.ErrAuth)
	_, err = g.CancelOnce(bctx, "t1")
	require.ErrorIs(t, err, a2a.ErrAuth)
	_, err = g.GetTask(bctx, "t1")
	require.ErrorIs(t, err, a2a.ErrAuth)
	_, err = g.Follow(bctx, "t1", "c1", a2a.Observer{})
	require.ErrorIs(t, err, a2a.ErrAuth)
	assert.Zero(t, requests.Load(), "nothing reached the agent")
}
