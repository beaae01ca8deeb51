package tokenstore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/internal/testutil/pgtest"
	"github.com/baton-dev/baton/store"
)

// BenchmarkGrant measures what every MCP request of a mode user server costs before it is
// sent: the handler's TokenSource reads the principal's grant (a store read, an AES-GCM
// open and a JSON decode).
func BenchmarkGrant(b *testing.B) {
	for _, bc := range []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"memory", func(*testing.B) string { return "memory:" }},
		{"sqlite", func(b *testing.B) string { return "sqlite:" + filepath.Join(b.TempDir(), "b.db") }},
		{"postgres", func(b *testing.B) string { return pgtest.DSN(b) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, bc.dsn(b))
			require.NoError(b, err)
			defer st.Close()
			r, err := New(Config{Secrets: st, Ring: benchRing(b)})
			require.NoError(b, err)
			require.NoError(b, r.PutGrant(ctx, "alice", "files", grant()))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := r.Grant(ctx, "alice", "files"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchRing(b *testing.B) *seal.Ring {
	b.Helper()
	r, err := seal.New("1:" + key('a'))
	require.NoError(b, err)
	return r
}
