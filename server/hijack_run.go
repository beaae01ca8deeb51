package server

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/coordinator"
)

// runStream relays a run's events on a taken-over connection (design/sse-hijack.md). No
// goroutine waits for the run's events: the run's wake (Run.OnWake) and the keep-alive
// timer start a drain when none is running, and the drain writes everything pending and
// returns. It behaves as server.stream does: a dropped client is cut, the terminal events
// go out once the thread is released, and a write that fails is the client gone.
type runStream struct {
	c        *sseConn
	run      *coordinator.Run
	interval time.Duration
	ping     *time.Timer
	pingDue  atomic.Bool

	mu sync.Mutex
	// draining: a drain goroutine is running; again: it must look once more before it
	// returns; over: the stream has ended.
	draining, again, over bool

	stopWake  func()
	stopAbort func() bool
}

// hijackRun streams run on the request's taken-over connection; headSent: net/http has
// sent the status line and the first chunks already (a late takeover). It returns false,
// having touched nothing, when the connection cannot be taken over: the caller streams as
// before.
func (s *server) hijackRun(w http.ResponseWriter, r *http.Request, run *coordinator.Run, headSent bool) bool {
	rs := &runStream{run: run, interval: s.cfg.PingInterval}
	c, ok := s.takeOver(w, r, rs.stop, headSent)
	if !ok {
		return false
	}
	if c == nil {
		// Closed for the shutdown's deadline: the client is gone.
		run.ClientGone(coordinator.ErrClientGone)
		return true
	}
	rs.c = c
	c.gone = func() {
		run.ClientGone(coordinator.ErrClientGone)
		rs.end(false)
	}
	rs.mu.Lock()
	if rs.over {
		// Closed already by the shutdown's deadline (Streams.Wait).
		rs.mu.Unlock()
		run.ClientGone(coordinator.ErrClientGone)
		return true
	}
	// A dropped client may hold a drain in a write: the drop aborts it, and the drain
	// then ends the stream.
	rs.stopAbort = run.AfterDropped(c.abort)
	rs.stopWake = run.OnWake(rs.kick)
	rs.ping = time.AfterFunc(rs.interval, rs.pinged)
	rs.mu.Unlock()
	c.startReader()
	// Events pushed before OnWake announce nothing: the first drain takes them.
	rs.kick()
	return true
}

// kick starts a drain unless one is running, in which case that one looks again. It is
// called on the run's emit and must not block.
func (rs *runStream) kick() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.over {
		return
	}
	if rs.draining {
		rs.again = true
		return
	}
	rs.draining = true
	rs.c.streams.goTrack(rs.drain)
}

// pinged is the keep-alive timer: a ping is due, written by a drain; the timer is re-armed.
func (rs *runStream) pinged() {
	rs.pingDue.Store(true)
	rs.kick()
	rs.mu.Lock()
	if !rs.over {
		rs.ping.Reset(rs.interval)
	}
	rs.mu.Unlock()
}

// drain writes what is pending until nothing is, or the stream ends.
func (rs *runStream) drain() {
	for rs.step() {
		rs.mu.Lock()
		if !rs.again || rs.over {
			rs.draining = false
			rs.mu.Unlock()
			return
		}
		rs.again = false
		rs.mu.Unlock()
	}
}

// step writes the pending events (and a due ping); false when the stream has ended.
func (rs *runStream) step() bool {
	run, c := rs.run, rs.c
	first, events, ended := run.NextFrom()
	select {
	case <-run.Dropped():
		// The run has been told already (ClientGone(ErrClientTooSlow)); the connection
		// is closed without a terminal event, as for any broken stream.
		rs.end(false)
		return false
	default:
	}
	if ended {
		// The thread is freed before the client can see the terminal event, so a client
		// that posts its next run on RUN_FINISHED is never refused with 409.
		select {
		case <-run.Released():
		case <-c.done:
			return false
		}
	}
	if len(events) > 0 || ended {
		err := c.chunk(func(dst []byte) ([]byte, error) { return agui.AppendFramesFrom(dst, first, events) }, ended)
		if err != nil {
			rs.gone()
			return false
		}
	}
	if ended {
		rs.end(true)
		return false
	}
	if rs.pingDue.Swap(false) {
		if err := c.Ping(); err != nil {
			rs.gone()
			return false
		}
	}
	return true
}

// gone ends the stream after a failed write: the client is gone (or too slow).
func (rs *runStream) gone() {
	select {
	case <-rs.c.done: // ended already: by the reader, which told the run, or the shutdown
	default:
		rs.run.ClientGone(coordinator.ErrClientGone)
	}
	rs.end(false)
}

// end ends the stream: clean after the terminating chunk, else cut.
func (rs *runStream) end(clean bool) { rs.c.close(clean) }

// stop releases the run's hooks once the stream has ended (the connection's onClose).
func (rs *runStream) stop() {
	rs.mu.Lock()
	rs.over = true
	ping, stopWake, stopAbort := rs.ping, rs.stopWake, rs.stopAbort
	rs.mu.Unlock()
	if ping != nil {
		ping.Stop()
		stopWake()
		stopAbort()
	}
}
