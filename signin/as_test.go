package signin

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// testAS is a small OAuth 2.1 authorization server for the tests: it checks what a real one
// checks (PKCE S256, resource, redirect_uri, client authentication, single-use codes) so
// that a handler that omits any of them fails.
type testAS struct {
	t   *testing.T
	srv *httptest.Server

	// Configuration, set before use.
	issuerPath     string   // "" or "/tenant1"
	openIDOnly     bool     // serve only OpenID discovery
	cimd           bool     // client_id_metadata_document_supported
	authMethods    []string // token_endpoint_auth_methods_supported
	scopesSupport  []string // scopes_supported
	noRegistration bool
	issParam       bool // advertise and send iss
	ecKey          *ecdsa.PublicKey
	ecClient       string
	dpopAlgs       []string // dpop_signing_alg_values_supported
	// tokenHook runs first at the token endpoint; true when it answered.
	tokenHook func(w http.ResponseWriter, r *http.Request) bool
	boundKey  string // DPoP key x of the last bound token (set by tests' hooks)

	mu         sync.Mutex
	clients    map[string]asClient // by client_id
	codes      map[string]asCode
	refresh    map[string]string // refresh token -> client_id
	requests   []string          // "METHOD path"
	authParams []url.Values      // every /authorize query
	tokenForms []url.Values      // every /token form
	registered []map[string]any  // every /register body
	seq        int
}

type asClient struct{ secret, method string }

type asCode struct {
	clientID, challenge, resource, redirect, scope string
}

func newTestAS(t *testing.T, configure func(*testAS)) *testAS {
	a := &testAS{t: t, clients: map[string]asClient{}, codes: map[string]asCode{}, refresh: map[string]string{},
		authMethods: []string{"client_secret_basic", "client_secret_post", "none"}}
	if configure != nil {
		configure(a)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", a.serve)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAS) issuer() string { return a.srv.URL + a.issuerPath }

func (a *testAS) metadata() map[string]any {
	m := map[string]any{
		"issuer":                                a.issuer(),
		"authorization_endpoint":                a.issuer() + "/authorize",
		"token_endpoint":                        a.issuer() + "/token",
		"response_types_supported":              []string{"code"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": a.authMethods,
	}
	if !a.noRegistration {
		m["registration_endpoint"] = a.issuer() + "/register"
	}
	if a.cimd {
		m["client_id_metadata_document_supported"] = true
	}
	if a.scopesSupport != nil {
		m["scopes_supported"] = a.scopesSupport
	}
	if a.issParam {
		m["authorization_response_iss_parameter_supported"] = true
	}
	if a.dpopAlgs != nil {
		m["dpop_signing_alg_values_supported"] = a.dpopAlgs
	}
	return m
}

func (a *testAS) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	p := r.URL.Path
	switch {
	case !a.openIDOnly && (p == "/.well-known/oauth-authorization-server"+a.issuerPath):
		writeJSON(w, 200, a.metadata())
	case a.openIDOnly && (p == "/.well-known/openid-configuration"+a.issuerPath || p == a.issuerPath+"/.well-known/openid-configuration"):
		writeJSON(w, 200, a.metadata())
	case p == a.issuerPath+"/register" && !a.noRegistration:
		a.register(w, r)
	case p == a.issuerPath+"/authorize":
		a.authorize(w, r)
	case p == a.issuerPath+"/token":
		a.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *testAS) register(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	method, _ := body["token_endpoint_auth_method"].(string)
	if method == "" {
		method = "client_secret_basic"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.registered = append(a.registered, body)
	a.seq++
	id := fmt.Sprintf("dcr-%d", a.seq)
	c := asClient{method: method}
	resp := map[string]any{"client_id": id, "token_endpoint_auth_method": method, "redirect_uris": body["redirect_uris"]}
	if method != "none" {
		c.secret = "dcr-secret-" + id
		resp["client_secret"] = c.secret
	}
	a.clients[id] = c
	writeJSON(w, 201, resp)
}

// preRegister adds a confidential client.
func (a *testAS) preRegister(id, secret, method string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients[id] = asClient{secret: secret, method: method}
}

func (a *testAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.authParams = append(a.authParams, q)
	_, known := a.clients[q.Get("client_id")]
	if a.cimd && strings.HasPrefix(q.Get("client_id"), "https://") {
		known = true
	}
	a.mu.Unlock()
	switch {
	case !known:
		http.Error(w, "unknown client", 400)
		return
	case q.Get("response_type") != "code", q.Get("code_challenge_method") != "S256", q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", 400)
		return
	case q.Get("resource") == "":
		http.Error(w, "resource required", 400)
		return
	}
	a.mu.Lock()
	a.seq++
	code := fmt.Sprintf("code-%d", a.seq)
	a.codes[code] = asCode{clientID: q.Get("client_id"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), redirect: q.Get("redirect_uri"), scope: q.Get("scope")}
	a.mu.Unlock()
	u, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		http.Error(w, "bad redirect", 400)
		return
	}
	rq := u.Query()
	rq.Set("code", code)
	rq.Set("state", q.Get("state"))
	if a.issParam {
		rq.Set("iss", a.issuer())
	}
	u.RawQuery = rq.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// authenticate checks client authentication at the token endpoint as registered.
func (a *testAS) authenticate(r *http.Request) (string, bool) {
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if r.PostForm.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return id, a.ecKey != nil && id == a.ecClient && verifyES256(a.ecKey, r.PostForm.Get("client_assertion"), id, a.issuer())
	}
	a.mu.Lock()
	c, ok := a.clients[id]
	a.mu.Unlock()
	if !ok {
		return id, a.cimd && strings.HasPrefix(id, "https://") && secret == ""
	}
	switch c.method {
	case "client_secret_basic":
		return id, basic && secret == c.secret
	case "client_secret_post":
		return id, !basic && secret == c.secret
	default:
		return id, secret == ""
	}
}

func (a *testAS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	a.mu.Lock()
	a.tokenForms = append(a.tokenForms, r.PostForm)
	a.mu.Unlock()
	if a.tokenHook != nil && a.tokenHook(w, r) {
		return
	}
	tokenType := "Bearer"
	if a.dpopAlgs != nil && r.Header.Get("DPoP") != "" {
		tokenType = "DPoP"
	}
	id, ok := a.authenticate(r)
	if !ok {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := a.codes[r.PostForm.Get("code")]
		delete(a.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case !ok || c.clientID != id:
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		case base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "PKCE"})
		case r.PostForm.Get("resource") != c.resource:
			writeJSON(w, 400, map[string]string{"error": "invalid_target"})
		case r.PostForm.Get("redirect_uri") != c.redirect:
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "redirect_uri"})
		default:
			rt := fmt.Sprintf("rt-%d", a.seq)
			a.refresh[rt] = id
			writeJSON(w, 200, map[string]any{"access_token": fmt.Sprintf("at-%d", a.seq), "token_type": tokenType,
				"expires_in": 3600, "refresh_token": rt, "scope": c.scope})
		}
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if a.refresh[rt] != id {
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(a.refresh, rt) // rotation: each refresh token is single use
		nrt := fmt.Sprintf("rt-%d", a.seq)
		a.refresh[nrt] = id
		writeJSON(w, 200, map[string]any{"access_token": fmt.Sprintf("at-%d", a.seq), "token_type": "Bearer",
			"expires_in": 3600, "refresh_token": nrt})
	case grantJWTBearer:
		switch a := r.PostForm.Get("assertion"); {
		case a == "" || (a != wifOK && !strings.HasPrefix(a, "jag-")):
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		default:
			writeJSON(w, 200, map[string]any{"access_token": fmt.Sprintf("jb-%d", a2seq(a)), "token_type": "Bearer", "expires_in": 3600})
		}
	case "client_credentials":
		writeJSON(w, 200, map[string]any{"access_token": fmt.Sprintf("cc-%d", a.seq), "token_type": "Bearer",
			"expires_in": 3600, "scope": r.PostForm.Get("scope")})
	default:
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
	}
}

func (a *testAS) count(prefix string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// wifOK is the workload JWT the test AS accepts.
const wifOK = "workload.jwt.ok"

func a2seq(s string) int { return len(s) }

// verifyES256 checks a compact JWS signed with ES256 and its client assertion claims.
func verifyES256(pub *ecdsa.PublicKey, jws, clientID, aud string) bool {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Iss, Sub, Aud, Jti string
		Exp                int64
	}
	if json.Unmarshal(b, &c) != nil {
		return false
	}
	return c.Iss == clientID && c.Sub == clientID && c.Aud == aud && c.Jti != "" && c.Exp > time.Now().Unix()
}
