package signin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkDPoP verifies a DPoP proof (RFC 9449 §4.3) and returns its key's x coordinate.
func checkDPoP(proof, method, target, token, nonce string) (string, error) {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWS")
	}
	enc := base64.RawURLEncoding
	hb, _ := enc.DecodeString(parts[0])
	var h struct {
		Typ, Alg string
		JWK      struct{ Kty, Crv, X, Y string }
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Typ != "dpop+jwt" || h.Alg != "ES256" || h.JWK.Crv != "P-256" {
		return "", errors.New("bad header")
	}
	x, _ := enc.DecodeString(h.JWK.X)
	y, _ := enc.DecodeString(h.JWK.Y)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return "", errors.New("bad jwk")
	}
	sig, _ := enc.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if len(sig) != 64 || !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", errors.New("bad signature")
	}
	cb, _ := enc.DecodeString(parts[1])
	var c struct{ Jti, Htm, Htu, Ath, Nonce string }
	if err := json.Unmarshal(cb, &c); err != nil || c.Jti == "" || c.Htm != method || c.Htu != target {
		return "", errors.New("bad claims")
	}
	if token != "" {
		th := sha256.Sum256([]byte(token))
		if c.Ath != enc.EncodeToString(th[:]) {
			return "", errors.New("bad ath")
		}
	}
	if c.Nonce != nonce {
		return "", errors.New("use_dpop_nonce")
	}
	return h.JWK.X, nil
}

func TestDPoP(t *testing.T) {
	ctx := context.Background()
	const nonce = "n-1"
	var (
		mu    sync.Mutex
		bound = map[string]string{} // access token -> key x
		jtis  = map[string]bool{}
	)
	// The AS requires a DPoP proof with its nonce at the token endpoint and binds the token.
	f := newFixture(t, "path", func(a *testAS) {
		a.dpopAlgs = []string{"ES256"}
		a.tokenHook = func(w http.ResponseWriter, r *http.Request) bool {
			x, err := checkDPoP(r.Header.Get("DPoP"), "POST", a.issuer()+"/token", "", nonce)
			if err != nil {
				w.Header().Set("DPoP-Nonce", nonce)
				writeJSON(w, 400, map[string]string{"error": "use_dpop_nonce"})
				return true
			}
			a.boundKey = x
			return false
		}
	}, nil)
	as := f.as

	g := f.signIn(t, f.rs.challenge(401, ""))
	if len(g.DPoPKey) == 0 || g.Token.Type() != "DPoP" || as.boundKey == "" {
		t.Fatalf("grant not DPoP-bound: key %d bytes, type %q, AS saw key %q", len(g.DPoPKey), g.Token.Type(), as.boundKey)
	}
	mu.Lock()
	bound[g.Token.AccessToken] = as.boundKey
	mu.Unlock()

	// The resource server demands the DPoP scheme, a fresh proof bound to the token's key,
	// and its own nonce.
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		body, _ := io.ReadAll(r.Body)
		x, err := checkDPoP(r.Header.Get("DPoP"), r.Method, "http://"+r.Host+r.URL.Path, tok, "rs-nonce")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case scheme != "DPoP":
			http.Error(w, "scheme "+scheme, http.StatusUnauthorized)
		case err != nil && err.Error() == "use_dpop_nonce":
			w.Header().Set("DPoP-Nonce", "rs-nonce")
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
			w.WriteHeader(http.StatusUnauthorized)
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case bound[tok] != x:
			http.Error(w, "key not bound to token", http.StatusUnauthorized)
		case jtis[r.Header.Get("DPoP")]:
			http.Error(w, "replayed proof", http.StatusUnauthorized)
		default:
			jtis[r.Header.Get("DPoP")] = true
			w.Write(body)
		}
	}))
	defer rs.Close()

	ts, err := f.h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatal(err)
	}
	tok, _ := ts.Token()
	client := &http.Client{Transport: f.h.Transport(nil)}
	for i := range 2 {
		req, _ := http.NewRequest("POST", rs.URL+"/mcp?x=1", strings.NewReader(`{"n":1}`))
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken) // as go-sdk writes it
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"n":1}` {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}

	// A refresh carries a proof too (the AS hook refuses token requests without one, which
	// would forget the grant), and the new token stays bound to the same key.
	stored, _ := f.store.Grant(ctx, "alice", "docs")
	stored.Token.Expiry = time.Now().Add(-time.Minute)
	if err := f.store.PutGrant(ctx, "alice", "docs", stored); err != nil {
		t.Fatal(err)
	}
	ts, err = f.h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("TokenSource after expiry = %v, %v; want a refreshed token", ts, err)
	}
	if nt, _ := ts.Token(); nt.AccessToken == tok.AccessToken || as.boundKey != bound[tok.AccessToken] {
		t.Fatalf("refresh: token %q (was %q), key %q (was %q)", nt.AccessToken, tok.AccessToken, as.boundKey, bound[tok.AccessToken])
	}

	// Without a DPoP-bound grant the transport leaves requests alone.
	plain := NewHandler(HandlerConfig{Store: NewMemory(), Principal: "bob", Server: "docs"})
	if ts, _ := plain.TokenSource(ctx); ts != nil {
		t.Fatal("bob has a token")
	}
	seen := ""
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Get("Authorization") + "|" + r.Header.Get("DPoP")
	}))
	defer echo.Close()
	req, _ := http.NewRequest("GET", echo.URL, nil)
	req.Header.Set("Authorization", "Bearer abc")
	resp, err := (&http.Client{Transport: plain.Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen != "Bearer abc|" {
		t.Fatalf("plain request became %q", seen)
	}
}
