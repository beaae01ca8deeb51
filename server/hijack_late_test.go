package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/testutil/stackcount"
)

// A stream that outlives TakeOverAfter takes over its connection in the middle of its
// response: net/http's goroutines for it are gone, and the events go on in the same chunked
// response, which ends with the terminating chunk (read without an error).
func TestLateTakeOver(t *testing.T) {
	release := make(chan struct{})
	srv, e, streams := hijackServerAfter(t, coordinator.Config{Model: blockingModel{release: release}}, 20*time.Millisecond, nil)
	resp, br := openStream(t, srv.URL, "late")
	defer resp.Body.Close()
	assert.False(t, resp.Close, "net/http wrote the head: the connection was meant to be kept")
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	require.Equal(t, 1, e.Active())
	require.Eventually(t, func() bool { return streams.Open() == 1 }, 10*time.Second, time.Millisecond,
		"the stream took over its connection")
	assert.Zero(t, stackcount.Count("net/http.(*connReader).backgroundRead"), "no background read for the stream")
	assert.Equal(t, 1, stackcount.Count("server.(*sseConn).read"), "one reader")
	require.Eventually(t, func() bool { return stackcount.Count("server.(*server).stream") == 0 },
		10*time.Second, time.Millisecond, "the net/http stream loop returned")

	close(release)
	rest, err := io.ReadAll(br)
	require.NoError(t, err, "the response ends with the terminating chunk")
	assert.Contains(t, string(rest), `"type":"TEXT_MESSAGE_CONTENT"`)
	assert.Contains(t, string(rest), `"type":"RUN_FINISHED"`)
	// The ids go on where net/http's part stopped (RUN_STARTED was 1).
	assert.True(t, strings.HasPrefix(string(rest), "\nid: 2\n") || strings.HasPrefix(string(rest), "id: 2\n"), "%q", rest)
	require.Eventually(t, func() bool { return streams.Open() == 0 }, 10*time.Second, time.Millisecond)
}

// Runs shorter than TakeOverAfter stay on net/http and keep their keep-alive connection:
// three runs in a row from one client use one connection.
func TestShortRunsKeepTheirConnection(t *testing.T) {
	release := make(chan struct{})
	close(release)
	var conns atomic.Int32
	srv, _, streams := hijackServerAfter(t, coordinator.Config{Model: blockingModel{release: release}}, time.Hour,
		func() { conns.Add(1) })
	for i := range 3 {
		resp := post(t, srv.URL+"/agui", body(fmt.Sprintf("short%d", i), "r1", ""))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.False(t, resp.Close)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Contains(t, string(b), `"type":"RUN_FINISHED"`)
	}
	assert.Equal(t, int32(1), conns.Load(), "one connection for the three runs")
	assert.Zero(t, streams.Open())
}
