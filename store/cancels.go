package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// PendingCancel is an A2A CancelTask that the agent has not confirmed yet: the engine
// retries it until it is confirmed or its horizon passes, and records it here so that a
// restart continues it.
type PendingCancel struct {
	Agent  string
	TaskID string
	// Since is when the cancel was decided; the horizon counts from it.
	Since time.Time
	// Owner is the principal whose task it is (the engine's principal id, as threads keep
	// it; never a token): a restart continues the cancel with that principal's agent
	// credentials. "" is the anonymous principal, and the owner of cancels recorded before
	// schema version 8.
	Owner string
}

// MaxPendingCancelsRead bounds one PendingCancels call.
const MaxPendingCancelsRead = 10000

// Cancels holds the pending cancels.
type Cancels interface {
	// SavePendingCancel records a pending cancel; recording one that exists keeps its
	// first Since and Owner.
	SavePendingCancel(ctx context.Context, c PendingCancel) error
	// DeletePendingCancel forgets a cancel (confirmed, refused or abandoned); deleting an
	// absent one is no error.
	DeletePendingCancel(ctx context.Context, agent, taskID string) error
	// PendingCancels returns the pending cancels, oldest first, at most limit (capped at
	// MaxPendingCancelsRead).
	PendingCancels(ctx context.Context, limit int) ([]PendingCancel, error)
}

func checkCancel(c PendingCancel) error {
	if c.Agent == "" || c.TaskID == "" {
		return errors.New("store: pending cancel: the agent and the task id are required")
	}
	return nil
}

func (s *sqlStore) SavePendingCancel(ctx context.Context, c PendingCancel) error {
	if err := checkCancel(c); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `INSERT INTO pending_cancels (agent, task_id, since, owner) VALUES ($1, $2, $3, $4)
		ON CONFLICT (agent, task_id) DO NOTHING`, c.Agent, c.TaskID, c.Since.UnixNano(), c.Owner); err != nil {
		return fmt.Errorf("store: save pending cancel of task %q: %w", c.TaskID, err)
	}
	return nil
}

func (s *sqlStore) DeletePendingCancel(ctx context.Context, agent, taskID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `DELETE FROM pending_cancels WHERE agent = $1 AND task_id = $2`, agent, taskID); err != nil {
		return fmt.Errorf("store: delete pending cancel of task %q: %w", taskID, err)
	}
	return nil
}

func (s *sqlStore) PendingCancels(ctx context.Context, limit int) (_ []PendingCancel, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	limit = min(limit, MaxPendingCancelsRead)
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.query(ctx, s.d.q(`SELECT agent, task_id, since, owner FROM pending_cancels
		ORDER BY since, agent, task_id LIMIT $1`), limit)
	if err != nil {
		return nil, fmt.Errorf("store: pending cancels: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: pending cancels: %w", cerr)
		}
	}()
	var out []PendingCancel
	for rows.Next() {
		var c PendingCancel
		var since int64
		if err := rows.Scan(&c.Agent, &c.TaskID, &since, &c.Owner); err != nil {
			return nil, fmt.Errorf("store: pending cancels: %w", err)
		}
		c.Since = time.Unix(0, since).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: pending cancels: %w", err)
	}
	return out, nil
}

type cancelKey struct{ agent, task string }

// cancelRecord is what the memory store keeps of a pending cancel besides its key.
type cancelRecord struct {
	since time.Time
	owner string
}

func (m *memory) SavePendingCancel(ctx context.Context, c PendingCancel) error {
	if err := checkCancel(c); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	k := cancelKey{c.Agent, c.TaskID}
	if _, ok := m.cancels[k]; !ok {
		if m.cancels == nil {
			m.cancels = map[cancelKey]cancelRecord{}
		}
		m.cancels[k] = cancelRecord{since: time.Unix(0, c.Since.UnixNano()).UTC(), owner: c.Owner}
	}
	return nil
}

func (m *memory) DeletePendingCancel(ctx context.Context, agent, taskID string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.cancels, cancelKey{agent, taskID})
	return nil
}

func (m *memory) PendingCancels(ctx context.Context, limit int) ([]PendingCancel, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	limit = min(limit, MaxPendingCancelsRead)
	if limit <= 0 {
		return nil, nil
	}
	out := make([]PendingCancel, 0, len(m.cancels))
	for k, rec := range m.cancels {
		out = append(out, PendingCancel{Agent: k.agent, TaskID: k.task, Since: rec.since, Owner: rec.owner})
	}
	slices.SortFunc(out, func(a, b PendingCancel) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if c := strings.Compare(a.Agent, b.Agent); c != 0 {
			return c
		}
		return strings.Compare(a.TaskID, b.TaskID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
