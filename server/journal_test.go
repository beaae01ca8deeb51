package server

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// journalSteps reads GET …/journal and returns its steps.
func journalSteps(t *testing.T, url string, hdr ...string) []map[string]any {
	t.Helper()
	resp := get(t, url, hdr...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	doc := decodeJSON(t, resp)
	raw, ok := doc["steps"].([]any)
	require.True(t, ok, "steps is a list: %v", doc)
	out := make([]map[string]any, 0, len(raw))
	for _, s := range raw {
		out = append(out, s.(map[string]any))
	}
	return out
}

// TestJournalEndpoint: a thread's journal lists its runs' steps oldest first (start, the
// model call with its outcome, end), for its owner only (another principal gets 404, as
// for a thread that does not exist), in pages (after, limit), and refuses bad parameters.
func TestJournalEndpoint(t *testing.T) {
	release := make(chan struct{})
	close(release)
	srv, _ := newTestServer(t, blockingModel{release: release}, Config{AuthTokens: []string{"alpha", "beta"}})
	alice, bob := []string{"Authorization", "Bearer alpha"}, []string{"Authorization", "Bearer beta"}
	for _, run := range []string{"r1", "r2"} {
		evs := readEvents(t, post(t, srv.URL+"/agui", body("jt", run, ""), alice...))
		require.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
	}
	base := srv.URL + "/agui/threads/jt/journal"

	steps := journalSteps(t, base, alice...)
	var kinds []string
	for i, s := range steps {
		assert.Equal(t, float64(i+1), s["seq"], "oldest first, numbered from 1")
		kinds = append(kinds, s["kind"].(string))
		assert.NotEmpty(t, s["at"])
		assert.Contains(t, s, "replica")
		assert.Contains(t, s, "attempt")
		assert.NotEqual(t, "pending", s["outcome"], "every step of a finished run has its outcome: %v", s)
	}
	assert.Equal(t, []string{"run_start", "model_call", "run_end", "run_start", "model_call", "run_end"}, kinds)
	assert.Equal(t, "r1", steps[0]["runId"])
	assert.Equal(t, "r2", steps[5]["runId"])
	assert.Equal(t, "ok", steps[1]["outcome"])
	assert.Equal(t, "completed", steps[2]["outcome"])

	page := journalSteps(t, base+"?limit=2", alice...)
	require.Len(t, page, 2)
	assert.Equal(t, float64(2), page[1]["seq"])
	rest := journalSteps(t, base+"?after=2&limit=5000", alice...)
	require.Len(t, rest, 4)
	assert.Equal(t, float64(3), rest[0]["seq"])
	assert.Empty(t, journalSteps(t, base+"?after="+strconv.Itoa(len(steps)), alice...))

	resp := get(t, base, bob...)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "another principal's thread reads as unknown")
	assert.Equal(t, "THREAD_NOT_FOUND", decodeJSON(t, resp)["error"])
	resp = get(t, srv.URL+"/agui/threads/nope/journal", alice...)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp.Body.Close()
	resp = get(t, base)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp.Body.Close()

	for _, q := range []string{"limit=0", "limit=5001", "limit=x", "after=-1", "after=x"} {
		resp := get(t, base+"?"+q, alice...)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		assert.Equal(t, "INVALID_INPUT", decodeJSON(t, resp)["error"], q)
	}
}
