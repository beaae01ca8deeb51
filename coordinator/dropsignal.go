package coordinator

import (
	"slices"
	"sync"
)

// dropSignal fires once, when a run's client is dropped for falling behind: a channel for
// a select (Run.Dropped) and functions to run then (Run.AfterDropped), like a context
// and context.AfterFunc but without the cancelCtx, its children map and the afterFunc
// context that every open run would retain (issue 18). The zero value is ready.
type dropSignal struct {
	mu    sync.Mutex
	ch    chan struct{} // made by the first done
	fired bool
	after []*dropFunc
}

type dropFunc struct{ f func() }

// done returns a channel closed once the signal fires.
func (s *dropSignal) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
		if s.fired {
			close(s.ch)
		}
	}
	return s.ch
}

// afterFunc arranges for f to run on its own goroutine once the signal fires (at once if
// it has). stop unregisters f and reports whether it did so before f was started.
func (s *dropSignal) afterFunc(f func()) (stop func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired {
		go f()
		return func() bool { return false }
	}
	df := &dropFunc{f: f}
	s.after = append(s.after, df)
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		i := slices.Index(s.after, df)
		if i < 0 {
			return false
		}
		s.after = slices.Delete(s.after, i, i+1)
		return true
	}
}

// fire fires the signal; only the first call has an effect.
func (s *dropSignal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fired {
		return
	}
	s.fired = true
	if s.ch != nil {
		close(s.ch)
	}
	for _, df := range s.after {
		go df.f()
	}
	s.after = nil
}
