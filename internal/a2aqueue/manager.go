// Package a2aqueue wraps a2a-go's in-memory event queue manager so that a
// queue created for a task whose execution has already ended is destroyed
// when its last reader goes.
//
// a2a-go v2.4.0's local task manager destroys a finished execution's queue
// before it forgets the execution, without holding its lock in between. A
// SubscribeToTask that lands in that window still finds the execution and
// asks for a reader; the in-memory manager then starts a fresh broker for the
// task, which nothing will ever destroy: one goroutine leaked per such race.
package a2aqueue

import (
	"context"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
)

// Manager is an [eventqueue.Manager] that destroys a task's queue once every
// reader of it has closed, when no writer was ever created for it.
type Manager struct {
	inner eventqueue.Manager

	mu   sync.Mutex
	gens map[a2a.TaskID]*generation
}

// generation is one life of a task's queue: from the first reader or writer
// to Destroy.
type generation struct {
	open   int
	writer bool
}

var _ eventqueue.Manager = (*Manager)(nil)

// New wraps a fresh in-memory manager.
func New(opts ...eventqueue.MemManagerOption) *Manager {
	return &Manager{inner: eventqueue.NewInMemoryManager(opts...), gens: map[a2a.TaskID]*generation{}}
}

// CreateReader implements [eventqueue.Manager].
func (m *Manager) CreateReader(ctx context.Context, taskID a2a.TaskID) (eventqueue.Reader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.inner.CreateReader(ctx, taskID)
	if err != nil {
		return nil, err
	}
	g := m.gen(taskID)
	g.open++
	return &reader{Reader: r, m: m, id: taskID, gen: g}, nil
}

// CreateWriter implements [eventqueue.Manager].
func (m *Manager) CreateWriter(ctx context.Context, taskID a2a.TaskID) (eventqueue.Writer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, err := m.inner.CreateWriter(ctx, taskID)
	if err != nil {
		return nil, err
	}
	m.gen(taskID).writer = true
	return w, nil
}

// Destroy implements [eventqueue.Manager].
func (m *Manager) Destroy(ctx context.Context, taskID a2a.TaskID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.gens, taskID)
	return m.inner.Destroy(ctx, taskID)
}

func (m *Manager) gen(taskID a2a.TaskID) *generation {
	g, ok := m.gens[taskID]
	if !ok {
		g = &generation{}
		m.gens[taskID] = g
	}
	return g
}

// closed notes that a reader of generation g closed, and destroys the
// queue when g never had a writer and this was its last reader.
func (m *Manager) closed(taskID a2a.TaskID, g *generation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gens[taskID] != g {
		return
	}
	g.open--
	if g.open > 0 || g.writer {
		return
	}
	delete(m.gens, taskID)
	// The last reader is closing, possibly because its request's context ended; the
	// in-memory queue's Destroy does not block.
	_ = m.inner.Destroy(context.Background(), taskID)
}

type reader struct {
	eventqueue.Reader
	m    *Manager
	id   a2a.TaskID
	gen  *generation
	once sync.Once
}

func (r *reader) Close() error {
	err := r.Reader.Close()
	r.once.Do(func() { r.m.closed(r.id, r.gen) })
	return err
}
