package store

import (
	"context"
	"database/sql"
	"fmt"
)

// sqlSettler is sqlStore's settling of resumes: the suspension's deletion and its answers'
// record, fenced by the epoch of the run that settles them, in one transaction. It is a
// type of its own, embedded in sqlStore, so that the store's own method set stays small.
type sqlSettler struct{ s *sqlStore }

// withSettler sets s's settler to s and returns s.
func withSettler(s *sqlStore) *sqlStore {
	s.sqlSettler = sqlSettler{s}
	return s
}

func (st sqlSettler) SettleSuspension(ctx context.Context, threadID, runID string, epoch int64, ids []string) error {
	s := st.s
	if err := s.check(); err != nil {
		return err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		if epoch != 0 {
			// First in the transaction: on PostgreSQL it share-locks the run's row, so a
			// takeover either committed before (refused here) or waits for this commit.
			if err := s.checkEpoch(ctx, tx, threadID, runID, epoch); err != nil {
				return err
			}
		}
		if s.afterGuard != nil {
			s.afterGuard()
		}
		if err := st.markResolved(ctx, tx, threadID, ids); err != nil {
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
func (st sqlSettler) markResolved(ctx context.Context, tx *sql.Tx, threadID string, ids []string) error {
	s := st.s
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
