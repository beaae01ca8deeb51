package tokenstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/store"
)

// TestSubjects: the subject token is stored sealed (the canary is not in the database
// file's rows), bound to its principal, replaced by a newer one, and reads as absent once
// expired.
func TestSubjects(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := store.Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer st.Close()
	ts, err := New(Config{Secrets: st, Ring: ring(t, "1:"+key('a'))})
	require.NoError(t, err)

	const canary = "subject-canary-5c2d"
	_, err = ts.Subject(ctx, "alice")
	require.ErrorIs(t, err, ErrNoSubject)
	require.NoError(t, ts.PutSubject(ctx, "alice", canary, time.Now().Add(time.Hour)))
	got, err := ts.Subject(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, canary, got)
	_, err = ts.Subject(ctx, "bob")
	require.ErrorIs(t, err, ErrNoSubject, "another principal reads nothing")

	require.NoError(t, ts.PutSubject(ctx, "alice", canary+"-2", time.Now().Add(time.Hour)))
	got, err = ts.Subject(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, canary+"-2", got)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type='table'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, tb := range tables {
		r, err := db.Query(`SELECT * FROM "` + tb + `"`)
		require.NoError(t, err)
		cols, _ := r.Columns()
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, r.Scan(ptrs...))
			for _, v := range vals {
				var s string
				switch x := v.(type) {
				case string:
					s = x
				case []byte:
					s = string(x)
				}
				assert.False(t, strings.Contains(s, "subject-canary"), "table %s holds the subject token in clear", tb)
			}
		}
		r.Close()
	}

	require.NoError(t, ts.PutSubject(ctx, "carol", canary, time.Now().Add(-time.Second)))
	_, err = ts.Subject(ctx, "carol")
	require.ErrorIs(t, err, ErrNoSubject, "an expired subject token reads as absent")
}
