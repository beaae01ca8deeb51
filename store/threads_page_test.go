package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// setCreated sets a thread's creation time (ClaimThread takes the clock's), so that a test
// can make ties.
func setCreated(t *testing.T, s Store, id string, at time.Time) {
	t.Helper()
	switch st := s.(type) {
	case *memory:
		st.mu.Lock()
		defer st.mu.Unlock()
		st.threads[id].t.CreatedAt = at
	case *sqlStore:
		_, err := st.exec(context.Background(), st.d.q(`UPDATE threads SET created_at = $1 WHERE thread_id = $2`), at.UnixNano(), id)
		require.NoError(t, err)
	default:
		t.Fatalf("no way to set a creation time in %T", s)
	}
}

// claimAt claims thread id for owner and sets its creation time.
func claimAt(t *testing.T, s Store, id, owner string, at time.Time) {
	t.Helper()
	_, err := s.ClaimThread(context.Background(), id, owner, "")
	require.NoError(t, err)
	setCreated(t, s, id, at)
}

// pageAll pages through owner's threads of family with pages of size, and returns their
// ids in order; every page but the last is full, none is larger than size.
func pageAll(t *testing.T, s Store, owner, family string, from *ThreadCursor, size int) []string {
	t.Helper()
	var ids []string
	before := from
	for range 100 {
		page, err := s.ThreadsPage(context.Background(), owner, family, before, size)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), size, "limit respected")
		for _, th := range page {
			assert.Equal(t, owner, th.Owner)
			ids = append(ids, th.ID)
		}
		if len(page) < size {
			return ids
		}
		c := CursorOf(page[len(page)-1])
		before = &c
	}
	t.Fatal("more than 100 pages")
	return nil
}

// ThreadsPage lists an owner's threads of one id family newest first, ties on a creation
// time by id (greater first), a page at a time from its cursor; never another owner's or
// another family's; threads created after a cursor was given do not shift the pages after
// it; a prefix that is not a family is refused.
func TestThreadsPage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			ctx := context.Background()
			base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
			mine := []struct {
				id string
				ms int
			}{
				{"mcp-a-0", 1}, {"mcp-a-1", 2}, {"mcp-b-2", 2}, {"mcp-c-3", 2}, {"mcp-a-4", 3},
				{"mcp-b-5", 3}, {"mcp-a-6", 4}, {"mcp-7", 5}, {"mcp-a-8", 0},
			}
			for _, th := range mine {
				claimAt(t, s, th.id, "alice", at(th.ms))
			}
			// Not alice's, or not of the family "mcp-": never listed.
			claimAt(t, s, "mcp-a-bob", "bob", at(3))
			claimAt(t, s, "agui-1", "alice", at(3))
			claimAt(t, s, "MCP-a-9", "alice", at(3))
			claimAt(t, s, "mcpa-1", "alice", at(3))
			claimAt(t, s, "mcp", "alice", at(3))
			claimAt(t, s, "xmcp-a", "alice", at(3))

			want := []string{"mcp-7", "mcp-a-6", "mcp-b-5", "mcp-a-4", "mcp-c-3", "mcp-b-2", "mcp-a-1", "mcp-a-0", "mcp-a-8"}
			for _, size := range []int{1, 2, 3, 4, 9, 20} {
				assert.Equal(t, want, pageAll(t, s, "alice", "mcp-", nil, size), "pages of %d", size)
			}
			assert.Equal(t, []string{"mcp-a-bob"}, pageAll(t, s, "bob", "mcp-", nil, 20))
			assert.Equal(t, []string{"agui-1"}, pageAll(t, s, "alice", "agui-", nil, 20))
			assert.Empty(t, pageAll(t, s, "carol", "mcp-", nil, 20))

			page, err := s.ThreadsPage(ctx, "alice", "mcp-", nil, 3)
			require.NoError(t, err)
			require.Len(t, page, 3)
			assert.Equal(t, at(4), page[1].CreatedAt.UTC(), "the creation time is the stored one")
			none, err := s.ThreadsPage(ctx, "alice", "mcp-", nil, 0)
			require.NoError(t, err)
			assert.Empty(t, none)

			// Threads created meanwhile are newer than the cursor: the pages after it are
			// those the first listing had.
			cursor := CursorOf(page[2])
			claimAt(t, s, "mcp-new-1", "alice", at(10))
			claimAt(t, s, "mcp-new-2", "alice", at(3)) // same time as the cursor, greater id: before it
			require.NoError(t, s.DeleteThread(ctx, "mcp-a-1"))
			rest := slices.DeleteFunc(slices.Clone(want[3:]), func(id string) bool { return id == "mcp-a-1" })
			for _, size := range []int{1, 2, 20} {
				assert.Equal(t, rest, pageAll(t, s, "alice", "mcp-", &cursor, size), "after the cursor, pages of %d", size)
			}
			// A thread made since with the cursor's time and a smaller id is after it.
			claimAt(t, s, "mcp-a-45", "alice", at(3))
			assert.Equal(t, append([]string{"mcp-a-45"}, rest...), pageAll(t, s, "alice", "mcp-", &cursor, 2))

			for _, bad := range []string{"", "mcp", "-", "mcp-a-", "m-cp-", "mcp_"} {
				_, err := s.ThreadsPage(ctx, "alice", bad, nil, 3)
				require.ErrorIs(t, err, ErrBadFamily, "prefix %q", bad)
			}
		})
	}
}

// ThreadsPage returns at most MaxThreadsPage threads, whatever the limit asked.
func TestThreadsPageBound(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), dsnMemory)
	require.NoError(t, err)
	defer s.Close()
	for i := range MaxThreadsPage + 5 {
		_, err := s.ClaimThread(context.Background(), fmt.Sprintf("mcp-%d", i), "alice", "")
		require.NoError(t, err)
	}
	page, err := s.ThreadsPage(context.Background(), "alice", "mcp-", nil, MaxThreadsPage*2)
	require.NoError(t, err)
	assert.Len(t, page, MaxThreadsPage)
}

// On SQLite a page is one range of the owner-family index, read in its order: no scan of
// the table, no sort.
func TestThreadsPagePlanSQLite(t *testing.T) {
	t.Parallel()
	st, err := Open(context.Background(), dsnSQLite+filepath.Join(t.TempDir(), "baton.db"))
	require.NoError(t, err)
	defer st.Close()
	s := st.(*sqlStore)
	rows, err := s.db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+s.pageSQL(), "alice", "mcp-", int64(1), "x", 20)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	all := strings.Join(plan, "\n")
	assert.Contains(t, plan[0], "SEARCH t USING INDEX threads_owner_family_created", all)
	assert.NotContains(t, all, "TEMP B-TREE", "no sort")
	assert.NotContains(t, all, "SCAN t", "no scan of the threads")
}

// BenchmarkThreadsPage reads a page of 20 of alice's "mcp-" threads when she also holds 100
// or 100,000 threads of another family, all newer (and bob as many): the family is in the
// index key, so the page does not walk her other threads, and costs the same at both sizes.
//
//	go test -run '^$' -bench ThreadsPage -benchtime 2000x ./store/
func BenchmarkThreadsPage(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, held := range []int{100, 100_000} {
			b.Run(fmt.Sprintf("%s/other=%d", backend, held), func(b *testing.B) {
				ctx := context.Background()
				dsn := dsnSQLite + filepath.Join(b.TempDir(), "bench.db")
				if backend == "postgres" {
					dsn = pgtest.DSN(b)
				}
				st, err := Open(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = st.Close() }()
				fillThreads(b, dsn, held) // created at 1
				for i := range 100 {
					if _, err := st.ClaimThread(ctx, fmt.Sprintf("mcp-%03d", i), "alice", ""); err != nil {
						b.Fatal(err)
					}
				}
				ss := st.(*sqlStore)
				if _, err := ss.exec(ctx, `UPDATE threads SET created_at = 0 WHERE thread_id LIKE 'mcp-%'`); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					page, err := st.ThreadsPage(ctx, "alice", "mcp-", nil, 20)
					if err != nil || len(page) != 20 {
						b.Fatal(len(page), err)
					}
				}
			})
		}
	}
}

// A database of the version before the family index (15) migrates to it with its threads in it:
// ThreadsPage lists the threads made before the migration, in order.
func TestThreadsPageFromV15(t *testing.T) {
	ctx := context.Background()
	backends := append([]struct {
		name string
		dsn  func(t *testing.T) string
	}{{"sqlite", func(t *testing.T) string { return dsnSQLite + filepath.Join(t.TempDir(), "baton.db") }}}, sharedBackends...)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			d, steps, family := sqliteDialect, migrations, schemaThreadsFamilySQLite
			driver, source := "sqlite", strings.TrimPrefix(dsn, dsnSQLite)+sqliteParams
			if IsPostgresDSN(dsn) {
				d, steps, family, driver, source = postgresDialect, pgMigrations, schemaThreadsFamilyPostgres, "pgx", dsn
			}
			v := slices.Index(steps, family)
			require.Positive(t, v, "the family index is a migration")
			db, err := sql.Open(driver, source)
			require.NoError(t, err)
			defer db.Close()
			_, err = migrate(ctx, db, d, steps[:v])
			require.NoError(t, err)
			for i, id := range []string{"mcp-a", "mcp-b", "agui-c", "mcp-d"} {
				_, err = db.ExecContext(ctx, d.q(`INSERT INTO threads (thread_id, owner, title, created_at, updated_at) VALUES ($1, 'alice', '', $2, 1)`), id, i)
				require.NoError(t, err)
			}
			s, err := Open(ctx, dsn)
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, []string{"mcp-d", "mcp-b", "mcp-a"}, pageAll(t, s, "alice", "mcp-", nil, 2))
		})
	}
}
