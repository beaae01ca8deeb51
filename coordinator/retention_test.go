package coordinator

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestEventRetentionSweepsEveryBackend: the engine itself prunes event logs past
// server.event_retention on every backend: a finished run's whole log is gone once it is
// older than the retention, and its record with it (Store.SweepRuns), while the thread's
// messages stay.
func TestEventRetentionSweepsEveryBackend(t *testing.T) {
	backends := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "memory:" }},
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "baton.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := store.Open(ctx, be.dsn(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			m := &fakeModel{turn: func(*llm.Request) []llm.Delta {
				return []llm.Delta{{Text: "Hel"}, {Text: "lo"}, {Done: &llm.Completion{FinishReason: "stop"}}}
			}}
			e := newEngine(t, m, &fakeAgent{}, func(c *Config) {
				c.Store = st
				// Long enough that the log is still there when the test reads it right
				// after the run, on a loaded machine under the race detector (one second
				// was not: a CI run read it after the sweep).
				c.EventRetention = 5 * time.Second
				c.Heartbeat = 20 * time.Millisecond
			})
			r, err := e.StartRun(context.Background(), input("kept"), "")
			require.NoError(t, err)
			evs := collect(t, r)
			require.Equal(t, "RUN_FINISHED", types(evs)[len(evs)-1])
			// The log is written once the run has ended (its thread is released after).
			logged, err := st.Events(ctx, "kept", "r-kept", 0, 0)
			require.NoError(t, err)
			require.Len(t, logged, len(evs), "the finished run's log is stored whole")

			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				left, err := st.Events(ctx, "kept", "r-kept", 0, 0)
				assert.NoError(c, err)
				assert.Empty(c, left, "the log outlived its retention")
			}, 40*time.Second, 50*time.Millisecond)

			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				_, err := st.GetRun(ctx, "kept", "r-kept")
				assert.ErrorIs(c, err, store.ErrNotFound, "the finished run's record goes with its log")
			}, 40*time.Second, 50*time.Millisecond)
			msgs, err := st.LoadMessages(ctx, "kept")
			require.NoError(t, err)
			assert.Len(t, msgs, 2, "the thread's messages are kept: retention is for event logs")
		})
	}
}
