package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"
)

// ErrTimeout is the kind of a model call that went silent: no first delta within the
// first-byte timeout, or no delta for longer than the idle timeout inside a stream.
const ErrTimeout ErrorKind = "timeout"

// Default timeouts of WithTimeouts (DESIGN §4, llm.timeout and llm.idle_timeout).
const (
	defaultTimeout     = 60 * time.Second
	defaultIdleTimeout = 30 * time.Second
)

// errFirstByte and errIdle are the causes with which WithTimeouts cancels a silent call.
var (
	errFirstByte = errors.New("llm: no response before the first-byte timeout")
	errIdle      = errors.New("llm: stream idle past the idle timeout")
)

// Timeouts configures WithTimeouts.
type Timeouts struct {
	// FirstByte bounds the wait from the request until the first delta of the turn;
	// 60 s when 0.
	FirstByte time.Duration
	// Idle bounds the silence between two deltas of a streamed turn; 30 s
	// when 0.
	Idle time.Duration
}

// WithTimeouts wraps m so that a turn that goes silent ends with a transient *Error of
// kind ErrTimeout, which the engine retries like any transient provider failure.
//
// Design note: providers only notice a dead peer when TCP does, which for a server that
// sent its headers and then nothing is never; the whole-run limit was the only bound.
// The wrapper cancels the provider's request context with a private cause when a timer
// fires, so every provider gets both timeouts without code of its own. Time the
// consumer spends handling a delta (inside yield) is not counted as provider silence.
func WithTimeouts(m Model, t Timeouts) Model {
	if t.FirstByte <= 0 {
		t.FirstByte = defaultTimeout
	}
	if t.Idle <= 0 {
		t.Idle = defaultIdleTimeout
	}
	return &timeoutModel{m: m, t: t}
}

type timeoutModel struct {
	m Model
	t Timeouts
}

// Stream implements Model.
func (tm *timeoutModel) Stream(ctx context.Context, req *Request) iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		cctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		w := &watchdog{cancel: cancel}
		w.arm(tm.t.FirstByte, errFirstByte)
		defer w.stop()
		for d, err := range tm.m.Stream(cctx, req) {
			if !w.stop() {
				// The timer fired while the provider was handing over this delta: the
				// request is cancelled already, so the call counts as silent.
				yield(Delta{}, tm.timeoutError(ctx, cctx, err))
				return
			}
			if err != nil {
				yield(Delta{}, tm.timeoutError(ctx, cctx, err))
				return
			}
			if !yield(d, nil) {
				return
			}
			if d.Done != nil {
				return
			}
			w.arm(tm.t.Idle, errIdle)
		}
		if w.fired() {
			yield(Delta{}, tm.timeoutError(ctx, cctx, nil))
		}
	}
}

// timeoutError replaces err by a timeout *Error when the watchdog cancelled the call,
// and returns err unchanged otherwise (including when ctx itself ended).
func (tm *timeoutModel) timeoutError(ctx, cctx context.Context, err error) error {
	if err == nil {
		err = ErrNoCompletion
	}
	if ctx.Err() != nil {
		return err
	}
	cause := context.Cause(cctx)
	var msg string
	switch {
	case errors.Is(cause, errFirstByte):
		msg = fmt.Sprintf("the model provider did not start answering within %s", tm.t.FirstByte)
	case errors.Is(cause, errIdle):
		msg = fmt.Sprintf("the model provider stopped sending for more than %s", tm.t.Idle)
	default:
		return err
	}
	// The provider's error is only the cancellation the watchdog caused; the cause is
	// kept instead, so that callers never mistake a timeout for their own cancellation.
	return &Error{Kind: ErrTimeout, Message: msg, Err: cause}
}

// watchdog cancels a call with a cause when its timer fires.
type watchdog struct {
	mu     sync.Mutex
	cancel context.CancelCauseFunc
	timer  *time.Timer
	gen    int
	hit    bool
}

// arm starts the timer for d; firing cancels the call with cause.
func (w *watchdog) arm(d time.Duration, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	gen := w.gen
	w.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		if w.gen != gen {
			w.mu.Unlock()
			return
		}
		w.hit = true
		w.mu.Unlock()
		w.cancel(cause)
	})
}

// stop disarms the timer and reports whether it had not fired.
func (w *watchdog) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.gen++
	return !w.hit
}

func (w *watchdog) fired() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}
