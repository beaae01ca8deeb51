package signin

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DPoP (RFC 9449) binds an access token to a key Baton holds: every request carries a fresh
// proof signed with that key, so a leaked token is useless alone. Baton uses it when the
// authorization server advertises ES256 in dpop_signing_alg_values_supported. The key is
// created when a sign-in starts, kept in the Pending record and then in the Grant (both
// sealed at rest by the store), and used for the token request, refreshes and every MCP
// request (see Handler.Transport).

// newDPoPKey returns a new P-256 key as PKCS#8 DER.
func newDPoPKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return x509.MarshalPKCS8PrivateKey(k)
}

func parseDPoPKey(der []byte) (*ecdsa.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.New("signin: unreadable DPoP key")
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("signin: DPoP key is not P-256")
	}
	return ek, nil
}

// dpopProof builds a DPoP proof JWT for one request.
func dpopProof(key *ecdsa.PrivateKey, method, target, accessToken, nonce string, now time.Time) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	enc := base64.RawURLEncoding
	pub, err := key.PublicKey.ECDH()
	if err != nil {
		return "", err
	}
	raw := pub.Bytes() // 0x04 || X || Y
	jwk := map[string]string{"kty": "EC", "crv": "P-256", "x": enc.EncodeToString(raw[1:33]), "y": enc.EncodeToString(raw[33:65])}
	header, err := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk})
	if err != nil {
		return "", err
	}
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": u.String(), "iat": now.Unix()}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = enc.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := enc.EncodeToString(header) + "." + enc.EncodeToString(body)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + enc.EncodeToString(sig), nil
}

// dpopTransport adds a DPoP proof to every request, turns a Bearer Authorization into the
// DPoP scheme, remembers server nonces (DPoP-Nonce) per origin and retries a request once
// when the server asks for a nonce (RFC 9449 §8, §9).
type dpopTransport struct {
	base http.RoundTripper
	key  func() *ecdsa.PrivateKey // nil result: pass the request through untouched
	now  func() time.Time

	mu     sync.Mutex
	nonces map[string]string // by origin
}

func newDPoPTransport(base http.RoundTripper, key func() *ecdsa.PrivateKey, now func() time.Time) *dpopTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	if now == nil {
		now = time.Now
	}
	return &dpopTransport{base: base, key: key, now: now, nonces: map[string]string{}}
}

// maxReplayBody bounds the request body kept for the one nonce retry.
const maxReplayBody = 8 << 20

func (t *dpopTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := t.key()
	if key == nil {
		return t.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxReplayBody {
			return nil, errors.New("signin: request body too large")
		}
		body = b
	}
	origin := req.URL.Scheme + "://" + req.URL.Host
	send := func() (*http.Response, string, error) {
		r := req.Clone(req.Context())
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		token := ""
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") || strings.HasPrefix(a, "DPoP ") {
			_, token, _ = strings.Cut(a, " ")
			r.Header.Set("Authorization", "DPoP "+token)
		}
		t.mu.Lock()
		nonce := t.nonces[origin]
		t.mu.Unlock()
		proof, err := dpopProof(key, r.Method, r.URL.String(), token, nonce, t.now())
		if err != nil {
			return nil, "", fmt.Errorf("signin: DPoP proof: %w", err)
		}
		r.Header.Set("DPoP", proof)
		resp, err := t.base.RoundTrip(r)
		return resp, nonce, err
	}
	resp, used, err := send()
	if err != nil {
		return nil, err
	}
	n := resp.Header.Get("DPoP-Nonce")
	if n == "" || len(n) > 1024 {
		return resp, nil
	}
	t.mu.Lock()
	t.nonces[origin] = n
	t.mu.Unlock()
	if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusBadRequest) && n != used {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		resp.Body.Close()
		resp, _, err = send()
	}
	return resp, err
}

// dpopClient returns hc with its transport wrapped to send DPoP proofs with key.
func dpopClient(hc *http.Client, key *ecdsa.PrivateKey, now func() time.Time) *http.Client {
	c := *hc
	c.Transport = newDPoPTransport(hc.Transport, func() *ecdsa.PrivateKey { return key }, now)
	return &c
}
