package coordinator

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/llm"
)

// cutModel breaks its first attempt in the middle of a tool call's arguments, then answers
// the same call, under the same provider id, in full.
type cutModel struct {
	mu       sync.Mutex
	attempts int
}

func (m *cutModel) Stream(_ context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	m.mu.Lock()
	m.attempts++
	n := m.attempts
	m.mu.Unlock()
	return func(yield func(llm.Delta, error) bool) {
		if !yield(llm.Delta{Text: "Asking the frontend."}, nil) {
			return
		}
		if !yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, ID: "call_1", Name: "show"}}, nil) {
			return
		}
		if n == 1 {
			if yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: `{"prompt": "o`}}, nil) {
				yield(llm.Delta{}, &llm.Error{Kind: llm.ErrNetwork, Message: "the model stream ended before the turn finished"})
			}
			return
		}
		for _, a := range []string{`{"prompt":`, ` "ok"}`} {
			if !yield(llm.Delta{ToolCall: &llm.ToolCallDelta{Index: 0, Arguments: a}}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}, nil)
	}
}

// A model stream cut in the middle of a tool call, retried: the client sees one call, under
// an id the failed attempt did not use, with the retry's arguments only, closed.
func TestRetriedTurnStreamsOnlyTheGoodAttemptsCalls(t *testing.T) {
	m := &cutModel{}
	e := newStartedEngine(t, Config{Model: m, Policy: &failure.DefaultPolicy{BackoffBase: time.Millisecond, Jitter: func(time.Duration) time.Duration { return 0 }}})
	in := input("cut")
	in.Tools = []agui.Tool{{Name: "show", Description: "show a prompt", Parameters: []byte(`{"type":"object"}`)}}
	r, err := e.StartRun(context.Background(), in, "")
	require.NoError(t, err)
	evs := collect(t, r)
	require.Equal(t, 2, m.attempts, "the broken attempt was retried once")

	var starts []*agui.ToolCallStart
	args := map[string]string{}
	ends := map[string]int{}
	texts := map[string]int{} // text message id: starts minus ends
	for _, ev := range evs {
		switch e := ev.(type) {
		case *agui.ToolCallStart:
			starts = append(starts, e)
		case *agui.ToolCallArgs:
			args[e.ToolCallID] += e.Delta
		case *agui.ToolCallEnd:
			ends[e.ToolCallID]++
		case *agui.TextMessageStart:
			texts[e.MessageID]++
		case *agui.TextMessageEnd:
			texts[e.MessageID]--
		}
	}
	require.Len(t, starts, 1, "only the good attempt's call reaches the client: %v", types(evs))
	id := starts[0].ToolCallID
	assert.NotEqual(t, "call_1", id, "the retry does not reuse the failed attempt's id")
	assert.Equal(t, "show", starts[0].ToolCallName)
	assert.Equal(t, map[string]string{id: `{"prompt": "ok"}`}, args, "no merged arguments")
	assert.Equal(t, map[string]int{id: 1}, ends, "the call is closed once")
	for mid, open := range texts {
		assert.Zero(t, open, "text message %s is closed", mid)
	}
	fin := evs[len(evs)-1].(*agui.RunFinished)
	assert.Equal(t, []string{id}, fin.Outcome.PendingToolCallIDs)
}
