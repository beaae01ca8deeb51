package store

import (
	"context"
	"errors"
	"time"
)

// ErrTaskExists is returned by CreateTask for a task id that is taken.
var ErrTaskExists = errors.New("store: task exists")

// ErrTaskVersion is returned by UpdateTask when the task's version is not the one the
// writer read: another writer (a CancelTask on another replica) changed it since.
var ErrTaskVersion = errors.New("store: task changed since it was read")

// MaxTasksPage bounds one ListTasks page.
const MaxTasksPage = 100

// TaskRecord is one A2A task that Baton serves (design/a2a-server.md): the columns the
// server queries, and the task itself as an opaque document (its status, metadata and
// history; its artifacts are derived from its runs' event logs).
type TaskRecord struct {
	TaskID    string
	ContextID string // the thread
	RunID     string // the task's current run
	Principal string // whose task it is (empty: the anonymous principal); no other sees it
	State     string
	// Version grows with every write; UpdateTask is conditional on it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Body      []byte
}

// TaskQuery selects a principal's tasks for ListTasks, newest update first.
type TaskQuery struct {
	Principal string
	ContextID string // empty: every context
	State     string // empty: every state
	// UpdatedAfter, when not zero, keeps tasks updated after it.
	UpdatedAfter time.Time
	// Offset is where the page starts (the page token); Limit its size, capped at
	// MaxTasksPage.
	Offset, Limit int
}

// Tasks keeps the A2A tasks Baton serves, so that every replica answers for them and
// they outlive a restart.
type Tasks interface {
	// CreateTask inserts t (its Version is set to 1, its times to now); a taken id is
	// ErrTaskExists.
	CreateTask(ctx context.Context, t *TaskRecord) error
	// UpdateTask replaces the task t.TaskID if its version is prev, and sets t.Version to
	// prev+1 and t.UpdatedAt to now. ErrNotFound for an unknown task, ErrTaskVersion for a
	// changed one. The principal and creation time are kept as they were.
	UpdateTask(ctx context.Context, t *TaskRecord, prev int64) error
	// GetTask returns a task, or ErrNotFound.
	GetTask(ctx context.Context, taskID string) (*TaskRecord, error)
	// ListTasks returns one page of the tasks q selects and how many it selects in all.
	ListTasks(ctx context.Context, q TaskQuery) (_ []TaskRecord, total int, err error)
	// SweepTasks deletes the tasks not updated since cutoff (server.event_retention: their
	// runs' event logs are gone too) and returns how many.
	SweepTasks(ctx context.Context, cutoff time.Time) (int64, error)
}

func checkTask(t *TaskRecord) error {
	if t == nil || t.TaskID == "" {
		return errors.New("store: task: the task id is required")
	}
	return nil
}

func (q *TaskQuery) normalize() {
	if q.Limit <= 0 || q.Limit > MaxTasksPage {
		q.Limit = MaxTasksPage
	}
	if q.Offset < 0 {
		q.Offset = 0
	}
}
