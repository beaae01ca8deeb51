package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/followers"
)

// firstEvent reads a stream up to its first event.
func firstEvent(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			return ev
		}
	}
	t.Fatalf("no event: %v", sc.Err())
	return nil
}

// Reconnect streams beyond server.max_followers_per_run get 429 TOO_MANY_FOLLOWERS and
// change nothing; once one of the followers has gone, a new one is served.
func TestFollowersPerRunAreCapped(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{}, coordinator.RunsConfig{MaxFollowersPerRun: 2})
	live := post(t, srv.URL+"/agui", body("followed", "r1", ""))
	defer live.Body.Close()
	require.Equal(t, http.StatusOK, live.StatusCode)
	require.Equal(t, "RUN_STARTED", firstEvent(t, live)["type"])

	url := srv.URL + "/agui/threads/followed/runs/r1/events"
	var open []*http.Response
	for range 2 {
		resp, err := http.Get(url)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "RUN_STARTED", firstEvent(t, resp)["type"])
		open = append(open, resp)
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	var e struct{ Error string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "TOO_MANY_FOLLOWERS", e.Error)
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	close(release)
	// The followers see the run to its end; then the count is back to zero and a new
	// follower of the ended run is served.
	for _, r := range open {
		evs := readEvents(t, r)
		require.NotEmpty(t, evs)
		assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	}
	evs := readEvents(t, live)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	again, err := http.Get(url)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, again.StatusCode)
	evs = readEvents(t, again)
	require.NotEmpty(t, evs)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}

// One principal's reconnect streams are capped across its runs
// (server.max_followers_per_principal, a count shared with the A2A surface): beyond it 429
// TOO_MANY_FOLLOWERS that says so, and a stream that ends frees its place.
func TestFollowersPerPrincipalAreCapped(t *testing.T) {
	release := make(chan struct{})
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{}, coordinator.RunsConfig{MaxFollowersPerRun: 10, Followers: followers.New(2)})
	defer close(release)
	for _, th := range []string{"mine1", "mine2"} {
		live := post(t, srv.URL+"/agui", body(th, "r1", ""))
		defer live.Body.Close()
		require.Equal(t, http.StatusOK, live.StatusCode)
		require.Equal(t, "RUN_STARTED", firstEvent(t, live)["type"])
	}
	follow := func(th string) *http.Response {
		resp, err := http.Get(srv.URL + "/agui/threads/" + th + "/runs/r1/events")
		require.NoError(t, err)
		return resp
	}
	first := follow("mine1")
	require.Equal(t, http.StatusOK, first.StatusCode)
	require.Equal(t, "RUN_STARTED", firstEvent(t, first)["type"])
	second := follow("mine2")
	defer second.Body.Close()
	require.Equal(t, http.StatusOK, second.StatusCode)
	require.Equal(t, "RUN_STARTED", firstEvent(t, second)["type"])

	third := follow("mine1")
	var e struct{ Error, Message string }
	require.NoError(t, json.NewDecoder(third.Body).Decode(&e))
	_ = third.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, third.StatusCode)
	assert.Equal(t, "TOO_MANY_FOLLOWERS", e.Error)
	assert.Contains(t, e.Message, "You follow too many streams")
	assert.NotEmpty(t, third.Header.Get("Retry-After"))

	// A stream that ends frees its place (the server sees the close when it next writes:
	// the keep-alive, or the run's end).
	_ = first.Body.Close()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		again := follow("mine1")
		defer again.Body.Close()
		assert.Equal(c, http.StatusOK, again.StatusCode)
	}, 10*time.Second, 20*time.Millisecond)
}

// uncappedFollowers counts followers with no cap per principal.
func uncappedFollowers() *followers.Counter { return followers.New(-1) }
