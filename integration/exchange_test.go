package integration

// Token exchange (RFC 8693) to agents and MCP servers in auth mode exchange, against panva's
// oidc-provider (integration/peers/idp.mjs registers the token-exchange grant): users sign
// in to Baton with the provider's JWTs; each call to the A2A agent and the MCP server carries
// the user's token exchanged for the peer's audience, which the peer verifies with go-oidc
// against the provider's keys. The exchange requests are counted at a proxy in front of
// the provider's token endpoint.

import (
	"context"
	"encoding/base64"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// audienceVerifier verifies the provider's access tokens for one audience.
func audienceVerifier(t *testing.T, issuer, audience string) *oidc.IDTokenVerifier {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, issuer)
	require.NoError(t, err)
	return p.Verifier(&oidc.Config{ClientID: audience, SupportedSigningAlgs: []string{"ES256"}})
}

// whoAgent is an A2A agent that answers "sub=<sub> aud=<aud>" for a valid bearer token of its
// audience and refuses the call otherwise; it records the subject of every call.
type whoAgent struct {
	v *oidc.IDTokenVerifier

	mu    sync.Mutex
	calls []string // sub of each call, "" for one without a valid token
}

func (w *whoAgent) subjects() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

func (w *whoAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		sub, aud := "", ""
		if cc, ok := a2asrv.CallContextFrom(ctx); ok {
			if v, ok := cc.ServiceParams().Get("authorization"); ok && len(v) > 0 {
				if raw, ok := strings.CutPrefix(v[0], "Bearer "); ok {
					if tok, err := w.v.Verify(ctx, raw); err == nil {
						sub, aud = tok.Subject, strings.Join(tok.Audience, ",")
					}
				}
			}
		}
		w.mu.Lock()
		w.calls = append(w.calls, sub)
		w.mu.Unlock()
		if sub == "" {
			yield(nil, a2a.ErrUnauthenticated)
			return
		}
		yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(fmt.Sprintf("sub=%s aud=%s", sub, aud))), nil)
	}
}

func (w *whoAgent) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnauthenticated) }
}

func startWhoAgent(t *testing.T, v *oidc.IDTokenVerifier) (string, *whoAgent) {
	t.Helper()
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	card := &a2a.AgentCard{
		Name: "research", Description: "Says who called it.", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(ts.URL+"/a2a", a2a.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "who", Name: "Who", Description: "Says who called.", Tags: []string{"who"}}},
	}
	agent := &whoAgent{v: v}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	return ts.URL, agent
}

// startWhoMCP serves an MCP server whose tool "whoami" answers "sub=<sub> aud=<aud>"; go-sdk's
// bearer middleware refuses requests without a valid token of the server's audience.
func startWhoMCP(t *testing.T, v *oidc.IDTokenVerifier) (string, *atomic.Int64) {
	t.Helper()
	var refused atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "who", Version: "1.0.0"}, nil)
	type args struct {
		Prompt string `json:"prompt,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Says who called."}, func(ctx context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		ti := req.Extra.TokenInfo
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("sub=%s aud=%v", ti.UserID, ti.Extra["aud"])}}}, nil, nil
	})
	verify := func(ctx context.Context, raw string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, err := v.Verify(ctx, raw)
		if err != nil {
			refused.Add(1)
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: tok.Subject, Expiration: tok.Expiry, Extra: map[string]any{"aud": strings.Join(tok.Audience, ",")}}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL, &refused
}

// countingProxy forwards to target and counts the requests.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		bufferBody(r)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, &n
}

// exchangeConfig is the config of a coordinator whose users sign in with the provider's
// JWTs and whose calls to the research agent (and the MCP server "who", when MCPURL is set)
// carry the user's token exchanged at TokenURL.
type exchangeConfig struct {
	LLMURL, Issuer, TokenURL, AgentURL string
	// MCPURL is the "who" MCP server's; none when empty.
	MCPURL string
	Store  string
	// Grace is server.shutdown_grace.
	Grace string
	// Replication is the replication section's body (indented); none when empty.
	Replication string
}

func (c exchangeConfig) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, `server:
  shutdown_grace: %s
  secrets_key_env: EX_KEY
  oidc:
    issuer: %q
    audience: baton
    allowed_algs: [ES256]
llm:
  provider: openai
  base_url: %q
  model: fake-model
  api_key_env: %s
agents:
  - name: research
    url: %q
    auth: {mode: exchange, token_url: %q, audience: research-agent, client_id: baton, client_secret_env: EX_SECRET}
`, c.Grace, c.Issuer, c.LLMURL, llmKeyEnv, c.AgentURL, c.TokenURL)
	if c.MCPURL != "" {
		fmt.Fprintf(&b, `mcp_servers:
  - name: who
    url: %q
    auth: {mode: exchange, token_url: %q, audience: tools, scopes: [tools:call], client_id: baton, client_secret_env: EX_SECRET}
`, c.MCPURL, c.TokenURL)
	}
	fmt.Fprintf(&b, "store: %q\n", c.Store)
	if c.Replication != "" {
		b.WriteString("replication:\n" + c.Replication)
	}
	return b.String()
}

func exchangeEnv() []string {
	return []string{llmKeyEnv + "=fake-key", "EX_SECRET=baton-secret",
		"EX_KEY=" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}
}

// toolResult runs text on a new thread as token's user and returns the one tool result.
func toolResult(t *testing.T, base, token, text string) string {
	t.Helper()
	st, b := secPost(t, base, "/agui", mustJSON(t, runInput(newThreadID("ex"), "r1", text)),
		"Content-Type", "application/json", "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusOK, st, string(b))
	evs := sseEvents(t, b)
	res := eventsOfType(evs, "TOOL_CALL_RESULT")
	require.Len(t, res, 1, "events: %v", eventTypes(evs))
	content, _ := res[0]["content"].(string)
	return content
}

// TestTokenExchange: the agent and the MCP server each receive a token whose sub is the
// user and whose aud is theirs; a second call is served from the cache (no new exchange);
// two users never get each other's token; a refused exchange is [AUTH_REQUIRED] for the
// agent and for the MCP server, and neither is called; the provider accepts only a
// subject_token_type of JWT (idp.mjs); no token reaches the logs.
func TestTokenExchange(t *testing.T) {
	t.Parallel()
	p := startIDP(t)
	tokenURL, exchanges := countingProxy(t, p.issuer)
	agentURL, agent := startWhoAgent(t, audienceVerifier(t, p.issuer, "research-agent"))
	mcpURL, mcpRefused := startWhoMCP(t, audienceVerifier(t, p.issuer, "tools"))
	llm := startFakeLLM(t)
	base, coord := startSecCoordinator(t, exchangeConfig{LLMURL: llm.URL, Issuer: p.issuer,
		TokenURL: tokenURL + "/token", AgentURL: agentURL, MCPURL: mcpURL, Store: "memory:", Grace: "3s"}.yaml(),
		exchangeEnv(), "json")

	alice, bob, mallory := p.token(t, "alice", "urn:baton"), p.token(t, "bob", "urn:baton"), p.token(t, "mallory", "urn:baton")

	// alice's first run: one exchange for the agent, and one for the MCP server, whose
	// tools are listed as alice at the run's start (nobody had listed them yet).
	assert.Equal(t, "[COMPLETED]\nsub=alice aud=research-agent", toolResult(t, base, alice, "research: who am I"))
	assert.EqualValues(t, 2, exchanges.Load())
	assert.Contains(t, toolResult(t, base, alice, "research: again"), "sub=alice aud=research-agent")
	assert.EqualValues(t, 2, exchanges.Load(), "the second call uses the cached token")
	assert.Contains(t, toolResult(t, base, bob, "research: and me"), "sub=bob aud=research-agent")
	assert.EqualValues(t, 3, exchanges.Load(), "bob's call exchanges bob's token")
	assert.Equal(t, []string{"alice", "alice", "bob"}, agent.subjects())

	assert.Contains(t, toolResult(t, base, bob, "who__whoami: who am I"), "sub=bob aud=tools")
	assert.EqualValues(t, 4, exchanges.Load(), "bob's first call to the MCP server")
	assert.Contains(t, toolResult(t, base, alice, "who__whoami: who am I"), "sub=alice aud=tools")
	assert.Contains(t, toolResult(t, base, bob, "who__whoami: again"), "sub=bob aud=tools")
	assert.EqualValues(t, 4, exchanges.Load(), "cached: alice's from the tool listing, bob's from his first call")

	// The provider refuses mallory's exchanges: the model sees [AUTH_REQUIRED] with what to
	// do, and the agent is never called without the user's identity.
	out := toolResult(t, base, mallory, "research: hello")
	assert.True(t, strings.HasPrefix(out, "[AUTH_REQUIRED:task_id=none]"), out)
	assert.Contains(t, out, "refused to issue a token for this user (invalid_target)", "the reason the user can act on")
	assert.Len(t, agent.subjects(), 3, "the agent was not called for mallory")
	out = toolResult(t, base, mallory, "who__whoami: hello")
	assert.True(t, strings.HasPrefix(out, "[AUTH_REQUIRED:task_id=none]\nMCP server \"who\" was not called"), out)
	assert.Contains(t, out, "refused to issue a token for this user (invalid_target)", "the reason the user can act on")
	assert.Zero(t, mcpRefused.Load(), "the MCP server never received a call without a valid token")

	stdout, stderr := coord.Logs()
	logs := stdout + stderr
	for _, tok := range []string{alice, bob, mallory} {
		assert.NotContains(t, logs, strings.Split(tok, ".")[2], "no token signature in the logs")
	}
}
