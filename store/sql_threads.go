package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// sqlThreads are a SQL store's threads and their messages.
type sqlThreads struct {
	*sqlConn
	d *dialect // the SQL it writes
}

// threadTables are the tables that hold a thread's rows, the threads table last.
var threadTables = []string{"events", "messages", "journal", "runs", "suspensions", "resolved", "spend_threads", "threads"}

// deleteThreadRows deletes every row of a thread inside tx.
func (s sqlThreads) deleteThreadRows(ctx context.Context, tx *sql.Tx, threadID string) error {
	for _, table := range threadTables {
		if _, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM `+table+` WHERE thread_id = $1`), threadID); err != nil {
			return err
		}
	}
	return nil
}

// claimNew creates the thread for owner inside tx unless it exists, and reports whether it
// did; with max > 0 a new thread beyond the owner's max fails with ErrTooManyThreads. The
// owner's lock (PostgreSQL) is taken only for a new thread: a thread that exists costs one
// indexed read more.
func (s sqlThreads) claimNew(ctx context.Context, tx *sql.Tx, threadID, owner, title string, max int) (bool, error) {
	if max > 0 {
		var one int
		err := s.txQueryRow(ctx, tx, s.d.q(`SELECT 1 FROM threads WHERE thread_id = $1`), threadID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if s.d.lockOwner != "" {
				if _, err := s.txExec(ctx, tx, s.d.q(s.d.lockOwner), owner); err != nil {
					return false, err
				}
			}
			var n int
			if err := s.txQueryRow(ctx, tx, s.d.q(countOwnerThreads), owner).Scan(&n); err != nil {
				return false, err
			}
			if n >= max {
				return false, ErrTooManyThreads
			}
		case err != nil:
			return false, err
		}
	}
	// ON CONFLICT DO NOTHING: of two replicas creating the same thread, one inserts and
	// the other reads the winner's owner.
	res, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`), threadID, owner, title, time.Now().UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, nil
}

func (s sqlThreads) ClaimThreadCapped(ctx context.Context, threadID, owner, title string, max int) (*Thread, error) {
	if max <= 0 {
		return s.ClaimThread(ctx, threadID, owner, title)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.claimNew(ctx, tx, threadID, owner, title, max)
		return err
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

func (s sqlThreads) SweepThreads(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
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
			// The tombstone in the same transaction: a client coming back with the id is
			// told the thread expired (THREAD_EXPIRED), never silently given a new one.
			if _, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO thread_tombstones (thread_id, owner, swept_at)
				SELECT thread_id, owner, $2 FROM threads WHERE thread_id = $1 ON CONFLICT (thread_id) DO NOTHING`),
				id, time.Now().UnixNano()); err != nil {
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
func (s sqlThreads) sweepCandidates(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) (_ []string, err error) {
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

// threadCols are the columns of a Thread, with its running state and open interrupts.
func (s sqlThreads) threadCols() string {
	return `t.thread_id, t.owner, t.title, t.created_at, t.updated_at, t.last_run_id, t.last_run_at,
		EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = t.thread_id AND r.state = 'running' AND r.lease_until > ` + s.d.nowNS + `),
		COALESCE((SELECT open_interrupts FROM suspensions x WHERE x.thread_id = t.thread_id), 0)`
}

func scanThread(sc scanner) (*Thread, error) {
	var t Thread
	var created, updated, lastRun int64
	if err := sc.Scan(&t.ID, &t.Owner, &t.Title, &created, &updated, &t.LastRunID, &lastRun, &t.Running, &t.OpenInterrupts); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromNS(created), fromNS(updated)
	if lastRun != 0 {
		t.LastRunAt = fromNS(lastRun)
	}
	return &t, nil
}

func (s sqlThreads) ClaimThread(ctx context.Context, threadID, owner, title string) (*Thread, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	// ON CONFLICT DO NOTHING: of two replicas creating the same thread, one inserts and
	// the other reads the winner's owner below.
	if _, err := s.exec(ctx, s.d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`), threadID, owner, title, now); err != nil {
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

func (s sqlThreads) GetThread(ctx context.Context, threadID string) (*Thread, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	t, err := scanThread(s.queryRow(ctx, s.d.q(`SELECT `+s.threadCols()+` FROM threads t WHERE t.thread_id = $1`), threadID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: thread %q: %w", threadID, err)
	}
	return t, nil
}

func (s sqlThreads) ListThreads(ctx context.Context, owner string, limit int) (_ []Thread, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.query(ctx, s.d.q(`SELECT `+s.threadCols()+` FROM threads t WHERE t.owner = $1
		ORDER BY t.updated_at DESC, t.thread_id LIMIT $2`), owner, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list threads: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: list threads: %w", cerr)
		}
	}()
	out := []Thread{}
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list threads: %w", err)
		}
		out = append(out, *t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list threads: %w", err)
	}
	return out, nil
}

func (s sqlThreads) DeleteThread(ctx context.Context, threadID string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := s.tx(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
		var busy bool
		if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = $1
			AND state = 'running' AND lease_until > `+s.d.nowNS+`)`), threadID).Scan(&busy); err != nil {
			return err
		}
		if busy {
			return ErrThreadBusy
		}
		return s.deleteThreadRows(ctx, tx, threadID)
	})
	if err != nil {
		return fmt.Errorf("store: delete thread %q: %w", threadID, err)
	}
	return nil
}

// heldElse reads whether the store holds anything of thread $1 besides its record: rows
// written without a claim, or by a store older than the threads' records.
const heldElse = `SELECT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1)
	OR EXISTS (SELECT 1 FROM suspensions WHERE thread_id = $1) OR EXISTS (SELECT 1 FROM runs WHERE thread_id = $1)`

// claimInTx inserts the thread of rs unless it exists and returns its owner and whether
// it inserted it with nothing else of the thread stored (Started.NewThread), inside a run
// start's transaction.
func (s sqlThreads) claimInTx(ctx context.Context, tx *sql.Tx, rs RunStart) (owner string, fresh bool, err error) {
	owner, created, err := s.claimRow(ctx, tx, rs)
	if err != nil || !created {
		return owner, false, err
	}
	var held bool
	err = s.txQueryRow(ctx, tx, s.d.q(heldElse), rs.ThreadID).Scan(&held)
	return owner, !held, err
}

// claimRow inserts the thread of rs unless it exists and returns its owner and whether it
// inserted it. On PostgreSQL it is one statement (the inserted row, or the stored
// one), one round trip fewer; a row that a concurrent ClaimThread committed while the
// statement waited on it is not in the statement's snapshot, and is read again.
func (s sqlThreads) claimRow(ctx context.Context, tx *sql.Tx, rs RunStart) (owner string, created bool, err error) {
	if rs.MaxThreads > 0 {
		// A capped owner's new thread is counted under the owner's lock first (claimNew).
		if created, err = s.claimNew(ctx, tx, rs.ThreadID, rs.Owner, rs.Title, rs.MaxThreads); err != nil || created {
			// A row this transaction inserted is rs.Owner's: nothing to read.
			return rs.Owner, created, err
		}
		err = s.txQueryRow(ctx, tx, s.d.q(`SELECT owner FROM threads WHERE thread_id = $1`), rs.ThreadID).Scan(&owner)
		return owner, false, err
	}
	now := time.Now().UnixNano()
	if s.w == nil {
		err = tx.QueryRowContext(ctx, `WITH ins AS (INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING RETURNING owner)
			SELECT owner, true FROM ins UNION ALL SELECT owner, false FROM threads WHERE thread_id = $1 LIMIT 1`,
			rs.ThreadID, rs.Owner, rs.Title, now).Scan(&owner, &created)
		if !errors.Is(err, sql.ErrNoRows) {
			return owner, created, err
		}
	} else {
		res, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4) ON CONFLICT (thread_id) DO NOTHING`), rs.ThreadID, rs.Owner, rs.Title, now)
		if err != nil {
			return "", false, err
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return rs.Owner, true, nil // this transaction's row: nothing to read
		}
	}
	err = s.txQueryRow(ctx, tx, s.d.q(`SELECT owner FROM threads WHERE thread_id = $1`), rs.ThreadID).Scan(&owner)
	return owner, false, err
}

func (s sqlThreads) SaveMessages(ctx context.Context, threadID string, msgs []Message) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("store: save messages of thread %q: %w", threadID, err)
	}
	if len(msgs) == 0 {
		return nil
	}
	var err error
	if s.pg != nil && distinctIDs(msgs) {
		err = unavailable(s.pg.saveMessages(ctx, threadID, msgs))
		s.health.note(err)
	} else {
		err = s.txBulk(ctx, threadID, func(ctx context.Context, tx *sql.Tx) error {
			return s.saveMessages(ctx, tx, threadID, msgs)
		})
	}
	if err != nil {
		return fmt.Errorf("store: save messages of thread %q: %w", threadID, err)
	}
	return nil
}

// checkMessages refuses messages SaveMessages cannot store: without an id, or not JSON.
func checkMessages(msgs []Message) error {
	for _, m := range msgs {
		if m.ID == "" {
			return errors.New("a message has no id")
		}
		if !json.Valid(m.Data) {
			return fmt.Errorf("message %q is not JSON", m.ID)
		}
	}
	return nil
}

// saveMessages is SaveMessages inside tx: new ids are appended in order, a known id keeps
// its position, and the thread keeps its newest MaxMessagesPerThread.
func (s sqlThreads) saveMessages(ctx context.Context, tx *sql.Tx, threadID string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if s.w == nil && distinctIDs(msgs) {
		// PostgreSQL: all messages in one statement (one round trip instead of one per
		// message and one for the last position), numbered after the thread's last in
		// their order. The transaction holds the thread's lock, taken by an earlier
		// statement, so this statement's snapshot sees every committed message of the
		// thread. Ids repeated in one call take the loop below (ON CONFLICT cannot update
		// a row twice in one statement).
		ids, data := make([]string, len(msgs)), make([]string, len(msgs))
		for i, m := range msgs {
			ids[i], data[i] = m.ID, string(m.Data)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages (thread_id, message_id, pos, data)
			SELECT $1, m.id, (SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1) + m.n, m.data
			FROM unnest($2::TEXT[], $3::TEXT[]) WITH ORDINALITY AS m(id, data, n)
			ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`, threadID, ids, data); err != nil {
			return err
		}
		return s.trimMessages(ctx, tx, threadID)
	}
	var pos int64
	if err := s.txQueryRow(ctx, tx, s.d.q(`SELECT COALESCE(MAX(pos), 0) FROM messages WHERE thread_id = $1`), threadID).Scan(&pos); err != nil {
		return err
	}
	return s.insertMessagesAfter(ctx, tx, threadID, msgs, pos)
}

// insertMessagesAfter is saveMessages' statement per message, for a thread whose last
// position is pos (SQLite, and ids repeated in one call on PostgreSQL).
func (s sqlThreads) insertMessagesAfter(ctx context.Context, tx *sql.Tx, threadID string, msgs []Message, pos int64) error {
	for _, m := range msgs {
		pos++
		// A known id keeps its position (ON CONFLICT updates only the data).
		if _, err := s.txExec(ctx, tx, s.d.q(`INSERT INTO messages (thread_id, message_id, pos, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (thread_id, message_id) DO UPDATE SET data = excluded.data`), threadID, m.ID, pos, string(m.Data)); err != nil {
			return err
		}
	}
	if pos <= MaxMessagesPerThread {
		// Positions are numbered from 1, one per row: the thread holds at most pos
		// messages, none to trim (a statement fewer per save).
		return nil
	}
	return s.trimMessages(ctx, tx, threadID)
}

// trimMessages keeps the thread's newest MaxMessagesPerThread messages (inside tx).
func (s sqlThreads) trimMessages(ctx context.Context, tx *sql.Tx, threadID string) error {
	_, err := s.txExec(ctx, tx, s.d.q(`DELETE FROM messages WHERE thread_id = $1 AND pos <= (
			SELECT pos FROM messages WHERE thread_id = $1 ORDER BY pos DESC LIMIT 1 OFFSET $2)`),
		threadID, MaxMessagesPerThread)
	return err
}

// distinctIDs reports whether no two of msgs have the same id.
func distinctIDs(msgs []Message) bool {
	seen := make(map[string]struct{}, len(msgs))
	for _, m := range msgs {
		if _, dup := seen[m.ID]; dup {
			return false
		}
		seen[m.ID] = struct{}{}
	}
	return true
}

func (s sqlThreads) LoadMessages(ctx context.Context, threadID string) (_ []Message, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.d.q(`SELECT message_id, data FROM messages WHERE thread_id = $1 ORDER BY pos`), threadID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: messages of thread %q: %w", threadID, cerr)
		}
	}()
	out := []Message{}
	for rows.Next() {
		var m Message
		var data string
		if err := rows.Scan(&m.ID, &data); err != nil {
			return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
		}
		m.Data = json.RawMessage(data)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: messages of thread %q: %w", threadID, err)
	}
	return out, nil
}

// recentPage is how many messages LoadRecentMessages reads per query: a page is held at
// once, and the messages before the caller's start are never read past the page it is in.
const recentPage = 8

func (s sqlThreads) LoadRecentMessages(ctx context.Context, threadID string, start func(Message) bool) ([]Message, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	// Pages from the newest back, one query each: a query read to its end never holds more
	// than a page, whereas closing a query early would still make PostgreSQL's client read
	// (and drop) every row it sent.
	var back []Message
	before := int64(math.MaxInt64)
	for {
		page, last, err := s.messagesBefore(ctx, threadID, before)
		if err != nil {
			return nil, fmt.Errorf("store: recent messages of thread %q: %w", threadID, err)
		}
		for _, m := range page {
			back = append(back, m)
			if start(m) {
				slices.Reverse(back)
				return back, nil
			}
		}
		if len(page) < recentPage {
			slices.Reverse(back)
			return back, nil
		}
		before = last
	}
}

// messagesBefore is a page of the thread's messages before position before, newest first,
// and the position of its last (oldest).
func (s sqlThreads) messagesBefore(ctx context.Context, threadID string, before int64) (_ []Message, last int64, err error) {
	rows, err := s.query(ctx, s.d.q(`SELECT message_id, pos, data FROM messages WHERE thread_id = $1 AND pos < $2
		ORDER BY pos DESC LIMIT $3`), threadID, before, recentPage)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var page []Message
	for rows.Next() {
		var m Message
		var data string
		if err := rows.Scan(&m.ID, &last, &data); err != nil {
			return nil, 0, err
		}
		m.Data = json.RawMessage(data)
		page = append(page, m)
	}
	return page, last, rows.Err()
}

// ThreadStatus implements Threads: one statement of three indexed lookups (one round trip
// on PostgreSQL, where the three reads it replaces were three).
func (s sqlThreads) ThreadStatus(ctx context.Context, threadID string) (ThreadStatus, error) {
	if err := s.check(); err != nil {
		return ThreadStatus{}, err
	}
	var st ThreadStatus
	var suspOwner, sweptOwner sql.NullString
	err := s.queryRow(ctx, s.d.q(`SELECT EXISTS (SELECT 1 FROM messages WHERE thread_id = $1),
		(SELECT owner FROM suspensions WHERE thread_id = $1),
		(SELECT owner FROM thread_tombstones WHERE thread_id = $1)`), threadID).Scan(&st.HasMessages, &suspOwner, &sweptOwner)
	if err != nil {
		return ThreadStatus{}, fmt.Errorf("store: thread %q: %w", threadID, err)
	}
	st.Suspended, st.SuspensionOwner = suspOwner.Valid, suspOwner.String
	st.Expired, st.ExpiredOwner = sweptOwner.Valid, sweptOwner.String
	return st, nil
}

func (s sqlThreads) ExpiredThread(ctx context.Context, threadID string) (string, bool, error) {
	if err := s.check(); err != nil {
		return "", false, err
	}
	var owner string
	err := s.queryRow(ctx, s.d.q(`SELECT owner FROM thread_tombstones WHERE thread_id = $1`), threadID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("store: thread %q: %w", threadID, err)
	}
	return owner, true, nil
}
