package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/runs"
)

// The port hands a run's Stream to the surface that started it as it is.
var _ runs.Stream = (*Stream)(nil)

// Stream delivers a run's events to the client streams that follow it: the live queue,
// the event log for a client that fell behind, and the count of attachments that keeps a
// detached run alive (server.on_disconnect). A run has one (Run.Stream); it lives and
// ends with the run.
type Stream struct {
	run *Run
	q   *eventQueue
	// attached counts the streams attached to the run (server.on_disconnect: detach).
	attached attachments
	// limit counts the run's events against server.max_events_per_run.
	limit eventLimit
	// released is closed when the thread is free for its next run (right after the
	// terminal event); the run's done follows once downstream cleanup has finished.
	released chan struct{}
	// releaseOnce closes released (the run's end, or its lease lapsing: fencing.go).
	releaseOnce sync.Once
}

// Next returns the events produced since the last call, and whether the stream has ended.
// wake fires when more events may be available.
func (s *Stream) Next() (events []agui.Event, ended bool) {
	_, events, ended = s.q.take()
	return events, ended
}

// NextFrom is Next with the sequence number of the first event returned (the next ones
// follow on): the SSE id of each frame, the same number as in the run's event log.
func (s *Stream) NextFrom() (first int64, events []agui.Event, ended bool) { return s.q.take() }

// Wake returns a channel that receives when new events may be available.
func (s *Stream) Wake() <-chan struct{} { return s.q.wake }

// OnWake arranges for f to be called, on the producing goroutine, whenever Wake would fire,
// so that a stream can be told that events may be available without a goroutine parked
// on Wake. f must return quickly and never block: it runs inside the run's emit. One f at
// a time (the run has one live stream); stop unregisters it. Events pending before OnWake
// are not announced: the caller takes them (NextFrom) after registering.
func (s *Stream) OnWake(f func()) (stop func()) {
	s.q.notify.Store(&f)
	return func() { s.q.notify.CompareAndSwap(&f, nil) }
}

// Released is closed when the run's thread accepts a new run (right after its terminal
// event). A stream should end only then, so that a client's next request never races it.
// It is also closed when the run's lease lapsed here (the live stream ends; the client
// reconnects to wherever the run goes on).
func (s *Stream) Released() <-chan struct{} { return s.released }

// release closes released, once.
func (s *Stream) release() { s.releaseOnce.Do(func() { close(s.released) }) }

// ClientGone reports that the stream of the request that started the run has gone
// (disconnected, a write failed, or dropped as too slow) with cause (ErrClientGone or
// ErrClientTooSlow). Under DisconnectCancel the run is cancelled; under DisconnectDetach it
// goes on, and is cancelled with cause only when no reconnect stream is attached to it for
// Config.ReconnectGrace. Calls after the first are ignored.
func (s *Stream) ClientGone(cause error) {
	r := s.run
	if r.e.cfg.OnDisconnect != DisconnectDetach {
		r.Cancel(cause)
		return
	}
	w := &s.attached
	w.mu.Lock()
	if w.liveGone {
		w.mu.Unlock()
		return
	}
	w.liveGone = true
	w.mu.Unlock()
	// Nobody takes the live queue any more: what waits in it, and what would follow, is
	// dropped (the event log keeps everything for a reconnect).
	s.q.abandon()
	s.detachOne(cause)
}

// detachOne drops one attached stream; the last one starts the grace timer.
func (s *Stream) detachOne(cause error) {
	r := s.run
	w := &s.attached
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
	w.timer = time.AfterFunc(grace, func() { s.graceOver(cause) })
}

// graceOver runs when the reconnect grace of a run without local attachments ran out. A client
// may follow the run through another replica, which says so in the store (HoldRunForFollower): then
// the grace starts again from the end of that hold. Otherwise the run is cancelled. When the
// store cannot answer, the run is cancelled as it was before attachments were shared: a run
// nobody may be following must not outlive its grace.
func (s *Stream) graceOver(cause error) {
	r := s.run
	w := &s.attached
	w.mu.Lock()
	fire := w.n == 0 && !w.ended
	w.mu.Unlock()
	if !fire {
		return
	}
	// A timer calls graceOver, after the last client's request has ended.
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	left, err := r.e.cfg.Store.RunHeldFor(ctx, r.ThreadID, r.RunID)
	cancel()
	if err != nil {
		r.log.Warn("store: remote attachments of a detached run", "err", err)
	}
	w.mu.Lock()
	if w.n > 0 || w.ended {
		w.mu.Unlock()
		return // a local reconnect came meanwhile, or the run ended
	}
	if err == nil && left > 0 {
		r.log.Debug("a client follows the run on another replica; grace restarted", "held_ms", left.Milliseconds())
		w.timer = time.AfterFunc(left+r.e.cfg.ReconnectGrace, func() { s.graceOver(cause) })
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	r.log.Info("no reconnect within the grace period; cancelling the run")
	r.Cancel(cause)
}

// attach adds an attached stream and stops a pending grace timer. It returns the release of that
// stream, safe to call more than once.
func (s *Stream) attach() func() {
	w := &s.attached
	w.mu.Lock()
	w.n++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.detachOne(ErrClientGone) }) }
}

// stopGrace stops the grace timer once the run has ended.
func (s *Stream) stopGrace() {
	w := &s.attached
	w.mu.Lock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
}

// backlogReadTimeout bounds one read of the event log for a client that fell behind.
const backlogReadTimeout = 10 * time.Second

// Backlog returns the run's stored events with after < Seq <= upto, oldest first, at most
// limit of them: what a live stream missed when it fell more than the stream buffer behind
// (its next NextFrom starts beyond the last event it has). It waits, until ctx is done,
// for events that are on their way to the store (the log is written a moment after the
// events are streamed). An empty result with a nil error means that the log will never
// hold those events (its writer dropped or failed to store them, which it logged): the
// caller goes on after upto.
func (s *Stream) Backlog(ctx context.Context, after, upto int64, limit int) ([]runs.Event, error) {
	r := s.run
	for {
		settled, over, changed := r.elog.State()
		rctx, cancel := context.WithTimeout(ctx, backlogReadTimeout)
		evs, err := r.e.cfg.Store.Events(rctx, r.ThreadID, r.RunID, after, limit)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("coordinator: read the event log: %w", err)
		}
		n := 0
		for n < len(evs) && evs[n].Seq <= upto {
			n++
		}
		if n > 0 {
			return events(evs[:n]), nil
		}
		if len(evs) > 0 || settled >= upto || over {
			// Nothing stored between after and upto, and nothing more will be.
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}
