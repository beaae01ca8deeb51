package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestReconnectExpiredLog: a run whose log the retention sweep took, whole or its start,
// is answered 410 EVENTS_EXPIRED rather than with a stream no client could accept (one that
// does not begin with RUN_STARTED, or one that ends as if the run had been lost).
func TestReconnectExpiredLog(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, e := newTestServer(t, blockingModel{release: release}, Config{})
	evs := readEvents(t, post(t, srv.URL+"/agui", body("old", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	ctx := context.Background()
	st := storeOf(e)

	// A log missing its start (a run longer than the retention): the head is gone.
	storedRun(t, st, "old", "long", []store.Event{
		{Seq: 7, Data: json.RawMessage(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`)},
	})
	for _, id := range []string{"", "3", "7"} {
		resp := get(t, srv.URL+"/agui/threads/old/runs/long/events", "Last-Event-ID", id)
		assert.Equal(t, http.StatusGone, resp.StatusCode, id)
		eb := decodeJSON(t, resp)
		assert.Equal(t, "EVENTS_EXPIRED", eb["error"], id)
	}

	// The whole log of the finished run swept.
	_, err := st.SweepEvents(ctx, time.Now().Add(time.Second))
	require.NoError(t, err)
	for _, q := range []string{"", "?after=3"} {
		resp := get(t, srv.URL+"/agui/threads/old/runs/r1/events"+q)
		assert.Equal(t, http.StatusGone, resp.StatusCode, q)
		eb := decodeJSON(t, resp)
		assert.Equal(t, "EVENTS_EXPIRED", eb["error"], q)
	}
	// The thread itself is kept: only event logs expire.
	doc := decodeJSON(t, get(t, srv.URL+"/agui/threads/old"))
	assert.Len(t, doc["messages"], 2)
}

// storedRun records a finished run with the events evs in st, as another replica would
// have: begun, its events appended under its epoch, ended.
func storedRun(t *testing.T, st store.Store, threadID, runID string, evs []store.Event) {
	t.Helper()
	ctx := context.Background()
	epoch, err := st.BeginRun(ctx, threadID, runID, "replica-other", time.Minute)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, threadID, runID, epoch, evs))
	require.NoError(t, st.EndRun(ctx, threadID, runID, epoch, "completed"))
}
