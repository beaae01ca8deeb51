package store

import (
	"context"
	"fmt"
	"time"
)

// sqlCancels are a SQL store's pending cancels (Cancels).
type sqlCancels struct {
	*sqlConn
	d *dialect // the SQL it writes
}

func (s sqlCancels) SavePendingCancel(ctx context.Context, c PendingCancel) error {
	if err := checkCancel(c); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, s.d.q(`INSERT INTO pending_cancels (agent, task_id, since, owner) VALUES ($1, $2, $3, $4)
		ON CONFLICT (agent, task_id) DO NOTHING`), c.Agent, c.TaskID, c.Since.UnixNano(), c.Owner); err != nil {
		return fmt.Errorf("store: save pending cancel of task %q: %w", c.TaskID, err)
	}
	return nil
}

func (s sqlCancels) DeletePendingCancel(ctx context.Context, agent, taskID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, s.d.q(`DELETE FROM pending_cancels WHERE agent = $1 AND task_id = $2`), agent, taskID); err != nil {
		return fmt.Errorf("store: delete pending cancel of task %q: %w", taskID, err)
	}
	return nil
}

func (s sqlCancels) PendingCancels(ctx context.Context, limit int) (_ []PendingCancel, err error) {
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
