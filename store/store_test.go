package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/testutil/pgtest"
)

// backends runs the same suite against every Store implementation.
var backends = []struct {
	name string
	open func(t *testing.T) Store
}{
	{"memory", func(t *testing.T) Store {
		s, err := Open(context.Background(), "memory:")
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"sqlite", func(t *testing.T) Store {
		// A nested path also checks that Open creates the parent directories.
		s, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "a", "b", "baton.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T) Store {
		s, err := Open(context.Background(), pgtest.DSN(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

var t0 = time.Date(2026, 9, 30, 12, 0, 0, 0, time.UTC)

func sampleSuspension(thread string, expiries ...time.Time) *Suspension {
	s := &Suspension{
		ThreadID: thread,
		RunID:    "run-" + thread,
		Owner:    "alice",
		History:  json.RawMessage(`[{"role":"user","content":"deploy it"}]`),
		State:    json.RawMessage(`{"failures":{"research":1}}`),
	}
	for i, exp := range expiries {
		s.Interrupts = append(s.Interrupts, Interrupt{
			ID:             fmt.Sprintf("int-%s-%d", thread, i),
			ToolCallID:     fmt.Sprintf("call-%d", i),
			Kind:           "a2a_input",
			Reason:         "input_required",
			Message:        "Which region?",
			ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
			ExpiresAt:      exp,
			SubagentRunID:  "sa-1",
			Metadata:       map[string]any{"a2a": map[string]any{"agent": "research", "taskId": "task-9", "contextId": "ctx-3"}},
			Handle:         json.RawMessage(`{"taskId":"task-9"}`),
		})
	}
	return s
}

func TestSuspensionRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			want := sampleSuspension("t1", t0.Add(time.Minute), t0.Add(2*time.Minute))
			want.Resolved = []string{"int-old"}
			require.NoError(t, s.SaveSuspension(ctx, want))
			require.False(t, want.CreatedAt.IsZero(), "SaveSuspension sets CreatedAt")
			require.False(t, want.UpdatedAt.IsZero(), "SaveSuspension sets UpdatedAt")

			got, err := s.LoadSuspension(ctx, "t1")
			require.NoError(t, err)
			assertSameSuspension(t, want, got)

			// The store holds its own copy: changing either side leaves the other alone.
			got.Interrupts[0].Metadata["a2a"].(map[string]any)["agent"] = "changed"
			want.Interrupts[0].Message = "changed"
			again, err := s.LoadSuspension(ctx, "t1")
			require.NoError(t, err)
			assert.Equal(t, "research", again.Interrupts[0].Metadata["a2a"].(map[string]any)["agent"])
			assert.Equal(t, "Which region?", again.Interrupts[0].Message)
		})
	}
}

func assertSameSuspension(t *testing.T, want, got *Suspension) {
	t.Helper()
	assert.Equal(t, want.ThreadID, got.ThreadID)
	assert.Equal(t, want.RunID, got.RunID)
	assert.Equal(t, want.Owner, got.Owner)
	assert.JSONEq(t, string(want.History), string(got.History))
	if want.State == nil {
		assert.Nil(t, got.State)
	} else {
		assert.JSONEq(t, string(want.State), string(got.State))
	}
	assert.Equal(t, want.Resolved, got.Resolved)
	assert.True(t, want.CreatedAt.Equal(got.CreatedAt), "CreatedAt %v != %v", want.CreatedAt, got.CreatedAt)
	assert.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "UpdatedAt %v != %v", want.UpdatedAt, got.UpdatedAt)
	require.Len(t, got.Interrupts, len(want.Interrupts))
	for i := range want.Interrupts {
		w, g := want.Interrupts[i], got.Interrupts[i]
		assert.True(t, w.ExpiresAt.Equal(g.ExpiresAt), "ExpiresAt %v != %v", w.ExpiresAt, g.ExpiresAt)
		w.ExpiresAt, g.ExpiresAt = time.Time{}, time.Time{}
		if w.Handle != nil {
			assert.JSONEq(t, string(w.Handle), string(g.Handle))
		} else {
			assert.Nil(t, g.Handle)
		}
		w.Handle, g.Handle = nil, nil
		assert.Equal(t, w, g)
	}
}

func TestSuspensionLifecycle(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"load missing", func(t *testing.T, s Store) {
			_, err := s.LoadSuspension(ctx, "nope")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"delete then load", func(t *testing.T, s Store) {
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t1", t0)))
			require.NoError(t, s.DeleteSuspension(ctx, "t1"))
			_, err := s.LoadSuspension(ctx, "t1")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"delete absent", func(t *testing.T, s Store) {
			require.NoError(t, s.DeleteSuspension(ctx, "never"))
		}},
		{"delete leaves other threads", func(t *testing.T, s Store) {
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t1", t0)))
			require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t2", t0)))
			require.NoError(t, s.DeleteSuspension(ctx, "t1"))
			got, err := s.LoadSuspension(ctx, "t2")
			require.NoError(t, err)
			assert.Equal(t, "run-t2", got.RunID)
		}},
		{"overwrite", func(t *testing.T, s Store) {
			first := sampleSuspension("t1", t0, t0)
			require.NoError(t, s.SaveSuspension(ctx, first))
			created := first.CreatedAt

			next, err := s.LoadSuspension(ctx, "t1")
			require.NoError(t, err)
			next.RunID = "run-2"
			next.Interrupts = next.Interrupts[:1]
			next.State = nil
			next.Resolved = []string{"int-t1-1"}
			require.NoError(t, s.SaveSuspension(ctx, next))

			got, err := s.LoadSuspension(ctx, "t1")
			require.NoError(t, err)
			assertSameSuspension(t, next, got)
			assert.True(t, created.Equal(got.CreatedAt), "CreatedAt survives an overwrite of a loaded suspension")
			assert.False(t, got.UpdatedAt.Before(created))
		}},
		{"nil history", func(t *testing.T, s Store) {
			in := &Suspension{ThreadID: "t1"}
			require.NoError(t, s.SaveSuspension(ctx, in))
			got, err := s.LoadSuspension(ctx, "t1")
			require.NoError(t, err)
			assert.Nil(t, got.History)
			assert.Empty(t, got.Interrupts)
		}},
		{"invalid history", func(t *testing.T, s Store) {
			in := &Suspension{ThreadID: "t1", History: json.RawMessage(`{not json`)}
			require.Error(t, s.SaveSuspension(ctx, in))
			_, err := s.LoadSuspension(ctx, "t1")
			require.ErrorIs(t, err, ErrNotFound)
		}},
		{"save nil", func(t *testing.T, s Store) {
			require.Error(t, s.SaveSuspension(ctx, nil))
		}},
		{"save without thread id", func(t *testing.T, s Store) {
			require.ErrorContains(t, s.SaveSuspension(ctx, &Suspension{RunID: "r"}), "thread id")
		}},
		{"ping", func(t *testing.T, s Store) {
			require.NoError(t, s.Ping(ctx))
		}},
		{"closed", func(t *testing.T, s Store) {
			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "Close is idempotent")
			require.ErrorIs(t, s.Ping(ctx), ErrClosed)
			require.ErrorIs(t, s.SaveSuspension(ctx, sampleSuspension("t1")), ErrClosed)
			_, err := s.LoadSuspension(ctx, "t1")
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, s.DeleteSuspension(ctx, "t1"), ErrClosed)
			require.ErrorIs(t, s.MarkResolved(ctx, "t1", []string{"x"}), ErrClosed)
			_, err = s.IsResolved(ctx, "t1", "x")
			require.ErrorIs(t, err, ErrClosed)
			_, err = s.Expired(ctx, t0)
			require.ErrorIs(t, err, ErrClosed)
		}},
	}
	for _, b := range backends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) { tt.run(t, b.open(t)) })
		}
	}
}

func TestResolved(t *testing.T) {
	ctx := context.Background()
	ids := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%03d", prefix, i)
		}
		return out
	}
	tests := []struct {
		name string
		// marks are applied in order, each as one MarkResolved call on thread "t1".
		marks   [][]string
		deleted bool // the suspension of t1 is deleted after marking
		yes, no []string
	}{
		{name: "none", no: []string{"a"}},
		{name: "one call", marks: [][]string{{"a", "b"}}, yes: []string{"a", "b"}, no: []string{"c"}},
		{name: "empty call", marks: [][]string{{}}, no: []string{""}},
		{name: "several calls", marks: [][]string{{"a"}, {"b"}}, yes: []string{"a", "b"}},
		{name: "duplicates", marks: [][]string{{"a", "a"}, {"a"}}, yes: []string{"a"}},
		{name: "survives deletion", marks: [][]string{{"a"}}, deleted: true, yes: []string{"a"}},
		{
			name:  "bounded, oldest dropped",
			marks: [][]string{ids("x", 300)},
			yes:   []string{"x-044", "x-299"},
			no:    []string{"x-000", "x-043"},
		},
		{
			name:  "bounded across calls",
			marks: [][]string{ids("x", 200), ids("y", 100)},
			yes:   []string{"x-044", "y-099"},
			no:    []string{"x-000", "x-043"},
		},
		{
			name:  "re-marking refreshes",
			marks: [][]string{{"old"}, ids("x", MaxResolvedPerThread-1), {"old"}, {"new"}},
			yes:   []string{"old", "new", "x-001"},
			no:    []string{"x-000"},
		},
	}
	for _, b := range backends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				s := b.open(t)
				require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t1", t0)))
				for _, m := range tt.marks {
					require.NoError(t, s.MarkResolved(ctx, "t1", m))
				}
				if tt.deleted {
					require.NoError(t, s.DeleteSuspension(ctx, "t1"))
				}
				for _, id := range tt.yes {
					ok, err := s.IsResolved(ctx, "t1", id)
					require.NoError(t, err)
					assert.True(t, ok, "%s should be resolved", id)
				}
				for _, id := range tt.no {
					ok, err := s.IsResolved(ctx, "t1", id)
					require.NoError(t, err)
					assert.False(t, ok, "%s should not be resolved", id)
				}
				// Ids are per thread.
				for _, id := range tt.yes {
					ok, err := s.IsResolved(ctx, "t2", id)
					require.NoError(t, err)
					assert.False(t, ok, "%s is not resolved on another thread", id)
				}
			})
		}
	}
}

func TestExpired(t *testing.T) {
	ctx := context.Background()
	saved := []*Suspension{
		sampleSuspension("none"), // no interrupts
		sampleSuspension("never", time.Time{}),
		sampleSuspension("early", t0.Add(-time.Hour)),
		sampleSuspension("exact", t0),
		sampleSuspension("later", t0.Add(time.Nanosecond)),
		sampleSuspension("mixed", t0.Add(time.Hour), t0.Add(-time.Minute), time.Time{}),
		// A non-UTC expiry is the same instant.
		sampleSuspension("zoned", t0.Add(-30*time.Minute).In(time.FixedZone("CEST", 2*3600))),
	}
	tests := []struct {
		name string
		now  time.Time
		want []string // thread ids, earliest expiry first
	}{
		{"before all", t0.Add(-2 * time.Hour), nil},
		{"at t0", t0, []string{"early", "zoned", "mixed", "exact"}},
		{"just after", t0.Add(time.Nanosecond), []string{"early", "zoned", "mixed", "exact", "later"}},
		{"far future", t0.Add(24 * time.Hour), []string{"early", "zoned", "mixed", "exact", "later"}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			for _, sus := range saved {
				require.NoError(t, s.SaveSuspension(ctx, sus))
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, err := s.Expired(ctx, tt.now)
					require.NoError(t, err)
					var ids []string
					for _, g := range got {
						ids = append(ids, g.ThreadID)
						assert.NotEmpty(t, g.Interrupts, "an expired suspension comes back whole")
					}
					assert.Equal(t, tt.want, ids)
				})
			}
			t.Run("gone after delete", func(t *testing.T) {
				require.NoError(t, s.DeleteSuspension(ctx, "early"))
				got, err := s.Expired(ctx, t0)
				require.NoError(t, err)
				require.Len(t, got, 3)
				assert.Equal(t, "zoned", got[0].ThreadID)
			})
			t.Run("re-saved with a later expiry", func(t *testing.T) {
				require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("exact", t0.Add(time.Hour))))
				got, err := s.Expired(ctx, t0)
				require.NoError(t, err)
				require.Len(t, got, 2)
				assert.Equal(t, "mixed", got[1].ThreadID)
			})
		})
	}
}

// TestSQLiteRestart is the restart case: what one process wrote, the next one reads.
func TestSQLiteRestart(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "baton.db")

	s1, err := Open(ctx, dsn)
	require.NoError(t, err)
	want := sampleSuspension("t1", t0.Add(time.Minute))
	require.NoError(t, s1.SaveSuspension(ctx, want))
	require.NoError(t, s1.SaveSuspension(ctx, sampleSuspension("gone", t0)))
	require.NoError(t, s1.DeleteSuspension(ctx, "gone"))
	require.NoError(t, s1.MarkResolved(ctx, "t1", []string{"int-done"}))
	require.NoError(t, s1.Close())

	s2, err := Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { require.NoError(t, s2.Close()) }()
	got, err := s2.LoadSuspension(ctx, "t1")
	require.NoError(t, err)
	assertSameSuspension(t, want, got)
	_, err = s2.LoadSuspension(ctx, "gone")
	require.ErrorIs(t, err, ErrNotFound)
	ok, err := s2.IsResolved(ctx, "t1", "int-done")
	require.NoError(t, err)
	assert.True(t, ok)
	exp, err := s2.Expired(ctx, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Len(t, exp, 1)
	assert.Equal(t, "t1", exp[0].ThreadID)
}

func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+sqliteParams)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// schemaVersion reads the version recorded in db (0 when none, or no table).
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var n, v int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version WHERE id = 1`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n))
	return n == 1
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()

	t.Run("empty database, then idempotent re-open", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "baton.db")
		s, err := Open(ctx, "sqlite:"+path)
		require.NoError(t, err)
		require.NoError(t, s.SaveSuspension(ctx, sampleSuspension("t1", t0)))
		require.NoError(t, s.Close())

		db := openRaw(t, path)
		v, err := schemaVersion(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, len(migrations), v)
		assert.True(t, tableExists(t, db, "suspensions"))
		assert.True(t, tableExists(t, db, "resolved"))
		var mode string
		require.NoError(t, db.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
		assert.Equal(t, "wal", mode)

		from, err := migrate(ctx, db, sqliteDialect, migrations)
		require.NoError(t, err)
		assert.Equal(t, len(migrations), from, "nothing left to migrate")

		s, err = Open(ctx, "sqlite:"+path)
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		_, err = s.LoadSuspension(ctx, "t1")
		require.NoError(t, err, "re-opening keeps the data")
	})

	steps := []string{
		`CREATE TABLE a (x INTEGER)`,
		`CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (1)`,
		`ALTER TABLE a ADD COLUMN z TEXT`,
	}
	tests := []struct {
		name     string
		first    []string // applied before, if any
		then     []string
		wantFrom int
		wantVer  int
		wantErr  string
		tables   map[string]bool
	}{
		{name: "all from scratch", then: steps, wantFrom: 0, wantVer: 3, tables: map[string]bool{"a": true, "b": true}},
		{name: "in steps", first: steps[:1], then: steps, wantFrom: 1, wantVer: 3, tables: map[string]bool{"a": true, "b": true}},
		{name: "nothing to do", first: steps, then: steps, wantFrom: 3, wantVer: 3, tables: map[string]bool{"a": true, "b": true}},
		{
			name: "failing step rolls back", then: []string{steps[0], `CREATE TABLE broken (`},
			wantErr: "migrate to version 2", wantVer: 0, tables: map[string]bool{"a": false},
		},
		{
			name: "newer database refused", first: steps, then: steps[:2],
			wantErr: "newer than this program", wantVer: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openRaw(t, filepath.Join(t.TempDir(), "m.db"))
			if tt.first != nil {
				_, err := migrate(ctx, db, sqliteDialect, tt.first)
				require.NoError(t, err)
			}
			from, err := migrate(ctx, db, sqliteDialect, tt.then)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantFrom, from)
			}
			v, err := schemaVersion(ctx, db)
			require.NoError(t, err)
			assert.Equal(t, tt.wantVer, v)
			for name, exists := range tt.tables {
				assert.Equal(t, exists, tableExists(t, db, name), "table %s", name)
			}
		})
	}

	t.Run("open refuses a newer database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "baton.db")
		db := openRaw(t, path)
		_, err := migrate(ctx, db, sqliteDialect, append(append([]string{}, migrations...), `CREATE TABLE future (x)`))
		require.NoError(t, err)
		_, err = Open(ctx, "sqlite:"+path)
		require.ErrorContains(t, err, "newer than this program")
	})
}

func TestOpenBadDSN(t *testing.T) {
	tests := []struct {
		dsn  string
		want string
	}{
		{"", `want "memory:", "sqlite:<path>" or "postgres://..."`},
		{"memory", `want "memory:", "sqlite:<path>" or "postgres://..."`},
		{"mysql://localhost/baton", `want "memory:", "sqlite:<path>" or "postgres://..."`},
		{"./baton.db", `want "memory:", "sqlite:<path>" or "postgres://..."`},
		{"postgres://u@localhost:99999999/x", "not a valid PostgreSQL connection string"},
		{"sqlite:", `want "sqlite:<path>"`},
		{"sqlite:/tmp/a.db?mode=ro", `want "sqlite:<path>"`},
	}
	for _, tt := range tests {
		t.Run(tt.dsn, func(t *testing.T) {
			s, err := Open(context.Background(), tt.dsn)
			require.ErrorIs(t, err, ErrBadDSN)
			assert.ErrorContains(t, err, tt.want)
			assert.ErrorContains(t, err, fmt.Sprintf("%q", tt.dsn), "the error names the DSN")
			assert.Nil(t, s)
		})
	}

	t.Run("unusable path", func(t *testing.T) {
		// The parent "directory" is a regular file.
		dir := t.TempDir()
		file := filepath.Join(dir, "file")
		s, err := Open(context.Background(), "sqlite:"+file)
		require.NoError(t, err)
		require.NoError(t, s.Close())
		_, err = Open(context.Background(), "sqlite:"+filepath.Join(file, "x.db"))
		require.Error(t, err)
	})
}

// TestConcurrent exercises each backend from many goroutines (run with -race): each worker
// owns a thread and also hammers one shared thread.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	const workers, rounds = 8, 25
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					errs <- func() error {
						own := fmt.Sprintf("w%d", w)
						for r := range rounds {
							sus := sampleSuspension(own, t0.Add(time.Duration(r)*time.Second))
							sus.RunID = fmt.Sprintf("run-%d", r)
							if err := s.SaveSuspension(ctx, sus); err != nil {
								return err
							}
							if err := s.SaveSuspension(ctx, sampleSuspension("shared", t0)); err != nil {
								return err
							}
							got, err := s.LoadSuspension(ctx, own)
							if err != nil {
								return err
							}
							if got.RunID != sus.RunID {
								return fmt.Errorf("%s: run id %q, want %q", own, got.RunID, sus.RunID)
							}
							if err := s.MarkResolved(ctx, "shared", []string{fmt.Sprintf("%s-%d", own, r)}); err != nil {
								return err
							}
							if _, err := s.IsResolved(ctx, "shared", own); err != nil {
								return err
							}
							if _, err := s.Expired(ctx, t0); err != nil {
								return err
							}
							if err := s.DeleteSuspension(ctx, "shared"); err != nil {
								return err
							}
						}
						return nil
					}()
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for w := range workers {
				got, err := s.LoadSuspension(ctx, fmt.Sprintf("w%d", w))
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("run-%d", rounds-1), got.RunID)
				for r := range rounds {
					ok, err := s.IsResolved(ctx, "shared", fmt.Sprintf("w%d-%d", w, r))
					require.NoError(t, err)
					assert.True(t, ok, "no mark lost (%d marks fit the bound)", workers*rounds)
				}
			}
		})
	}
}
