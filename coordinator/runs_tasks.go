package coordinator

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/store"
)

// The A2A door's tasks, and what the port tells it of a run that another replica relays:
// its log, its state and its downstream cancels.

// CreateTask keeps a new A2A task of principal (its Version set to 1, its times to now);
// a taken id is runs.ErrTaskExists.
func (p *Runs) CreateTask(ctx context.Context, principal string, t *runs.Task) error {
	rec := taskRecord(t)
	rec.Principal = principal
	if err := p.e.cfg.Store.Tasks().CreateTask(ctx, rec); err != nil {
		return taskErr(err)
	}
	t.Principal, t.Version, t.CreatedAt, t.UpdatedAt = principal, rec.Version, rec.CreatedAt, rec.UpdatedAt
	return nil
}

// UpdateTask replaces principal's task t.TaskID if its version is prev, and sets t's
// Version and UpdatedAt: runs.ErrTaskNotFound for a task that does not exist or is another
// principal's, runs.ErrTaskVersion for one that changed since prev.
func (p *Runs) UpdateTask(ctx context.Context, principal string, t *runs.Task, prev int64) error {
	if _, err := p.GetTask(ctx, principal, t.TaskID); err != nil {
		return err
	}
	rec := taskRecord(t)
	if err := p.e.cfg.Store.Tasks().UpdateTask(ctx, rec, prev); err != nil {
		return taskErr(err)
	}
	t.Principal, t.Version, t.UpdatedAt = principal, rec.Version, rec.UpdatedAt
	return nil
}

// GetTask returns principal's task id: another principal's task is runs.ErrTaskNotFound,
// the same answer as one that does not exist.
func (p *Runs) GetTask(ctx context.Context, principal, id string) (*runs.Task, error) {
	rec, err := p.e.cfg.Store.Tasks().GetTask(ctx, id)
	if err != nil {
		return nil, taskErr(err)
	}
	if rec.Principal != principal {
		return nil, runs.ErrTaskNotFound
	}
	t := taskOf(*rec)
	return &t, nil
}

// ListTasks returns one page of principal's tasks that q selects, and how many it selects.
func (p *Runs) ListTasks(ctx context.Context, principal string, q runs.TaskQuery) ([]runs.Task, int, error) {
	recs, total, err := p.e.cfg.Store.Tasks().ListTasks(ctx, store.TaskQuery{Principal: principal, ContextID: q.ContextID,
		State: q.State, UpdatedAfter: q.UpdatedAfter, Offset: q.Offset, Limit: q.Limit})
	if err != nil {
		return nil, 0, taskErr(err)
	}
	out := make([]runs.Task, len(recs))
	for i, r := range recs {
		out[i] = taskOf(r)
	}
	return out, total, nil
}

// SweepTasks deletes every principal's tasks not updated since cutoff (their runs' event
// logs are gone with server.event_retention) and returns how many.
func (p *Runs) SweepTasks(ctx context.Context, cutoff time.Time) (int64, error) {
	n, err := p.e.cfg.Store.Tasks().SweepTasks(ctx, cutoff)
	return n, taskErr(err)
}

func taskRecord(t *runs.Task) *store.TaskRecord {
	return &store.TaskRecord{TaskID: t.TaskID, ContextID: t.ContextID, RunID: t.RunID, State: t.State, Body: t.Body}
}

func taskOf(r store.TaskRecord) runs.Task {
	return runs.Task{TaskID: r.TaskID, ContextID: r.ContextID, RunID: r.RunID, Principal: r.Principal, State: r.State,
		Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Body: r.Body}
}

// taskErr maps the store's task errors to the port's.
func taskErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return runs.ErrTaskNotFound
	case errors.Is(err, store.ErrTaskExists):
		return runs.ErrTaskExists
	case errors.Is(err, store.ErrTaskVersion):
		return runs.ErrTaskVersion
	}
	return unavailable("tasks", err)
}

// Log returns a page of the stored events of run runID of principal's thread threadID
// after position after, without waiting for more (Events follows).
func (p *Runs) Log(ctx context.Context, principal, threadID, runID string, after int64) ([]runs.Event, error) {
	if _, err := p.thread(ctx, principal, threadID); err != nil {
		return nil, err
	}
	evs, err := p.e.cfg.Store.Events(ctx, threadID, runID, after, store.MaxEventsRead)
	if err != nil {
		return nil, unavailable("read events", err)
	}
	return events(evs), nil
}

// LatestLog returns a page of the stored events of the latest run of th after position
// after. th must be a thread the port returned for the caller's principal (Thread,
// ThreadsPage): unlike Log, it is not looked up again, so that a listed thread costs its
// log's read alone. A thread without a run has no events.
func (p *Runs) LatestLog(ctx context.Context, th *runs.Thread, after int64) ([]runs.Event, error) {
	if th.LastRunID == "" {
		return nil, nil
	}
	evs, err := p.e.cfg.Store.Events(ctx, th.ID, th.LastRunID, after, store.MaxEventsRead)
	if err != nil {
		return nil, unavailable("read events", err)
	}
	return events(evs), nil
}

// RunState tells whether run runID of principal's thread threadID goes on (running here,
// elsewhere, or about to be taken over) or has ended; runs.ErrRunNotFound when the store
// has no such run of principal's.
func (p *Runs) RunState(ctx context.Context, principal, threadID, runID string) (runs.RunState, error) {
	if _, err := p.thread(ctx, principal, threadID); err != nil {
		if errors.Is(err, runs.ErrThreadNotFound) || errors.Is(err, runs.ErrThreadExpired) {
			return 0, runs.ErrRunNotFound
		}
		return 0, err
	}
	rec, err := p.e.cfg.Store.GetRun(ctx, threadID, runID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, runs.ErrRunNotFound
	}
	if err != nil {
		return 0, unavailable("get run", err)
	}
	if rec.State == store.RunRunning || rec.State == store.RunLost {
		return runs.RunGoingOn, nil
	}
	return runs.RunEnded, nil
}

// Unconfirmed waits, until deadline (not at all when it has passed), for the downstream
// cancels of a run of principal's that ended on another replica to be settled, and
// describes those that were not confirmed (none when all were, or when the store cannot
// tell). See downstream.
func (p *Runs) Unconfirmed(ctx context.Context, principal, threadID, runID string, deadline time.Time) []string {
	if _, err := p.thread(ctx, principal, threadID); err != nil {
		return nil
	}
	d := downstream{st: p.e.cfg.Store, configured: p.cfg.AgentConfigured, log: p.e.log}
	return d.unconfirmed(ctx, threadID, runID, deadline)
}
