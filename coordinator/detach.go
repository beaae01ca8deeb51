package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/store"
)

// Disconnect policy (server.on_disconnect, DESIGN §10; design/disconnect-policy.md).
//
// Design note: a run counts the streams attached to it: the stream of the POST that started
// it, and every reconnect stream (GET .../events) served on this replica. Under
// DisconnectCancel the first stream's end is an abort, as before. Under DisconnectDetach a
// run whose last attached stream went away starts a grace timer (Config.ReconnectGrace); a reconnect
// stops it, and when it fires the run is cancelled with the cause of the disconnect, so
// the downstream cancellation is exactly that of a cancel-mode disconnect. The run itself
// never waits for anyone: its events keep going to the event log, which is what a
// reconnect replays.

// DisconnectPolicy is what a run does when its client goes away (server.on_disconnect).
type DisconnectPolicy int

const (
	// DisconnectCancel (the default) treats a disconnect as an abort: the run is cancelled.
	DisconnectCancel DisconnectPolicy = iota
	// DisconnectDetach keeps the run going for Config.ReconnectGrace, waiting for a
	// reconnect; it is cancelled when nobody comes back in time. Suits clients that never
	// send an abort of their own (CopilotKit's runtime), where a disconnect is not a
	// decision of the user.
	DisconnectDetach
)

// attachments counts the streams attached to a run and owns its grace timer.
type attachments struct {
	mu    sync.Mutex
	n     int
	timer *time.Timer
	ended bool
	// liveGone is set once the stream of the starting request has gone.
	liveGone bool
}

// holdForRemoteFollower records in st that a stream here follows a run of another replica, renewed
// every heartbeat, until the returned release is called or the run stops running. The
// first record is made before it returns, so that an owner whose grace runs out right
// after sees it.
func holdForRemoteFollower(st store.Store, log *slog.Logger, heartbeat time.Duration, threadID, runID string) (release func()) {
	every := heartbeat
	if every <= 0 {
		every = DefaultFollowerRenewal
	}
	// Three renewals may be missed (a stalled process, a slow store) before the hold
	// lapses, and never less than minFollowerHold.
	ttl := max(3*every, minFollowerHold)
	hold := func() bool {
		// Renewed by a timer for as long as the stream follows the run, after the request
		// that started the hold may have returned.
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		err := st.HoldRunForFollower(ctx, threadID, runID, ttl)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			log.Warn("store: record a follower of a remote run", "thread", threadID, "run", runID, "err", err)
		}
		return !errors.Is(err, store.ErrNotFound) // not running (any more): nothing to hold
	}
	if !hold() {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if !hold() {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
		})
	}
}

// minFollowerHold is the shortest time a remote follower's hold lasts without renewal.
const minFollowerHold = 2 * time.Second

// DefaultFollowerRenewal is how often a follower of a remote run renews its hold when the
// engine has no heartbeat configured.
const DefaultFollowerRenewal = 2 * time.Second
