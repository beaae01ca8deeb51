package coordinator

import (
	"context"
	"encoding/json"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// deltaFlood streams n tiny deltas, or until its context ends; sent counts them.
type deltaFlood struct {
	n    int
	sent *atomic.Int64
}

func (m deltaFlood) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		for range m.n {
			if ctx.Err() != nil {
				yield(llm.Delta{}, ctx.Err())
				return
			}
			m.sent.Add(1)
			if !yield(llm.Delta{Text: "."}, nil) {
				return
			}
		}
		yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
	}
}

// A run that produces more than server.max_events_per_run events has its work cancelled
// and ends with RUN_ERROR EVENT_LIMIT: its stream and its stored log hold at most the
// limit, well formed (what was opened is closed before the terminal event).
func TestEventLimitEndsTheRun(t *testing.T) {
	const limit = 500
	var sent atomic.Int64
	e := newEngine(t, deltaFlood{n: 100000, sent: &sent}, &fakeAgent{}, func(c *Config) { c.MaxEventsPerRun = limit })
	r, err := e.StartRun(context.Background(), input("flood"), "")
	require.NoError(t, err)
	evs := collect(t, r)
	<-r.Done()
	require.NotEmpty(t, evs)
	last, ok := evs[len(evs)-1].(*agui.RunError)
	require.True(t, ok, "the run ends with RUN_ERROR, got %s", evs[len(evs)-1].EventType())
	assert.Equal(t, CodeEventLimit, last.Code)
	assert.LessOrEqual(t, len(evs), limit, "live events")
	assert.Less(t, sent.Load(), int64(100000), "the model's stream was cancelled")
	assert.Equal(t, agui.EventTextMessageEnd, evs[len(evs)-2].EventType(), "the open message is closed first")

	r.elog.WaitEnded()
	stored, err := e.cfg.Store.Events(context.Background(), r.ThreadID, r.RunID, 0, store.MaxEventsRead)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(stored), limit, "stored events")
	var term struct{ Type, Code string }
	require.NoError(t, json.Unmarshal(stored[len(stored)-1].Data, &term))
	assert.Equal(t, "RUN_ERROR", term.Type)
	assert.Equal(t, CodeEventLimit, term.Code)
}
