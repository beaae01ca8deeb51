package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// A principal's threads of one id family (the id up to its first '-': "mcp-" for the threads
// an MCP call started), newest first by creation, a page at a time from a cursor (keyset
// pagination): tasks/list reads one page with one index range, whatever the number of
// threads the principal holds and whatever other families it holds them in. The index leads
// with the owner and the family (an expression of the id, the same text in the index and in
// the query, which is what lets SQLite use it), then the creation time and the id, so a
// page is a range read backwards from the cursor, with no sort and no row skipped.

// MaxThreadsPage bounds the threads one ThreadsPage returns.
const MaxThreadsPage = 1000

// ErrBadFamily is wrapped by ThreadsPage's error for a prefix that is not an id family.
var ErrBadFamily = errors.New("store: not a thread id family")

// ThreadCursor is a position in a principal's threads newest first: the thread created at
// CreatedAt (to the nanosecond, as stored) with id ID. A page after it starts with the next
// older thread (on equal creation times, the next smaller id), so threads created meanwhile,
// which are newer, never shift a page.
type ThreadCursor struct {
	CreatedAt time.Time
	ID        string
}

// CursorOf returns the position of t, for the page after it.
func CursorOf(t Thread) ThreadCursor { return ThreadCursor{CreatedAt: t.CreatedAt, ID: t.ID} }

// checkFamily accepts an id family: at least one byte, then the only '-', last.
func checkFamily(prefix string) error {
	if i := strings.IndexByte(prefix, '-'); i < 1 || i != len(prefix)-1 {
		return fmt.Errorf("%w: %q (want the id up to its first '-', such as \"mcp-\")", ErrBadFamily, prefix)
	}
	return nil
}

// schemaThreadsFamilySQLite is the SQLite migration (version 16): threads by owner, id family
// and creation (ThreadsPage).
const schemaThreadsFamilySQLite = `CREATE INDEX threads_owner_family_created ON threads
	(owner, substr(thread_id, 1, instr(thread_id, '-')), created_at, thread_id);`

// schemaThreadsFamilyPostgres is the PostgreSQL migration (version 16). The id is indexed
// (and compared) in the "C" collation, as SQLite and the memory store order it: byte order,
// whatever the database's default collation, so that ties on a creation time page the same
// on every backend.
const schemaThreadsFamilyPostgres = `CREATE INDEX threads_owner_family_created ON threads
	(owner, (substr(thread_id, 1, strpos(thread_id, '-'))), created_at, thread_id COLLATE "C");`

// pageSQL returns the query of ThreadsPage in dialect d: $1 owner, $2 family, $3 and $4 the
// cursor's creation time and id, $5 the limit. The creation time's bound is a range on the
// index (<=); the id breaks the ties only.
func (s sqlThreads) pageSQL() string {
	family, id := `substr(t.thread_id, 1, instr(t.thread_id, '-'))`, `t.thread_id`
	if s.d == postgresDialect {
		family, id = `substr(t.thread_id, 1, strpos(t.thread_id, '-'))`, `t.thread_id COLLATE "C"`
	}
	return s.d.q(`SELECT ` + s.threadCols() + ` FROM threads t
		WHERE t.owner = $1 AND ` + family + ` = $2 AND t.created_at <= $3 AND (t.created_at < $3 OR ` + id + ` < $4)
		ORDER BY t.created_at DESC, ` + id + ` DESC LIMIT $5`)
}

func (s sqlThreads) ThreadsPage(ctx context.Context, owner, prefix string, before *ThreadCursor, limit int) (_ []Thread, err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := checkFamily(prefix); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, MaxThreadsPage)
	at, id := int64(math.MaxInt64), ""
	if before != nil {
		at, id = before.CreatedAt.UnixNano(), before.ID
	}
	rows, err := s.query(ctx, s.pageSQL(), owner, prefix, at, id, limit)
	if err != nil {
		return nil, fmt.Errorf("store: threads page: %w", err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("store: threads page: %w", cerr)
		}
	}()
	out := make([]Thread, 0, limit)
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, fmt.Errorf("store: threads page: %w", err)
		}
		out = append(out, *t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: threads page: %w", err)
	}
	return out, nil
}

// ThreadsPage of the memory store scans its threads: it holds what tests and demos make, and
// an index of its own would be one more structure for every thread write to keep.
func (m *memThreads) ThreadsPage(ctx context.Context, owner, prefix string, before *ThreadCursor, limit int) ([]Thread, error) {
	if err := checkFamily(prefix); err != nil {
		return nil, err
	}
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if limit <= 0 {
		return nil, nil
	}
	limit = min(limit, MaxThreadsPage)
	var page []*memThread
	for _, th := range m.threads {
		if th.claimed() && th.t.Owner == owner && strings.HasPrefix(th.t.ID, prefix) &&
			(before == nil || olderThan(th.t, *before)) {
			page = append(page, th)
		}
	}
	slices.SortFunc(page, func(a, b *memThread) int { return newestFirst(a.t, b.t) })
	now := time.Now()
	out := make([]Thread, 0, min(limit, len(page)))
	for _, th := range page[:min(limit, len(page))] {
		out = append(out, m.view(th, now))
	}
	return out, nil
}

// newestFirst orders threads as ThreadsPage lists them: creation time descending (in Unix
// ns, as the SQL stores keep it), then id descending.
func newestFirst(a, b Thread) int {
	if c := cmp.Compare(b.CreatedAt.UnixNano(), a.CreatedAt.UnixNano()); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// olderThan reports whether t comes after the cursor c in newest-first order.
func olderThan(t Thread, c ThreadCursor) bool {
	return newestFirst(Thread{CreatedAt: c.CreatedAt, ID: c.ID}, t) < 0
}
