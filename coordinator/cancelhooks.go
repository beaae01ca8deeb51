package coordinator

import (
	"slices"
	"sync"
)

// cancelHooks runs functions when a run's context is cancelled, like context.AfterFunc
// but synchronously and without making the run's context a parent: a context derived
// with context.WithCancel from the run's would leave the run's context with a children
// map for the rest of the run (the map stays when the child is done), retained by every
// open run, and open runs are many. A model request uses it (streamTurn); the zero value
// is ready.
type cancelHooks struct {
	mu    sync.Mutex
	fired bool
	hooks []*func()
}

// add registers f, or runs it at once when the run is cancelled already. remove
// unregisters it.
func (h *cancelHooks) add(f func()) (remove func()) {
	h.mu.Lock()
	if h.fired {
		h.mu.Unlock()
		f()
		return func() {}
	}
	p := &f
	h.hooks = append(h.hooks, p)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.hooks = slices.DeleteFunc(h.hooks, func(q *func()) bool { return q == p })
		if len(h.hooks) == 0 {
			h.hooks = nil
		}
	}
}

// fire runs the hooks once, after the run's context was cancelled.
func (h *cancelHooks) fire() {
	h.mu.Lock()
	if h.fired {
		h.mu.Unlock()
		return
	}
	h.fired = true
	hooks := h.hooks
	h.hooks = nil
	h.mu.Unlock()
	for _, f := range hooks {
		(*f)()
	}
}
