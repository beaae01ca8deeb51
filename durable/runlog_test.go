package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// ReadLog reads a log longer than one page of the store whole and in order; LastSeq is its
// last number.
func TestReadLogPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	epoch, err := st.BeginRun(ctx, "t", "r", "replica-a", time.Minute)
	require.NoError(t, err)
	n := 2*store.MaxEventsRead + 7
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = store.Event{Seq: int64(i + 1), Data: json.RawMessage(fmt.Sprintf(`{"type":"CUSTOM","n":%d}`, i+1))}
	}
	require.NoError(t, st.AppendEvents(ctx, "t", "r", epoch, evs))

	got, err := ReadLog(ctx, st, "t", "r")
	require.NoError(t, err)
	require.Len(t, got, n)
	for i, ev := range got {
		require.Equal(t, int64(i+1), ev.Seq)
	}
	assert.Equal(t, int64(n), LastSeq(got))
	assert.Zero(t, LastSeq(nil))

	none, err := ReadLog(ctx, st, "t", "other")
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TerminalState says how a log that ends with a terminal event ended, and "" for any other.
func TestTerminalState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ last, want string }{
		{`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`, EndCompleted},
		{`{"type":"RUN_FINISHED","outcome":{"type":"success"}}`, EndCompleted},
		{`{"type":"RUN_FINISHED","outcome":{"type":"interrupt","interrupts":[]}}`, EndInterrupt},
		{`{"type":"RUN_FINISHED","outcome":{"type":"cancelled"}}`, EndCancelled},
		{`{"type":"RUN_ERROR","code":"RUN_LOST","message":"lost"}`, EndError},
		{`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, ""},
		{`not json`, ""},
	} {
		evs := []store.Event{
			{Seq: 1, Data: json.RawMessage(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`)},
			{Seq: 2, Data: json.RawMessage(c.last)},
		}
		assert.Equal(t, c.want, TerminalState(evs), c.last)
	}
	assert.Empty(t, TerminalState(nil))
}
