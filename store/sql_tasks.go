package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// schemaTasks adds the A2A tasks Baton serves (tasks.go, design/a2a-server.md): the
// columns ListTasks filters on, and the task as a JSON document. Times are Unix ns.
const schemaTasks = `CREATE TABLE a2a_tasks (
		task_id    TEXT PRIMARY KEY,
		context_id TEXT NOT NULL,
		run_id     TEXT NOT NULL DEFAULT '',
		principal  TEXT NOT NULL,
		state      TEXT NOT NULL,
		version    BIGINT NOT NULL,
		created_at BIGINT NOT NULL,
		updated_at BIGINT NOT NULL,
		body       TEXT NOT NULL
	);
	CREATE INDEX a2a_tasks_principal ON a2a_tasks (principal, updated_at);
	CREATE INDEX a2a_tasks_context ON a2a_tasks (principal, context_id, updated_at);
	CREATE INDEX a2a_tasks_updated ON a2a_tasks (updated_at);`

const taskCols = `task_id, context_id, run_id, principal, state, version, created_at, updated_at, body`

// sqlTasks is the SQL stores' A2A tasks (Tasks), in the a2a_tasks table.
type sqlTasks struct {
	s *sqlConn
	d *dialect // the SQL it writes
}

func scanTask(sc scanner) (TaskRecord, error) {
	var t TaskRecord
	var created, updated int64
	var body string
	err := sc.Scan(&t.TaskID, &t.ContextID, &t.RunID, &t.Principal, &t.State, &t.Version, &created, &updated, &body)
	t.CreatedAt, t.UpdatedAt, t.Body = fromNS(created), fromNS(updated), []byte(body)
	return t, err
}

func (ts sqlTasks) CreateTask(ctx context.Context, t *TaskRecord) error {
	if err := checkTask(t); err != nil {
		return err
	}
	if err := ts.s.check(); err != nil {
		return err
	}
	now := fromNS(time.Now().UnixNano())
	res, err := ts.s.exec(ctx, ts.d.q(`INSERT INTO a2a_tasks (`+taskCols+`) VALUES ($1, $2, $3, $4, $5, 1, $6, $6, $7)
		ON CONFLICT (task_id) DO NOTHING`), t.TaskID, t.ContextID, t.RunID, t.Principal, t.State, now.UnixNano(), string(t.Body))
	if err != nil {
		return fmt.Errorf("store: create task %q: %w", t.TaskID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: create task %q: %w", t.TaskID, ErrTaskExists)
	}
	t.Version, t.CreatedAt, t.UpdatedAt = 1, now, now
	return nil
}

func (ts sqlTasks) UpdateTask(ctx context.Context, t *TaskRecord, prev int64) error {
	if err := checkTask(t); err != nil {
		return err
	}
	if err := ts.s.check(); err != nil {
		return err
	}
	now := fromNS(time.Now().UnixNano())
	var principal string
	var created int64
	err := ts.s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		err := ts.s.txQueryRow(ctx, tx, ts.d.q(`UPDATE a2a_tasks SET context_id = $2, run_id = $3, state = $4, version = $5 + 1,
			updated_at = $6, body = $7 WHERE task_id = $1 AND version = $5 RETURNING principal, created_at`),
			t.TaskID, t.ContextID, t.RunID, t.State, prev, now.UnixNano(), string(t.Body)).Scan(&principal, &created)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var v int64
		if err := ts.s.txQueryRow(ctx, tx, ts.d.q(`SELECT version FROM a2a_tasks WHERE task_id = $1`), t.TaskID).Scan(&v); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		return ErrTaskVersion
	})
	if err != nil {
		return fmt.Errorf("store: update task %q: %w", t.TaskID, err)
	}
	t.Version, t.Principal, t.CreatedAt, t.UpdatedAt = prev+1, principal, fromNS(created), now
	return nil
}

func (ts sqlTasks) GetTask(ctx context.Context, taskID string) (*TaskRecord, error) {
	if err := ts.s.check(); err != nil {
		return nil, err
	}
	t, err := scanTask(ts.s.queryRow(ctx, ts.d.q(`SELECT `+taskCols+` FROM a2a_tasks WHERE task_id = $1`), taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: task %q: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: task %q: %w", taskID, err)
	}
	return &t, nil
}

func (ts sqlTasks) ListTasks(ctx context.Context, q TaskQuery) (_ []TaskRecord, total int, err error) {
	if err := ts.s.check(); err != nil {
		return nil, 0, err
	}
	q.normalize()
	where := []string{"principal = $1"}
	args := []any{q.Principal}
	if q.ContextID != "" {
		args = append(args, q.ContextID)
		where = append(where, fmt.Sprintf("context_id = $%d", len(args)))
	}
	if q.State != "" {
		args = append(args, q.State)
		where = append(where, fmt.Sprintf("state = $%d", len(args)))
	}
	if !q.UpdatedAfter.IsZero() {
		args = append(args, q.UpdatedAfter.UnixNano())
		where = append(where, fmt.Sprintf("updated_at > $%d", len(args)))
	}
	cond := strings.Join(where, " AND ")
	if err := ts.s.queryRow(ctx, ts.d.q(`SELECT COUNT(*) FROM a2a_tasks WHERE `+cond), args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("store: list tasks: %w", err)
	}
	args = append(args, q.Limit, q.Offset)
	rows, err := ts.s.query(ctx, ts.d.q(fmt.Sprintf(`SELECT `+taskCols+` FROM a2a_tasks WHERE `+cond+
		` ORDER BY updated_at DESC, task_id LIMIT $%d OFFSET $%d`, len(args)-1, len(args))), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: list tasks: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: list tasks: %w", unavailable(cerr))
		}
	}()
	out := []TaskRecord{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("store: list tasks: %w", unavailable(err))
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("store: list tasks: %w", unavailable(err))
	}
	return out, total, nil
}

func (ts sqlTasks) SweepTasks(ctx context.Context, cutoff time.Time) (int64, error) {
	if err := ts.s.check(); err != nil {
		return 0, err
	}
	res, err := ts.s.exec(ctx, ts.d.q(`DELETE FROM a2a_tasks WHERE updated_at < $1`), cutoff.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: sweep tasks: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
