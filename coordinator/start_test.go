package coordinator

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestStartRecordsBeforeReturning: when Start returns, the store already has the thread's
// owner, the running run, its first checkpoint (what a takeover needs) and the input's
// messages (what a client reads on RUN_STARTED), on SQLite (one transaction) and in memory
// (one lock). A refused start by another principal records nothing and leaves the thread's
// owner as it was.
func TestStartRecordsBeforeReturning(t *testing.T) {
	stores := map[string]string{
		"memory": "memory:",
		"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "baton.db"),
	}
	for name, dsn := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })

			model := &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }, block: make(chan struct{})}
			e := newEngine(t, model, &fakeAgent{}, func(c *Config) { c.Store = st })
			r, err := e.StartRun(context.Background(), input("t"), "alice")
			require.NoError(t, err)
			t.Cleanup(func() { r.Cancel(ErrStopped); <-r.stream.released })

			th, err := st.GetThread(ctx, "t")
			require.NoError(t, err)
			assert.Equal(t, "alice", th.Owner)
			run, err := st.GetRun(ctx, "t", "r-t")
			require.NoError(t, err)
			assert.Equal(t, store.RunRunning, run.State)
			var work durable.Work
			require.NoError(t, json.Unmarshal(run.Work, &work))
			var cp durable.Checkpoint
			require.NoError(t, json.Unmarshal(work.Checkpoint, &cp), "the first checkpoint is stored with the start")
			assert.Equal(t, "alice", cp.Owner)
			// The run may have taken its next checkpoint already (after its setup; the
			// messages are then in its history): either way it is the run's.
			assert.Contains(t, string(cp.Input), `"runId":"r-t"`)
			// The input's user message too: a client reading the thread as soon as it sees
			// RUN_STARTED (sent only after Start returns) finds the message it sent.
			msgs, err := st.LoadMessages(ctx, "t")
			require.NoError(t, err)
			require.Len(t, msgs, len(input("t").Messages), "the input's messages are stored with the start")
			assert.Equal(t, input("t").Messages[0].ID, msgs[0].ID)

			// Another engine on the same store (a restart, another replica) does not know the
			// thread: mallory is refused by the store, and that refusal is not remembered as
			// mallory's ownership: alice is told the thread is busy, not forbidden.
			other := newEngine(t, &fakeModel{turn: func(*llm.Request) []llm.Delta { return nil }}, &fakeAgent{},
				func(c *Config) { c.Store = st; c.Lease = time.Minute })
			in := input("t")
			in.RunID = "r2"
			_, err = other.StartRun(context.Background(), in, "mallory")
			require.ErrorIs(t, err, ErrForbidden)
			_, err = st.GetRun(ctx, "t", "r2")
			require.ErrorIs(t, err, store.ErrNotFound, "a refused start records no run")
			in = input("t")
			in.RunID = "r3"
			_, err = other.StartRun(context.Background(), in, "alice")
			require.ErrorIs(t, err, ErrThreadBusy)

			// A start refused because a run is reserved on a thread whose owner this
			// process does not remember yet (its first start in flight): the store decides
			// between 403 and 409.
			require.ErrorIs(t, busyError(ctx, other.records, "t", "mallory", nil), ErrForbidden)
			require.ErrorIs(t, busyError(ctx, other.records, "t", "alice", nil), ErrThreadBusy)
			require.ErrorIs(t, busyError(ctx, other.records, "new", "mallory", nil), ErrThreadBusy, "nobody owns it yet")
			// What this process remembers of a thread's owner does not decide: the store
			// does (another replica may have deleted it and someone re-created it).
			require.ErrorIs(t, busyError(ctx, other.records, "t", "mallory", &thread{owner: "alice"}), ErrForbidden)
			require.ErrorIs(t, busyError(ctx, other.records, "new", "mallory", &thread{owner: "alice"}), ErrThreadBusy,
				"remembered as alice's, but the store has no such thread any more")
		})
	}
}
