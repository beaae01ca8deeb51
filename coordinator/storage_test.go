// The race detector makes encoding this conversation's model requests (up to 8 MiB of JSON
// each) slower than the store's write timeout: this test runs in make test's separate step
// without -race.

//go:build !race

package coordinator

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
)

// TestConversationStoredOnce: a thread of 8 user messages of 1 MiB, one per run, each run
// sending only its new message (the thread's history is prepended from the store, as for a
// client under the 1 MiB body cap). What the SQLite store holds afterwards (its pages in
// use) stays under twice the conversation: each message is kept once, in the thread. Every
// run's work document used to keep the whole conversation again (its checkpoint), so the
// store grew with the square of the conversation: for this thread 36 MiB of checkpoints
// beside its 8 MiB, over the 16 MiB bound (814 MB for 25 messages).
func TestConversationStoredOnce(t *testing.T) {
	const (
		messages = 8
		size     = 1 << 20
	)
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	model := &fakeModel{turn: func(*llm.Request) []llm.Delta {
		return []llm.Delta{{Text: "noted"}, {Done: &llm.Completion{FinishReason: "stop"}}}
	}}
	e := newEngine(t, model, &fakeAgent{}, func(c *Config) {
		c.Store = st
		// What the store keeps is measured here, not compaction (which would add its
		// summaries to the thread): the model's window holds the whole conversation.
		c.History.Window = 1 << 30
	})
	for i := range messages {
		content, _ := json.Marshal(fmt.Sprintf("%03d ", i) + strings.Repeat("x", size-4))
		in := &agui.RunAgentInput{ThreadID: "big", RunID: fmt.Sprintf("r%d", i), ProtocolVersion: "1.0",
			Messages: []agui.Message{{ID: fmt.Sprintf("u%d", i), Role: "user", Content: content}}}
		r, err := e.StartRun(context.Background(), in, "")
		require.NoError(t, err)
		evs := collect(t, r)
		<-r.Stream().Released()
		require.IsType(t, &agui.RunFinished{}, evs[len(evs)-1], "run %d", i)
	}
	msgs, err := st.LoadMessages(context.Background(), "big")
	require.NoError(t, err)
	require.Len(t, msgs, 2*messages, "every user message and every answer, once")
	require.NoError(t, e.Stop(context.Background()))
	require.NoError(t, st.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var pages, free, pageSize int64
	require.NoError(t, db.QueryRow(`PRAGMA page_count`).Scan(&pages))
	require.NoError(t, db.QueryRow(`PRAGMA freelist_count`).Scan(&free))
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&pageSize))
	var work int64
	require.NoError(t, db.QueryRow(`SELECT COALESCE(SUM(length(work)), 0) FROM runs`).Scan(&work))
	used := (pages - free) * pageSize
	fi, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("conversation %d MiB; store in use %.1f MiB (file %.1f MiB); runs.work %.1f MiB",
		messages*size>>20, float64(used)/(1<<20), float64(fi.Size())/(1<<20), float64(work)/(1<<20))
	assert.Less(t, used, int64(2*messages*size), "the store holds the conversation about once")
	assert.Less(t, work, int64(size), "finished runs keep no copy of the conversation")
}
