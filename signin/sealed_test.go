package signin

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/seal"
	"golang.org/x/oauth2"
)

func testRing(t *testing.T) *seal.Ring {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	r, err := seal.New(base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealedRecords(t *testing.T) {
	r := testRing(t)
	g := &Grant{Token: &oauth2.Token{AccessToken: "secret-access", RefreshToken: "secret-refresh", Expiry: time.Unix(2e9, 0)},
		Scopes: []string{"a"}, ClientID: "c", ClientSecret: "secret-client", TokenURL: "https://as/token", DPoPKey: []byte{1, 2}}
	b, err := SealGrant(r, "alice", "docs", g)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"secret-access", "secret-refresh", "secret-client"} {
		if bytes.Contains(b, []byte(s)) {
			t.Fatalf("sealed grant contains %s", s)
		}
	}
	got, stale, err := OpenGrant(r, "alice", "docs", b)
	if err != nil || stale || got.Token.RefreshToken != "secret-refresh" || got.ClientSecret != "secret-client" || !bytes.Equal(got.DPoPKey, []byte{1, 2}) {
		t.Fatalf("OpenGrant = %+v, %v, %v", got, stale, err)
	}
	if _, _, err := OpenGrant(r, "bob", "docs", b); !errors.Is(err, ErrSealed) {
		t.Fatalf("alice's grant opened as bob's: %v", err)
	}
	if _, _, err := OpenGrant(testRing(t), "alice", "docs", b); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened with another key: %v", err)
	}

	p := &Pending{State: "st", Principal: "alice", Server: "docs", Verifier: "secret-verifier", Expires: time.Unix(2e9, 0)}
	pb, err := SealPending(r, p)
	if err != nil || bytes.Contains(pb, []byte("secret-verifier")) {
		t.Fatalf("SealPending: %v (plaintext visible: %v)", err, bytes.Contains(pb, []byte("secret-verifier")))
	}
	gp, err := OpenPending(r, "st", "alice", "docs", pb)
	if err != nil || gp.Verifier != "secret-verifier" {
		t.Fatalf("OpenPending = %+v, %v", gp, err)
	}
	if _, err := OpenPending(r, "other-state", "alice", "docs", pb); !errors.Is(err, ErrSealed) {
		t.Fatalf("pending opened under another state: %v", err)
	}
	// A pending record never opens as a grant.
	if _, _, err := OpenGrant(r, "alice", "docs", pb); !errors.Is(err, ErrSealed) {
		t.Fatalf("pending opened as a grant: %v", err)
	}
}
