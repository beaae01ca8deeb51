package signin

import (
	"context"
	"sync"
	"time"
)

// Memory is an in-memory Store for tests and the conformance client. Nothing survives the
// process; values are kept as deep copies, so callers cannot change what is stored by
// changing what they passed in or got back.
type Memory struct {
	// Now is the clock used for expiry; time.Now when nil.
	Now func() time.Time

	mu      sync.Mutex
	pending map[string]*Pending // by state
	grants  map[[2]string]*Grant
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{} }

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// PutPending implements Store. Expired records are dropped on the way, so the map stays
// bounded by the sign-ins started within one expiry period.
func (m *Memory) PutPending(_ context.Context, p *Pending) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		m.pending = map[string]*Pending{}
	}
	now := m.now()
	for s, q := range m.pending {
		if !now.Before(q.Expires) {
			delete(m.pending, s)
		}
	}
	m.pending[p.State] = clonePending(p)
	return nil
}

// PendingFor implements Store: the newest unexpired pending sign-in of (principal, server).
func (m *Memory) PendingFor(_ context.Context, principal, server string) (*Pending, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var best *Pending
	for _, p := range m.pending {
		if p.Principal == principal && p.Server == server && now.Before(p.Expires) {
			if best == nil || p.Expires.After(best.Expires) {
				best = p
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	return clonePending(best), nil
}

// TakePending implements Store.
func (m *Memory) TakePending(_ context.Context, state, principal string) (*Pending, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pending[state]
	if !ok {
		return nil, ErrUnknownState
	}
	if !m.now().Before(p.Expires) {
		delete(m.pending, state)
		return nil, ErrUnknownState
	}
	if p.Principal != principal {
		return nil, ErrWrongPrincipal
	}
	delete(m.pending, state)
	return p, nil
}

// Grant implements Store.
func (m *Memory) Grant(_ context.Context, principal, server string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.grants[[2]string{principal, server}]
	if !ok {
		return nil, ErrNoGrant
	}
	return cloneGrant(g), nil
}

// PutGrant implements Store.
func (m *Memory) PutGrant(_ context.Context, principal, server string, g *Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grants == nil {
		m.grants = map[[2]string]*Grant{}
	}
	m.grants[[2]string{principal, server}] = cloneGrant(g)
	return nil
}

// DeleteGrant implements Store.
func (m *Memory) DeleteGrant(_ context.Context, principal, server string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.grants, [2]string{principal, server})
	return nil
}

func cloneGrant(g *Grant) *Grant {
	c := *g
	if g.Token != nil {
		t := *g.Token
		c.Token = &t
	}
	c.Scopes = append([]string(nil), g.Scopes...)
	return &c
}

func clonePending(p *Pending) *Pending {
	c := *p
	c.Scopes = append([]string(nil), p.Scopes...)
	c.Grant = *cloneGrant(&p.Grant)
	return &c
}
