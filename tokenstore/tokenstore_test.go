package tokenstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	_ "modernc.org/sqlite"

	"github.com/baton-dev/baton/internal/seal"
	"github.com/baton-dev/baton/signin"
	"github.com/baton-dev/baton/store"
)

func ring(t *testing.T, spec string) *seal.Ring {
	t.Helper()
	r, err := seal.New(spec)
	require.NoError(t, err)
	return r
}

func key(b byte) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(b), 32)))
}

const (
	accessToken  = "at-canary-1f9c"
	refreshToken = "rt-canary-77aa"
	verifier     = "verifier-canary-0b1e"
)

func grant() *signin.Grant {
	return &signin.Grant{
		Token:    &oauth2.Token{AccessToken: accessToken, RefreshToken: refreshToken, Expiry: time.Now().Add(time.Hour).UTC().Round(time.Second)},
		Scopes:   []string{"files:read"},
		ClientID: "https://baton.example/oauth/client-metadata.json", TokenURL: "https://as.example/token",
	}
}

func TestSealedAtRest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	st, err := store.Open(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer st.Close()
	ts, err := New(Config{Secrets: st, Ring: ring(t, "1:"+key('a'))})
	require.NoError(t, err)

	require.NoError(t, ts.PutGrant(ctx, "alice", "files", grant()))
	got, err := ts.Grant(ctx, "alice", "files")
	require.NoError(t, err)
	assert.Equal(t, accessToken, got.Token.AccessToken)
	assert.Equal(t, refreshToken, got.Token.RefreshToken)
	assert.Equal(t, []string{"files:read"}, got.Scopes)

	p := &signin.Pending{State: "st-1", Principal: "alice", Server: "files", Verifier: verifier,
		AuthURL: "https://as.example/authorize?state=st-1", Expires: time.Now().Add(10 * time.Minute)}
	require.NoError(t, ts.PutPending(ctx, p))

	// Nothing secret is readable in the database file.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT value FROM secrets`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		raw, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err)
		for _, secret := range []string{accessToken, refreshToken, verifier, "st-1"} {
			assert.NotContains(t, string(raw), secret)
		}
		n++
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 3, n, "grant, pending and its lookup")
}

func TestGrants(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	ts, err := New(Config{Secrets: st, Ring: ring(t, "1:"+key('a'))})
	require.NoError(t, err)

	_, err = ts.Grant(ctx, "alice", "files")
	require.ErrorIs(t, err, signin.ErrNoGrant)
	require.NoError(t, ts.PutGrant(ctx, "alice", "files", grant()))
	_, err = ts.Grant(ctx, "bob", "files")
	require.ErrorIs(t, err, signin.ErrNoGrant, "grants are per principal")
	_, err = ts.Grant(ctx, "alice", "other")
	require.ErrorIs(t, err, signin.ErrNoGrant, "and per server")

	// A blob copied to another principal's row does not open.
	blob, err := st.GetSecret(ctx, kindGrant, pairKey("alice", "files"))
	require.NoError(t, err)
	require.NoError(t, st.PutSecret(ctx, kindGrant, pairKey("bob", "files"), blob, time.Time{}))
	_, err = ts.Grant(ctx, "bob", "files")
	require.ErrorIs(t, err, signin.ErrNoGrant)

	// Key rotation: the old key still opens, and the grant is sealed again with the new one.
	rotated, err := New(Config{Secrets: st, Ring: ring(t, "2:"+key('b')+",1:"+key('a'))})
	require.NoError(t, err)
	got, err := rotated.Grant(ctx, "alice", "files")
	require.NoError(t, err)
	assert.Equal(t, accessToken, got.Token.AccessToken)
	onlyNew, err := New(Config{Secrets: st, Ring: ring(t, "2:"+key('b'))})
	require.NoError(t, err)
	_, err = onlyNew.Grant(ctx, "alice", "files")
	require.NoError(t, err, "re-sealed with key 2 on the read above")
	// A key that opens nothing: no grant, the user signs in again.
	other, err := New(Config{Secrets: st, Ring: ring(t, "3:"+key('c'))})
	require.NoError(t, err)
	_, err = other.Grant(ctx, "alice", "files")
	require.ErrorIs(t, err, signin.ErrNoGrant)

	require.NoError(t, ts.DeleteGrant(ctx, "alice", "files"))
	_, err = onlyNew.Grant(ctx, "alice", "files")
	require.ErrorIs(t, err, signin.ErrNoGrant)
	require.NoError(t, ts.DeleteGrant(ctx, "alice", "files"))
}

func TestPending(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	require.NoError(t, err)
	defer st.Close()
	ts, err := New(Config{Secrets: st, Ring: ring(t, key('a'))})
	require.NoError(t, err)

	got, err := ts.PendingFor(ctx, "alice", "files")
	require.NoError(t, err)
	assert.Nil(t, got)

	p := &signin.Pending{State: "st-1", Principal: "alice", Server: "files", ThreadID: "th", InterruptID: "int-1",
		Verifier: verifier, AuthURL: "https://as.example/a", Expires: time.Now().Add(10 * time.Minute).UTC()}
	require.NoError(t, ts.PutPending(ctx, p))
	got, err = ts.PendingFor(ctx, "alice", "files")
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "st-1", got.State)
	assert.Equal(t, verifier, got.Verifier)
	got, err = ts.PendingFor(ctx, "bob", "files")
	require.NoError(t, err)
	assert.Nil(t, got)

	_, err = ts.TakePending(ctx, "st-unknown", "alice")
	require.ErrorIs(t, err, signin.ErrUnknownState)
	_, err = ts.TakePending(ctx, "", "alice")
	require.ErrorIs(t, err, signin.ErrUnknownState)
	_, err = ts.TakePending(ctx, "st-1", "bob")
	require.ErrorIs(t, err, signin.ErrWrongPrincipal, "another principal cannot take it")
	got, err = ts.PendingFor(ctx, "alice", "files")
	require.NoError(t, err)
	require.NotNil(t, got, "another principal's attempt left it pending")
	got, err = ts.TakePending(ctx, "st-1", "alice")
	require.NoError(t, err)
	assert.Equal(t, "alice", got.Principal)
	assert.Equal(t, "int-1", got.InterruptID)
	_, err = ts.TakePending(ctx, "st-1", "alice")
	require.ErrorIs(t, err, signin.ErrUnknownState, "single use")
	got, err = ts.PendingFor(ctx, "alice", "files")
	require.NoError(t, err)
	assert.Nil(t, got, "a taken sign-in is no longer pending")

	// Expired: not pending, not taken.
	p.State, p.Expires = "st-2", time.Now().Add(-time.Second)
	require.NoError(t, ts.PutPending(ctx, p))
	got, err = ts.PendingFor(ctx, "alice", "files")
	require.NoError(t, err)
	assert.Nil(t, got)
	_, err = ts.TakePending(ctx, "st-2", "alice")
	require.ErrorIs(t, err, signin.ErrUnknownState)

	require.Error(t, ts.PutPending(ctx, &signin.Pending{State: "x", Server: "files"}), "a pending sign-in must expire")

	_, err = New(Config{Secrets: st})
	require.ErrorIs(t, err, ErrConfig)
}
