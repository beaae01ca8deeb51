// Package seal encrypts small secrets (OAuth tokens, PKCE verifiers) for storage with
// AES-256-GCM, so that a copy of the database alone reveals nothing and a sealed value
// copied to another row does not open.
//
// A Ring is built from one environment variable's value, in one of two forms:
//
//	BATON_SECRETS_KEY=$(openssl rand -base64 32)          # one key, id 1
//	BATON_SECRETS_KEY="2:<base64 32 bytes>,1:<base64 32 bytes>"
//
// In the list form the first key seals and every key opens, which is how keys rotate: put
// the new key first, keep the old one until every value has been re-sealed (Open reports a
// value sealed with a key other than the first as stale, and the caller seals it again).
// Key ids are 1..255; each key is standard or URL-safe base64 (padding optional) of exactly
// 32 bytes.
//
// Every value is bound to additional data (AAD) naming its purpose and owner, built with
// [AAD]: a grant sealed for (alice, docs) fails to open as (bob, docs). Sealing fails closed:
// there is no unsealed fallback, and a missing or wrong key is an error, never plaintext.
// A key must not seal more than 2^32 values (random 96-bit nonces); rotate well before.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadKey is returned by New when the key specification cannot be used.
var ErrBadKey = errors.New("seal: bad key")

// ErrOpen is returned by Open when a value cannot be opened: unknown key id, tampered or
// truncated value, or additional data that does not match. The causes are not told apart,
// so that nothing learns which part was wrong.
var ErrOpen = errors.New("seal: cannot open sealed value")

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

// version prefixes every sealed value, so the format can change without guessing.
const version byte = 1

// Ring holds the keys: the first seals, all open. It is safe for concurrent use.
type Ring struct {
	current byte
	aeads   map[byte]cipher.AEAD
}

// New parses a key specification (see the package doc). Errors name the position of the
// bad key but never echo key material.
func New(spec string) (*Ring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, fmt.Errorf("%w: empty key", ErrBadKey)
	}
	r := &Ring{aeads: map[byte]cipher.AEAD{}}
	parts := strings.Split(spec, ",")
	for i, part := range parts {
		part = strings.TrimSpace(part)
		id := byte(1)
		b64 := part
		if idStr, rest, ok := strings.Cut(part, ":"); ok {
			n, err := strconv.Atoi(idStr)
			if err != nil || n < 1 || n > 255 {
				return nil, fmt.Errorf("%w: key %d: id must be a number from 1 to 255", ErrBadKey, i+1)
			}
			id, b64 = byte(n), rest
		} else if len(parts) > 1 {
			return nil, fmt.Errorf("%w: key %d: a list of keys needs \"id:base64\" entries", ErrBadKey, i+1)
		}
		key, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrBadKey, i+1, err)
		}
		if _, dup := r.aeads[id]; dup {
			return nil, fmt.Errorf("%w: key %d: id %d appears twice", ErrBadKey, i+1, id)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrBadKey, i+1, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %v", ErrBadKey, i+1, err)
		}
		if i == 0 {
			r.current = id
		}
		r.aeads[id] = aead
	}
	return r, nil
}

// decodeKey accepts standard or URL-safe base64, padded or not, of exactly KeySize bytes.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != KeySize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d (use `openssl rand -base64 32`)", len(key), KeySize)
			}
			return key, nil
		}
	}
	return nil, errors.New("not valid base64")
}

// AAD builds the additional data that binds a sealed value to its purpose and owner. Parts
// are NUL-separated so that ("ab","c") and ("a","bc") differ.
func AAD(purpose string, parts ...string) []byte {
	n := len(purpose)
	for _, p := range parts {
		n += 1 + len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, purpose...)
	for _, p := range parts {
		b = append(b, 0)
		b = append(b, p...)
	}
	return b
}

// KeyID is the id of the key that seals.
func (r *Ring) KeyID() int { return int(r.current) }

// Seal encrypts plaintext with the first key, bound to aad. The result is
// version || key id || nonce || ciphertext || tag.
func (r *Ring) Seal(plaintext, aad []byte) []byte {
	aead := r.aeads[r.current]
	head := []byte{version, r.current}
	return aead.Seal(head, nil, plaintext, aad)
}

// Open decrypts a value sealed by Seal with the same aad. stale is true when the value was
// sealed with a key other than the first: the caller should seal it again and store it.
func (r *Ring) Open(sealed, aad []byte) (plaintext []byte, stale bool, err error) {
	if len(sealed) < 2 || sealed[0] != version {
		return nil, false, ErrOpen
	}
	aead, ok := r.aeads[sealed[1]]
	if !ok {
		return nil, false, ErrOpen
	}
	pt, err := aead.Open(nil, nil, sealed[2:], aad)
	if err != nil {
		return nil, false, ErrOpen
	}
	return pt, sealed[1] != r.current, nil
}
