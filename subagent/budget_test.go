package subagent

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSendBudget: a request's Budget reaches the agent as the message metadata
// baton/budget (on every binding), and the usage the agent reports in its final status
// for this message comes back in the Result, bounded; a report about another message, or
// none, is no usage.
func TestSendBudget(t *testing.T) {
	leakCheck(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := startPeer(t, peerOptions{card: v.card, streaming: v.streaming})
			a := resolve(t, p, v.force)
			res, err := a.Send(testCtx(t), Request{Prompt: "budget", Depth: 1, Budget: &Budget{Tokens: 4000, CostUSD: 0.5}}, Observer{})
			require.NoError(t, err)
			assert.JSONEq(t, `{"tokens":4000,"costUsd":0.5}`, strings.TrimPrefix(res.Text, "budget="))
			require.NotNil(t, res.Usage, "the agent's report")
			assert.Equal(t, Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.25, MessageID: res.Usage.MessageID}, *res.Usage)
			assert.NotEmpty(t, res.Usage.MessageID)

			res, err = a.Send(testCtx(t), Request{Prompt: "budget"}, Observer{})
			require.NoError(t, err)
			assert.Equal(t, "budget=null", res.Text, "no budget, no metadata")

			res, err = a.Send(testCtx(t), Request{Prompt: "budget stale"}, Observer{})
			require.NoError(t, err)
			assert.Nil(t, res.Usage, "a report about another message is not this one's")

			res, err = a.Send(testCtx(t), Request{Prompt: "budget negative"}, Observer{})
			require.NoError(t, err)
			require.NotNil(t, res.Usage)
			assert.Equal(t, int64(0), res.Usage.InputTokens, "never below zero")

			res, err = a.Send(testCtx(t), Request{Prompt: "budget huge"}, Observer{})
			require.NoError(t, err)
			require.NotNil(t, res.Usage)
			assert.Equal(t, int64(MaxReportedTokens), res.Usage.InputTokens, "never beyond the bound")
		})
	}
}

func TestParseBudget(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   any
		want Budget
	}{
		{map[string]any{"tokens": 100.0}, Budget{Tokens: 100}},
		{map[string]any{"costUsd": 0.25}, Budget{CostUSD: 0.25}},
		{map[string]any{"tokens": 5.0, "costUsd": 1.0, "other": "ignored"}, Budget{Tokens: 5, CostUSD: 1}},
		{Budget{Tokens: 3}.Metadata(), Budget{Tokens: 3}},
	}
	for _, c := range good {
		b, err := ParseBudget(c.in)
		require.NoError(t, err, "%v", c.in)
		require.NotNil(t, b)
		assert.Equal(t, c.want, *b)
	}
	b, err := ParseBudget(nil)
	assert.NoError(t, err)
	assert.Nil(t, b, "none")
	for _, bad := range []any{
		"100", 100.0, []any{1.0}, map[string]any{},
		map[string]any{"tokens": -1.0}, map[string]any{"tokens": 0.0}, map[string]any{"tokens": 1.5},
		map[string]any{"tokens": "100"}, map[string]any{"tokens": 1e300},
		map[string]any{"costUsd": -0.5}, map[string]any{"costUsd": 0.0}, map[string]any{"costUsd": 2e9},
		map[string]any{"costUsd": math.NaN()}, map[string]any{"tokens": 10.0, "costUsd": -1.0},
	} {
		b, err := ParseBudget(bad)
		assert.Error(t, err, "%#v", bad)
		assert.Nil(t, b, "%#v", bad)
	}
}

func TestParseUsage(t *testing.T) {
	t.Parallel()
	u, err := ParseUsage(map[string]any{"inputTokens": 10.0, "outputTokens": 2.0, "costUsd": 0.5, "messageId": "m1"}, "m1")
	require.NoError(t, err)
	assert.Equal(t, &Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.5, MessageID: "m1"}, u)
	u, err = ParseUsage(map[string]any{"inputTokens": -10.0, "outputTokens": 1e30, "costUsd": -3.0, "messageId": "m1"}, "m1")
	require.NoError(t, err)
	assert.Equal(t, &Usage{InputTokens: 0, OutputTokens: MaxReportedTokens, CostUSD: 0, MessageID: "m1"}, u, "bounded")
	u, err = ParseUsage(map[string]any{"costUsd": 1e99, "messageId": "m1"}, "m1")
	require.NoError(t, err)
	assert.Equal(t, float64(MaxReportedUSD), u.CostUSD)
	u, err = ParseUsage(map[string]any{"inputTokens": 10.0, "messageId": "m0"}, "m1")
	assert.NoError(t, err)
	assert.Nil(t, u, "another message's")
	u, err = ParseUsage(map[string]any{"inputTokens": 10.0}, "")
	assert.NoError(t, err)
	assert.Nil(t, u, "no message")
	_, err = ParseUsage(map[string]any{"inputTokens": "ten", "messageId": "m1"}, "m1")
	assert.Error(t, err)
	_, err = ParseUsage("nope", "m1")
	assert.Error(t, err)
}
