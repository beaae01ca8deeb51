package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweptThreadSaysSo: a thread deleted by thread_retention answers 404 THREAD_EXPIRED on
// read, and a new run on its id is refused with 410 THREAD_EXPIRED instead of silently
// starting a conversation without its history. Another thread id still starts.
func TestSweptThreadSaysSo(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, e := newTestServer(t, blockingModel{release: release}, Config{})
	evs := readEvents(t, post(t, srv.URL+"/agui", body("old", "r1", "")))
	require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])

	// The run's end is recorded before the thread is released; the sweep waits for it.
	ctx := context.Background()
	var swept int64
	require.Eventually(t, func() bool {
		n, err := storeOf(e).SweepThreads(ctx, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		swept += n
		return swept == 1
	}, 5*time.Second, 10*time.Millisecond)

	resp, err := http.Get(srv.URL + "/agui/threads/old")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	var doc map[string]string
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "THREAD_EXPIRED", doc["error"])

	resp = post(t, srv.URL+"/agui", body("old", "r2", ""))
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusGone, resp.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "THREAD_EXPIRED", doc["error"])

	resp, err = http.Get(srv.URL + "/agui/threads/never")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "THREAD_NOT_FOUND", doc["error"], "an unknown thread is not an expired one")

	evs = readEvents(t, post(t, srv.URL+"/agui", body("fresh", "r1", "")))
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}
