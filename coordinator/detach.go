package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/baton-dev/baton/store"
)

// Disconnect policy (server.on_disconnect, DESIGN §10; design/disconnect-policy.md).
//
// Design note: a run counts the streams that watch it: the stream of the POST that started
// it, and every reconnect stream (GET .../events) served on this replica. Under
// DisconnectCancel the first stream's end is an abort, as before. Under DisconnectDetach a
// run whose last watcher went away starts a grace timer (Config.ReconnectGrace); a reconnect
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

// watchers counts the streams watching a run and owns its grace timer.
type watchers struct {
	mu    sync.Mutex
	n     int
	timer *time.Timer
	ended bool
	// liveGone is set once the stream of the starting request has gone.
	liveGone bool
}

// ClientGone reports that the stream of the request that started the run has gone
// (disconnected, a write failed, or dropped as too slow) with cause (ErrClientGone or
// ErrClientTooSlow). Under DisconnectCancel the run is cancelled; under DisconnectDetach it
// goes on, and is cancelled with cause only when no reconnect stream watches it for
// Config.ReconnectGrace. Calls after the first are ignored.
func (r *Run) ClientGone(cause error) {
	if r.e.cfg.OnDisconnect != DisconnectDetach {
		r.Cancel(cause)
		return
	}
	w := &r.watch
	w.mu.Lock()
	if w.liveGone {
		w.mu.Unlock()
		return
	}
	w.liveGone = true
	w.mu.Unlock()
	// Nobody takes the live queue any more: what waits in it, and what would follow, is
	// dropped (the event log keeps everything for a reconnect).
	r.q.abandon()
	r.unwatch(cause)
}

// unwatch drops one watcher; the last one starts the grace timer.
func (r *Run) unwatch(cause error) {
	w := &r.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n--
	if w.n > 0 || w.ended {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	grace := r.e.cfg.ReconnectGrace
	r.log.Info("client gone; run detached, waiting for a reconnect", "grace_ms", grace.Milliseconds())
	w.timer = time.AfterFunc(grace, func() { r.graceOver(cause) })
}

// graceOver runs when the reconnect grace of a run without local watchers ran out. A client
// may follow the run through another replica, which says so in the store (WatchRun): then
// the grace starts again from the end of that watch. Otherwise the run is cancelled. When the
// store cannot answer, the run is cancelled as it was before watchers were shared: a run
// nobody may be watching must not outlive its grace.
func (r *Run) graceOver(cause error) {
	w := &r.watch
	w.mu.Lock()
	fire := w.n == 0 && !w.ended
	w.mu.Unlock()
	if !fire {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	left, err := r.e.cfg.Store.RunWatchedFor(ctx, r.ThreadID, r.RunID)
	cancel()
	if err != nil {
		r.log.Warn("store: remote watchers of a detached run", "err", err)
	}
	w.mu.Lock()
	if w.n > 0 || w.ended {
		w.mu.Unlock()
		return // a local reconnect came meanwhile, or the run ended
	}
	if err == nil && left > 0 {
		r.log.Debug("a client follows the run on another replica; grace restarted", "watched_ms", left.Milliseconds())
		w.timer = time.AfterFunc(left+r.e.cfg.ReconnectGrace, func() { r.graceOver(cause) })
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	r.log.Info("no reconnect within the grace period; cancelling the run")
	r.Cancel(cause)
}

// attach adds a watcher and stops a pending grace timer. It returns the release of that
// watcher, safe to call more than once.
func (r *Run) attach() func() {
	w := &r.watch
	w.mu.Lock()
	w.n++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { r.unwatch(ErrClientGone) }) }
}

// endWatch stops the grace timer once the run has ended.
func (r *Run) endWatch() {
	w := &r.watch
	w.mu.Lock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// Attach registers a reconnect stream of run (threadID, runID), so that under
// DisconnectDetach the run is not cancelled while the stream lasts; the returned function
// ends the registration (the grace period starts again when it was the last watcher).
// Under DisconnectCancel, or when the run is not active on this replica, Attach does
// nothing.
//
// A stream of a run that another replica executes is recorded in the store instead
// (Store.WatchRun, renewed every heartbeat, holding three heartbeats and at least 2 s), since only the store
// reaches the owner: its grace check (graceOver) holds the run while the watch lasts.
func (e *Engine) Attach(threadID, runID string) (release func()) {
	if e.cfg.OnDisconnect != DisconnectDetach {
		return func() {}
	}
	e.mu.Lock()
	r := e.active[threadID]
	e.mu.Unlock()
	if r == nil || r.RunID != runID {
		return e.watchRemote(threadID, runID)
	}
	return r.attach()
}

// watchRemote records in the store that a stream here follows a run of another replica,
// until the returned release is called or the run stops running. The first record is made
// before it returns, so that an owner whose grace runs out right after sees it.
func (e *Engine) watchRemote(threadID, runID string) (release func()) {
	every := e.cfg.Heartbeat
	if every <= 0 {
		every = DefaultWatchRenewal
	}
	// Three renewals may be missed (a stalled process, a slow store) before the watch
	// lapses, and never less than minWatchTTL.
	ttl := max(3*every, minWatchTTL)
	watch := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		err := e.cfg.Store.WatchRun(ctx, threadID, runID, ttl)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.log.Warn("store: record a follower of a remote run", "thread", threadID, "run", runID, "err", err)
		}
		return !errors.Is(err, store.ErrNotFound) // not running (any more): nothing to hold
	}
	if !watch() {
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
				if !watch() {
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

// minWatchTTL is the shortest time a remote follower's watch holds without renewal.
const minWatchTTL = 2 * time.Second

// DefaultWatchRenewal is how often a follower of a remote run renews its watch when the
// engine has no heartbeat configured.
const DefaultWatchRenewal = 2 * time.Second
