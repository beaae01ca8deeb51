package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/store"
)

// pageCounting counts the event log pages read (Events calls for more than one event: a
// replay's check of the log's first event is not counted).
type pageCounting struct {
	store.Store
	pages atomic.Int64
}

func (c *pageCounting) Events(ctx context.Context, threadID, runID string, after int64, limit int) ([]store.Event, error) {
	if limit > 1 {
		c.pages.Add(1)
	}
	return c.Store.Events(ctx, threadID, runID, after, limit)
}

// raiseFileLimit raises the soft limit of open files to at least want (up to the hard
// limit); it skips the test with the reason when it cannot, or fails when CI is set.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur >= want {
		return
	}
	was := lim
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < want {
		msg := fmt.Sprintf("needs %d open files; the hard limit is %d (ulimit -n): %v", want, lim.Max, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
}

// 1,000 reconnect streams following one run share one reader of its event log: the log is
// read a few times per poll interval for all of them, not once per follower, and every
// follower gets the run to its end.
func TestThousandFollowersShareOneTail(t *testing.T) {
	const followers = 1000
	raiseFileLimit(t, 2*followers+512)
	st, err := store.Open(context.Background(), "memory:")
	require.NoError(t, err)
	defer st.Close()
	counting := &pageCounting{Store: st}
	release := make(chan struct{})
	e := newStartedEngine(t, coordinator.Config{Model: blockingModel{release: release}, Store: counting})
	srv := newServerFor(t, e, Config{}, coordinator.RunsConfig{MaxFollowersPerRun: -1, Followers: uncappedFollowers()}) // one principal: no cap per principal either
	live := post(t, srv.URL+"/agui", body("watched", "r1", ""))
	defer live.Body.Close()
	require.Equal(t, http.StatusOK, live.StatusCode)
	require.Equal(t, "RUN_STARTED", firstEvent(t, live)["type"])

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: followers}}
	defer client.CloseIdleConnections()
	url := srv.URL + "/agui/threads/watched/runs/r1/events"
	var wg sync.WaitGroup
	started := make(chan struct{}, followers)
	ends := make(chan string, followers)
	before := counting.pages.Load()
	for range followers {
		wg.Go(func() {
			resp, err := client.Get(url)
			if !assert.NoError(t, err) {
				started <- struct{}{}
				return
			}
			if !assert.Equal(t, http.StatusOK, resp.StatusCode) {
				_ = resp.Body.Close()
				started <- struct{}{}
				return
			}
			assert.Equal(t, "RUN_STARTED", firstEvent(t, resp)["type"])
			started <- struct{}{}
			evs := readEvents(t, resp)
			if assert.NotEmpty(t, evs) {
				ends <- fmt.Sprint(evs[len(evs)-1]["type"])
			}
		})
	}
	for range followers {
		<-started
	}
	// The followers wait for the run's next event: a poll loop each would read the log
	// every poll interval (200 ms).
	time.Sleep(4 * 200 * time.Millisecond) // four of the port's poll intervals
	close(release)
	wg.Wait()
	close(ends)
	n := 0
	for end := range ends {
		assert.Equal(t, "RUN_FINISHED", end)
		n++
	}
	assert.Equal(t, followers, n, "every follower saw the run's end")
	pages := counting.pages.Load() - before
	t.Logf("%d followers: %d event log pages read", followers, pages)
	assert.Less(t, pages, int64(followers/5), "log pages read for %d followers", followers)
	evs := readEvents(t, live)
	assert.Equal(t, "RUN_FINISHED", evs[len(evs)-1]["type"])
}
