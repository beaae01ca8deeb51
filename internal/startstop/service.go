package startstop

import (
	"context"
	"sync"
)

// Service is a named piece of background work (a heartbeat, a sweep, a takeover scan) with
// a start and a stop: Start runs it on its own goroutine until Stop, which waits for it to
// return. The zero value is not usable; a nil *Service is a service that was not configured
// (its Start and Stop do nothing).
type Service struct {
	name string
	run  func(ctx context.Context)

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewService returns the service name that runs run: run returns when its ctx ends.
func NewService(name string, run func(ctx context.Context)) *Service {
	return &Service{name: name, run: run}
}

// Name is the service's name, for logs.
func (s *Service) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Start starts the service, unless it is running or was stopped. Its work runs until Stop,
// or until ctx ends.
func (s *Service) Start(ctx context.Context) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		s.run(ctx)
	}(s.done)
}

// Stop ends the service's work and waits until it has returned, or until ctx ends (the
// error is then ctx's, and the work goes on ending by itself). A service stopped stays
// stopped; stopping one that never started does nothing.
func (s *Service) Stop(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.done == nil {
		// Never started: it never will be.
		s.done = make(chan struct{})
		close(s.done)
		s.cancel = func() {}
	}
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
