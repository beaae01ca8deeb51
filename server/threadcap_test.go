package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/store"
)

// A run that would create a thread beyond server.max_threads_per_principal gets 429
// TOO_MANY_THREADS and records nothing; runs on the principal's threads go on, and a
// deleted thread frees its place. Both paths of a run's start: the memory store's claim
// and the SQL stores' one-transaction start.
func TestThreadCapAnswers429(t *testing.T) {
	for _, dsn := range []string{"memory:", "sqlite:" + filepath.Join(t.TempDir(), "baton.db")} {
		t.Run(dsn[:6], func(t *testing.T) {
			st, err := store.Open(context.Background(), dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			release := make(chan struct{})
			close(release)
			e := newStartedEngine(t, coordinator.Config{Model: blockingModel{release: release}, Store: st, MaxThreadsPerPrincipal: 2})
			srv := newServerFor(t, e, Config{})

			finished := func(thread, run string) {
				t.Helper()
				resp := post(t, srv.URL+"/agui", body(thread, run, ""))
				require.Equal(t, http.StatusOK, resp.StatusCode)
				evs := readEvents(t, resp)
				require.NotEmpty(t, evs)
				assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
			}
			refused := func(thread string) {
				t.Helper()
				resp := post(t, srv.URL+"/agui", body(thread, "r1", ""))
				defer resp.Body.Close()
				var e struct{ Error, Message string }
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				assert.Equal(t, "TOO_MANY_THREADS", e.Error)
				assert.Contains(t, e.Message, "DELETE /agui/threads/", "says how to free threads")
				assert.Contains(t, e.Message, "thread_retention")
				got, err := http.Get(srv.URL + "/agui/threads/" + thread)
				require.NoError(t, err)
				_ = got.Body.Close()
				assert.Equal(t, http.StatusNotFound, got.StatusCode, "a refused thread is not recorded")
			}
			finished("one", "r1")
			finished("two", "r1")
			refused("three")
			finished("one", "r2") // a run on a thread the principal has
			req, err := http.NewRequest(http.MethodDelete, srv.URL+"/agui/threads/two", nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
			finished("three", "r1")
			refused("four")
		})
	}
}
