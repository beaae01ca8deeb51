package store

import (
	"context"
	"slices"
	"strings"
	"time"
)

// memCancels are the memory store's pending cancels (Cancels), with their Since and Owner.
type memCancels struct {
	*memState
	cancels map[cancelKey]cancelRecord
}

// cancelKey is the key of a pending cancel in the memory store.
type cancelKey struct{ agent, task string }

// cancelRecord is what the memory store keeps of a pending cancel besides its key.
type cancelRecord struct {
	since time.Time
	owner string
}

func (m *memCancels) SavePendingCancel(ctx context.Context, c PendingCancel) error {
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

func (m *memCancels) DeletePendingCancel(ctx context.Context, agent, taskID string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.cancels, cancelKey{agent, taskID})
	return nil
}

func (m *memCancels) PendingCancels(ctx context.Context, limit int) ([]PendingCancel, error) {
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
