package server

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
)

// usageModel answers every turn with text and the usage it reports.
type usageModel struct{ u llm.Usage }

func (m usageModel) Stream(context.Context, *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		if yield(llm.Delta{Text: "hi"}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: "stop", Usage: m.u}}, nil)
		}
	}
}

// TestThreadUsageAndDailyBudget: the thread read carries the thread's usage; once the
// principal's day is spent, a new run is refused with 429 BUDGET_EXCEEDED before it
// starts, saying when the day resets.
func TestThreadUsageAndDailyBudget(t *testing.T) {
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	meter := spend.NewMeter(spend.MeterConfig{
		Pricer: spend.NewPricer(config.LLM{Model: "m", Prices: config.Prices{InputPerMTok: 2, OutputPerMTok: 10}}),
		Ledger: st.(spend.Ledger), Daily: spend.Limits{Tokens: 1500}, WarnAt: 0.8})
	e := newStartedEngine(t, coordinator.Config{Model: usageModel{llm.Usage{InputTokens: 1000, OutputTokens: 500}}, Store: st, Spend: meter})
	srv := httptest.NewServer(New(Config{Engine: runsOf(e), AuthTokens: []string{"alpha", "beta"}}))
	t.Cleanup(srv.Close)
	alice, bob := []string{"Authorization", "Bearer alpha"}, []string{"Authorization", "Bearer beta"}

	evs := readEvents(t, post(t, srv.URL+"/agui", body("t1", "r1", ""), alice...))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	doc := decodeJSON(t, get(t, srv.URL+"/agui/threads/t1", alice...))
	assert.Equal(t, map[string]any{"inputTokens": 1000.0, "outputTokens": 500.0, "costUsd": 0.007}, doc["usage"])

	resp := post(t, srv.URL+"/agui", body("t2", "r2", ""), alice...)
	defer resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.LessOrEqual(t, secs, int(24*time.Hour/time.Second))
	assert.Positive(t, secs)
	e2 := decodeJSON(t, resp)
	assert.Equal(t, "BUDGET_EXCEEDED", e2["error"])
	assert.Contains(t, e2["message"], "resets at")

	evs = readEvents(t, post(t, srv.URL+"/agui", body("t3", "r3", ""), bob...))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"], "another principal's day is its own")
}
