package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSecrets(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			blob := []byte{0, 1, 2, 0xff, 'x'}

			_, err := s.GetSecret(ctx, "grant", "alice/files")
			require.ErrorIs(t, err, ErrNotFound)

			require.NoError(t, s.PutSecret(ctx, "grant", "alice/files", blob, time.Time{}))
			got, err := s.GetSecret(ctx, "grant", "alice/files")
			require.NoError(t, err)
			assert.Equal(t, blob, got)

			// The kind keeps users apart; replacing keeps one row.
			_, err = s.GetSecret(ctx, "pending", "alice/files")
			require.ErrorIs(t, err, ErrNotFound)
			require.NoError(t, s.PutSecret(ctx, "grant", "alice/files", []byte("v2"), time.Time{}))
			got, err = s.GetSecret(ctx, "grant", "alice/files")
			require.NoError(t, err)
			assert.Equal(t, []byte("v2"), got)

			// Take is single use.
			require.NoError(t, s.PutSecret(ctx, "pending", "state-1", []byte("p"), time.Now().Add(time.Hour)))
			got, err = s.TakeSecret(ctx, "pending", "state-1")
			require.NoError(t, err)
			assert.Equal(t, []byte("p"), got)
			_, err = s.TakeSecret(ctx, "pending", "state-1")
			require.ErrorIs(t, err, ErrNotFound)

			// An expired value reads as absent, cannot be taken and is swept.
			require.NoError(t, s.PutSecret(ctx, "pending", "old", []byte("p"), time.Now().Add(-time.Second)))
			require.NoError(t, s.PutSecret(ctx, "pending", "old2", []byte("p"), time.Now().Add(-time.Second)))
			_, err = s.GetSecret(ctx, "pending", "old")
			require.ErrorIs(t, err, ErrNotFound)
			_, err = s.TakeSecret(ctx, "pending", "old")
			require.ErrorIs(t, err, ErrNotFound)
			n, err := s.SweepSecrets(ctx, time.Now())
			require.NoError(t, err)
			assert.EqualValues(t, 1, n, "old2 swept; old was taken; the grant never expires")
			_, err = s.GetSecret(ctx, "grant", "alice/files")
			require.NoError(t, err)

			// Delete; deleting again is no error.
			require.NoError(t, s.DeleteSecret(ctx, "grant", "alice/files"))
			require.NoError(t, s.DeleteSecret(ctx, "grant", "alice/files"))
			_, err = s.GetSecret(ctx, "grant", "alice/files")
			require.ErrorIs(t, err, ErrNotFound)

			// Bad input is refused and changes nothing.
			require.ErrorIs(t, s.PutSecret(ctx, "", "k", blob, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "", blob, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "k", nil, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "a\x00b", blob, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "a\xffb", blob, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", strings.Repeat("k", MaxSecretKeyBytes+1), blob, time.Time{}), ErrBadSecret)
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "k", make([]byte, MaxSecretBytes+1), time.Time{}), ErrBadSecret)
			_, err = s.GetSecret(ctx, "grant", "k")
			require.ErrorIs(t, err, ErrNotFound)

			// The caller's slice is not shared with the store.
			mine := []byte("abc")
			require.NoError(t, s.PutSecret(ctx, "grant", "k", mine, time.Time{}))
			mine[0] = 'X'
			got, err = s.GetSecret(ctx, "grant", "k")
			require.NoError(t, err)
			assert.Equal(t, []byte("abc"), got)

			require.NoError(t, s.Close())
			require.ErrorIs(t, s.PutSecret(ctx, "grant", "k", blob, time.Time{}), ErrClosed)
			_, err = s.GetSecret(ctx, "grant", "k")
			require.ErrorIs(t, err, ErrClosed)
			_, err = s.TakeSecret(ctx, "grant", "k")
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// TestTakeSecretAcrossReplicas races TakeSecret for one key from two store handles on one
// database: exactly one taker gets the value.
func TestTakeSecretAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	for _, b := range sharedBackends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			s1, err := Open(ctx, dsn)
			require.NoError(t, err)
			defer s1.Close()
			s2, err := Open(ctx, dsn)
			require.NoError(t, err)
			defer s2.Close()
			for round := range 5 {
				key := "state-" + string(rune('a'+round))
				require.NoError(t, s1.PutSecret(ctx, "pending", key, []byte("v"), time.Now().Add(time.Hour)))
				var won atomic.Int32
				var wg sync.WaitGroup
				for i := range 8 {
					st := s1
					if i%2 == 1 {
						st = s2
					}
					wg.Go(func() {
						_, err := st.TakeSecret(ctx, "pending", key)
						if err == nil {
							won.Add(1)
						} else if !errors.Is(err, ErrNotFound) {
							t.Errorf("take: %v", err)
						}
					})
				}
				wg.Wait()
				assert.EqualValues(t, 1, won.Load(), "round %d", round)
			}
		})
	}
}
