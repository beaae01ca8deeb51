package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// threadTables are the tables that hold a thread's rows, the threads table last.
var threadTables = []string{"events", "messages", "journal", "runs", "suspensions", "resolved", "threads"}

// deleteThreadRows deletes every row of a thread inside tx.
func (s *sqlStore) deleteThreadRows(ctx context.Context, tx *sql.Tx, threadID string) error {
	for _, table := range threadTables {
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM `+table+` WHERE thread_id = $1`), threadID); err != nil {
			return err
		}
	}
	return nil
}

// claimNew creates the thread for owner inside tx unless it exists; with max > 0 a new
// thread beyond the owner's max fails with ErrTooManyThreads. The owner's lock (PostgreSQL)
// is taken only for a new thread: a thread that exists costs one indexed read more.
func (s *sqlStore) claimNew(ctx context.Context, tx *sql.Tx, threadID, owner, title string, max int) error {
	if max > 0 {
		var one int
		err := s.txQueryRow(ctx, tx, s.d.q(`SELECT 1 FROM threads WHERE thread_id = $1`), threadID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if s.d.lockOwner != "" {
				if _, err := s.txExec(ctx, tx, s.d.q(s.d.lockOwner), owner); err != nil {
					return err
				}
			}
			var n int
			if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT COUNT(*) FROM threads WHERE owner = $1`), owner).Scan(&n); err != nil {
				return err
			}
			if n >= max {
				return ErrTooManyThreads
			}
		case err != nil:
			return err
		}
	}
	// ON CONFLICT DO NOTHING: of two replicas creating the same thread, one inserts and
	// the other reads the winner's owner.
	_, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`), threadID, owner, title, time.Now().UnixNano())
	return err
}

func (s *sqlStore) ClaimThreadCapped(ctx context.Context, threadID, owner, title string, max int) (*Thread, error) {
	if max <= 0 {
		return s.ClaimThread(ctx, threadID, owner, title)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		return s.claimNew(ctx, tx, threadID, owner, title, max)
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim thread %q: %w", threadID, err)
	}
	t, err := s.GetThread(ctx, threadID)
	if err != nil {
		return nil, err
	}
	if t.Owner != owner {
		return nil, fmt.Errorf("store: claim thread %q: %w", threadID, ErrThreadOwned)
	}
	return t, nil
}

// sweepable is the condition on a thread t that SweepThreads deletes ($1: the cutoff).
const sweepable = `t.updated_at < $1
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = t.thread_id
		AND (r.state = 'running' OR (r.state = 'lost' AND r.reaped = 0) OR r.updated_at >= $1))
	AND NOT EXISTS (SELECT 1 FROM suspensions x WHERE x.thread_id = t.thread_id)`

func (s *sqlStore) SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	var n int64
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		n = 0 // a job run again starts over
		if s.d.trySweep != "" {
			var got bool
			if err := s.txQueryRow(ctx, tx, s.d.trySweep).Scan(&got); err != nil {
				return err
			}
			if !got {
				return nil // another replica sweeps
			}
		}
		ids, err := s.sweepCandidates(ctx, tx, cutoff, limit)
		if err != nil {
			return err
		}
		for _, id := range ids {
			// The thread's own lock, then the condition again: a run may have begun on
			// it since the candidates were read.
			if s.d.lockThread != "" {
				if _, err := s.txExec(ctx, tx, s.d.q(s.d.lockThread), id); err != nil {
					return err
				}
			}
			var one int
			err := s.txQueryRow(ctx, tx, s.d.q(`SELECT 1 FROM threads t WHERE t.thread_id = $2 AND `+sweepable),
				cutoff.UnixNano(), id).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			if err := s.deleteThreadRows(ctx, tx, id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: sweep threads: %w", err)
	}
	return n, nil
}

// sweepCandidates returns at most limit threads SweepThreads may delete, oldest first.
func (s *sqlStore) sweepCandidates(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) (_ []string, err error) {
	rows, err := tx.QueryContext(ctx, s.d.q(`SELECT t.thread_id FROM threads t WHERE `+sweepable+`
		ORDER BY t.updated_at, t.thread_id LIMIT $2`), cutoff.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
