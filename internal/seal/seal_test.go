package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func key(t *testing.T) string {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	r, err := New(key(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.KeyID() != 1 {
		t.Fatalf("a bare key has id %d, want 1", r.KeyID())
	}
	aad := AAD("baton-mcp-grant", "alice", "docs")
	secret := []byte(`{"access_token":"at-123"}`)
	blob := r.Seal(secret, aad)
	if bytes.Contains(blob, secret) || bytes.Contains(blob, []byte("at-123")) {
		t.Fatal("sealed value contains the plaintext")
	}
	again := r.Seal(secret, aad)
	if bytes.Equal(blob, again) {
		t.Fatal("two seals of the same value are identical: nonce reused")
	}
	pt, stale, err := r.Open(blob, aad)
	if err != nil || stale || !bytes.Equal(pt, secret) {
		t.Fatalf("Open = %q, %v, %v", pt, stale, err)
	}
}

func TestOpenRefusesTamperAndWrongAAD(t *testing.T) {
	t.Parallel()
	r, err := New(key(t))
	if err != nil {
		t.Fatal(err)
	}
	aad := AAD("baton-mcp-grant", "alice", "docs")
	blob := r.Seal([]byte("token"), aad)

	cases := map[string]struct {
		blob []byte
		aad  []byte
	}{
		"other principal":    {blob, AAD("baton-mcp-grant", "bob", "docs")},
		"other server":       {blob, AAD("baton-mcp-grant", "alice", "mail")},
		"other purpose":      {blob, AAD("baton-mcp-pending", "alice", "docs")},
		"shifted separator":  {blob, AAD("baton-mcp-grant", "alic", "edocs")},
		"flipped last byte":  {flip(blob, len(blob)-1), aad},
		"flipped nonce byte": {flip(blob, 3), aad},
		"truncated":          {blob[:len(blob)-1], aad},
		"header only":        {blob[:2], aad},
		"empty":              {nil, aad},
		"unknown version":    {flip(blob, 0), aad},
		"unknown key id":     {flip(blob, 1), aad},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pt, _, err := r.Open(c.blob, c.aad)
			if !errors.Is(err, ErrOpen) || pt != nil {
				t.Fatalf("Open = %q, %v; want ErrOpen", pt, err)
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}

func TestRotation(t *testing.T) {
	t.Parallel()
	k1, k2 := key(t), key(t)
	old, err := New("1:" + k1)
	if err != nil {
		t.Fatal(err)
	}
	aad := AAD("p", "alice")
	oldBlob := old.Seal([]byte("v"), aad)

	rotated, err := New("2:" + k2 + ", 1:" + k1)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.KeyID() != 2 {
		t.Fatalf("sealing key id = %d, want 2 (the first)", rotated.KeyID())
	}
	pt, stale, err := rotated.Open(oldBlob, aad)
	if err != nil || !stale || string(pt) != "v" {
		t.Fatalf("old value under the rotated ring: %q stale=%v err=%v; want v, stale", pt, stale, err)
	}
	newBlob := rotated.Seal(pt, aad)
	if _, stale, err := rotated.Open(newBlob, aad); err != nil || stale {
		t.Fatalf("re-sealed value: stale=%v err=%v", stale, err)
	}
	// The old ring cannot read what the new key sealed, and a ring without the old key
	// cannot read the old value: fail closed.
	if _, _, err := old.Open(newBlob, aad); !errors.Is(err, ErrOpen) {
		t.Fatalf("old ring opened a value sealed by key 2: %v", err)
	}
	onlyNew, err := New("2:" + k2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := onlyNew.Open(oldBlob, aad); !errors.Is(err, ErrOpen) {
		t.Fatalf("ring without key 1 opened a value sealed by key 1: %v", err)
	}
}

func TestNewAcceptsKeyForms(t *testing.T) {
	t.Parallel()
	raw := make([]byte, KeySize)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	for name, spec := range map[string]string{
		"std padded":      base64.StdEncoding.EncodeToString(raw),
		"std unpadded":    base64.RawStdEncoding.EncodeToString(raw),
		"url safe":        base64.URLEncoding.EncodeToString(raw),
		"with id":         "7:" + base64.StdEncoding.EncodeToString(raw),
		"trailing spaces": " " + base64.StdEncoding.EncodeToString(raw) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(spec); err != nil {
				t.Fatalf("New(%s): %v", name, err)
			}
		})
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	t.Parallel()
	k := key(t)
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	cases := map[string]struct {
		spec, want string
	}{
		"empty":             {"", "empty key"},
		"short":             {short, "decodes to 16 bytes, want 32"},
		"not base64":        {"not*base64*at*all", "not valid base64"},
		"id zero":           {"0:" + k, "id must be a number from 1 to 255"},
		"id too big":        {"256:" + k, "id must be a number from 1 to 255"},
		"id not a number":   {"x:" + k, "id must be a number from 1 to 255"},
		"duplicate id":      {"1:" + k + ",1:" + k, "id 1 appears twice"},
		"list without ids":  {k + "," + k, `needs "id:base64"`},
		"second key short":  {"2:" + k + ",1:" + short, "key 2: decodes to 16 bytes"},
		"empty list member": {"2:" + k + ",", "key 2: a list of keys"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := New(c.spec)
			if !errors.Is(err, ErrBadKey) || r != nil {
				t.Fatalf("New = %v, %v; want ErrBadKey", r, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			if len(c.spec) > 20 && strings.Contains(err.Error(), c.spec[len(c.spec)-20:]) {
				t.Fatalf("error echoes key material: %q", err)
			}
		})
	}
}
