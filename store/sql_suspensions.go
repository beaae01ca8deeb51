package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// sqlSuspensions are a SQL store's suspensions and their answered interrupts, settling a
// resume included: the suspension's deletion and its answers' record, fenced by the epoch of
// the run that settles them, in one transaction.
type sqlSuspensions struct {
	*sqlConn
	d *dialect // the SQL it writes
}

func (s sqlSuspensions) SaveSuspension(ctx context.Context, sus *Suspension) error {
	if err := checkSave(sus); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	stamp(sus, time.Now().UTC())
	body, err := encode(sus)
	if err != nil {
		return err
	}
	var next sql.NullInt64
	if t := nextExpiry(sus); !t.IsZero() {
		next = sql.NullInt64{Int64: t.UnixNano(), Valid: true}
	}
	err = s.tx(ctx, sus.ThreadID, func(ctx context.Context, tx *sql.Tx) error {
		if sus.Epoch != 0 {
			if err := s.checkEpoch(ctx, tx, s.d, sus.ThreadID, sus.writer(), sus.Epoch); err != nil {
				return err
			}
		}
		_, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO suspensions
		(thread_id, run_id, owner, body, next_expiry, created_at, updated_at, open_interrupts)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (thread_id) DO UPDATE SET
			run_id = excluded.run_id, owner = excluded.owner, body = excluded.body,
			next_expiry = excluded.next_expiry, created_at = excluded.created_at,
			updated_at = excluded.updated_at, open_interrupts = excluded.open_interrupts`),
			sus.ThreadID, sus.RunID, sus.Owner, string(body), next,
			sus.CreatedAt.UnixNano(), sus.UpdatedAt.UnixNano(), len(sus.Interrupts))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save suspension of thread %q: %w", sus.ThreadID, err)
	}
	return nil
}

func (s sqlSuspensions) LoadSuspension(ctx context.Context, threadID string) (*Suspension, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var body string
	err := s.queryRow(ctx, s.d.q(`SELECT body FROM suspensions WHERE thread_id = $1`), threadID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(threadID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: load suspension of thread %q: %w", threadID, err)
	}
	return decode([]byte(body))
}

func (s sqlSuspensions) DeleteSuspension(ctx context.Context, threadID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, s.d.q(`DELETE FROM suspensions WHERE thread_id = $1`), threadID); err != nil {
		return fmt.Errorf("store: delete suspension of thread %q: %w", threadID, err)
	}
	return nil
}

func (s sqlSuspensions) MarkResolved(ctx context.Context, threadID string, ids []string) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		return s.markResolved(ctx, tx, threadID, ids)
	})
	if err != nil {
		return fmt.Errorf("store: mark resolved on thread %q: %w", threadID, err)
	}
	return nil
}

func (s sqlSuspensions) IsResolved(ctx context.Context, threadID, interruptID string) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	var one int
	err := s.queryRow(ctx, s.d.q(`SELECT 1 FROM resolved WHERE thread_id = $1 AND interrupt_id = $2`),
		threadID, interruptID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store: is resolved on thread %q: %w", threadID, err)
	}
	return true, nil
}

func (s sqlSuspensions) Expired(ctx context.Context, now time.Time) (_ []*Suspension, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT body FROM suspensions
		WHERE next_expiry IS NOT NULL AND next_expiry <= $1 ORDER BY next_expiry, thread_id`), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("store: expired: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: expired: %w", cerr)
		}
	}()
	var out []*Suspension
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("store: expired: %w", err)
		}
		sus, err := decode([]byte(body))
		if err != nil {
			return nil, err
		}
		out = append(out, sus)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: expired: %w", err)
	}
	return out, nil
}

func (s sqlSuspensions) ClaimExpired(ctx context.Context, now time.Time, limit int) (_ []*Suspension, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []*Suspension
	err = s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		out = nil // a job run again starts over
		// As in ClaimLapsedRuns: the candidates are picked once (a materialised CTE, rows
		// locked and others' locked rows skipped), and the condition is checked again on the
		// rows deleted, since a claimer that waited for a lock re-checks only that.
		const due = `next_expiry IS NOT NULL AND next_expiry <= $1`
		busy := `EXISTS (SELECT 1 FROM runs WHERE runs.thread_id = suspensions.thread_id
			AND runs.state = 'running' AND runs.lease_until > ` + s.d.nowNS + `)`
		rows, err := tx.QueryContext(ctx, s.d.q(`WITH picked AS MATERIALIZED (
				SELECT thread_id FROM suspensions WHERE `+due+` AND NOT `+busy+`
				ORDER BY next_expiry, thread_id LIMIT $2 `+s.d.skipLocked+`)
			DELETE FROM suspensions WHERE thread_id IN (SELECT thread_id FROM picked) AND `+due+`
			RETURNING body`), now.UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var body string
			if err := rows.Scan(&body); err != nil {
				return err
			}
			sus, err := decode([]byte(body))
			if err != nil {
				return err
			}
			out = append(out, sus)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim expired: %w", err)
	}
	return out, nil
}

func (s sqlSuspensions) CloseSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		if epoch != 0 {
			// First in the transaction: on PostgreSQL it share-locks the run's row, so a
			// takeover either committed before (refused here) or waits for this commit.
			if err := s.checkEpoch(ctx, tx, s.d, threadID, runID, epoch); err != nil {
				return err
			}
		}
		if s.afterGuard != nil {
			s.afterGuard()
		}
		if err := s.markResolved(ctx, tx, threadID, ids); err != nil {
			return err
		}
		_, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM suspensions WHERE thread_id = $1`), threadID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: settle suspension of thread %q for run %q: %w", threadID, runID, err)
	}
	return nil
}

// markResolved records ids as answered inside tx, keeping the newest MaxResolvedPerThread
// of the thread.
func (s sqlSuspensions) markResolved(ctx context.Context, tx *sql.Tx, threadID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var seq int64
	if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT COALESCE(MAX(seq), 0) FROM resolved WHERE thread_id = $1`), threadID).Scan(&seq); err != nil {
		return err
	}
	for _, id := range ids {
		seq++
		// Marking again makes the id the most recent one.
		if _, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO resolved (thread_id, interrupt_id, seq) VALUES ($1, $2, $3)
			ON CONFLICT (thread_id, interrupt_id) DO UPDATE SET seq = excluded.seq`), threadID, id, seq); err != nil {
			return err
		}
	}
	// Keep the newest MaxResolvedPerThread: drop everything at or below the seq of the
	// first one past the bound (no row there means nothing to drop).
	_, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM resolved WHERE thread_id = $1 AND seq <= (
			SELECT seq FROM resolved WHERE thread_id = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)`),
		threadID, MaxResolvedPerThread)
	return err
}
