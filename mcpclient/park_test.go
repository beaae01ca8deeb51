package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/demomcp"
	"github.com/baton-dev/baton/internal/toolname"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callCtx is a context for one call in a test (the tool timeout).
func callCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// parkCall calls name with Park and returns the parked call.
func parkCall(t *testing.T, r *Registry, name, args string) *InputRequired {
	t.Helper()
	out, err := callText(r, callCtx(t), name, json.RawMessage(args), CallOptions{Park: true})
	require.Empty(t, out)
	var in *InputRequired
	require.ErrorAs(t, err, &in)
	return in
}

// roundTrip stores and loads in as JSON, as the coordinator's store does.
func roundTrip(t *testing.T, in *InputRequired) *InputRequired {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var out InputRequired
	require.NoError(t, json.Unmarshal(b, &out))
	return &out
}

// demoConfigs are the demo server over stdio and stateless HTTP (2026-07-28).
func demoConfigs() []struct {
	name string
	cfg  func(t *testing.T) ServerConfig
} {
	return []struct {
		name string
		cfg  func(t *testing.T) ServerConfig
	}{
		{"stdio", func(*testing.T) ServerConfig { return demoStdio() }},
		{"http", func(t *testing.T) ServerConfig {
			return ServerConfig{Name: "demo", URL: startDemoHTTP(t, true, demomcp.Options{})}
		}},
	}
}

const deployArgs = `{"service":"api","version":"v2"}`

func TestMCPParkDeploy(t *testing.T) {
	accept := func(env any) map[string]*mcp.ElicitResult {
		return map[string]*mcp.ElicitResult{"environment": {Action: "accept", Content: map[string]any{"environment": env}}}
	}
	resumes := []struct {
		name      string
		edit      func(in *InputRequired) // a change to the parked call before the resume
		responses map[string]*mcp.ElicitResult
		tag       string
		want      string
		wantErr   error
		parkAgain bool // the server asks again
	}{
		{name: "accept", responses: accept("staging"), tag: "OK", want: "Deployed api (v2) to staging."},
		{name: "decline", responses: map[string]*mcp.ElicitResult{"environment": {Action: "decline"}}, tag: "OK", want: `Deployment of api was not started: the user chose "decline".`},
		{name: "cancel", responses: map[string]*mcp.ElicitResult{"environment": {Action: "cancel"}}, tag: "OK", want: `the user chose "cancel"`},
		{name: "answer off the schema", responses: accept("moon"), tag: "ERROR", want: "does not match the form"},
		{name: "required field missing", responses: map[string]*mcp.ElicitResult{"environment": {Action: "accept"}}, tag: "ERROR", want: "does not match the form"},
		{name: "renamed in the catalog", edit: func(in *InputRequired) { in.Tool = "old__deploy" }, responses: accept("production"), tag: "OK", want: "to production."},
		{name: "server asks again", edit: func(in *InputRequired) { in.RequestState = "stale" }, responses: accept("staging"), parkAgain: true},
		{name: "too many rounds", edit: func(in *InputRequired) { in.RequestState, in.Rounds = "stale", maxInputRounds }, responses: accept("staging"), tag: "ERROR", want: "kept asking for more input"},
		{name: "no response", responses: map[string]*mcp.ElicitResult{}, wantErr: ErrInvalidResume},
		{name: "nil response", responses: map[string]*mcp.ElicitResult{"environment": nil}, wantErr: ErrInvalidResume},
		{name: "response to no request", responses: map[string]*mcp.ElicitResult{"environment": {Action: "decline"}, "other": {Action: "decline"}}, wantErr: ErrInvalidResume},
		{name: "unknown action", responses: map[string]*mcp.ElicitResult{"environment": {Action: "maybe"}}, wantErr: ErrInvalidResume},
		{name: "no requests", edit: func(in *InputRequired) { in.Requests = nil }, responses: accept("staging"), wantErr: ErrInvalidResume},
		{name: "arguments not an object", edit: func(in *InputRequired) { in.Args = json.RawMessage(`[1]`) }, responses: accept("staging"), wantErr: ErrInvalidResume},
	}
	for _, tr := range demoConfigs() {
		t.Run(tr.name, func(t *testing.T) {
			leakCheck(t)
			cfg := tr.cfg(t)
			// The Elicitor must not be asked: parked requests go to the caller.
			el := &recElicitor{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "production"}}}
			r := newRegistry(t, []ServerConfig{cfg}, Options{Elicitor: el})

			in := parkCall(t, r, "demo__deploy", deployArgs)
			assert.Equal(t, "demo", in.Server)
			assert.Equal(t, "demo__deploy", in.Tool)
			assert.Equal(t, "deploy", in.ToolName)
			assert.JSONEq(t, deployArgs, string(in.Args))
			assert.Equal(t, "deploy/v1", in.RequestState)
			assert.False(t, in.URLRequired)
			assert.Equal(t, 1, in.Rounds)
			require.Len(t, in.Requests, 1)
			req := in.Requests[0]
			assert.Equal(t, "environment", req.Key)
			assert.Equal(t, "form", req.Mode)
			assert.Equal(t, "Deploy api (v2) to which environment?", req.Message)
			assert.Equal(t, "object", req.Schema["type"])
			assert.Equal(t, []any{"environment"}, req.Schema["required"])
			props, _ := req.Schema["properties"].(map[string]any)
			env, _ := props["environment"].(map[string]any)
			assert.Equal(t, []any{"staging", "production"}, env["enum"])
			assert.Contains(t, in.Error(), "demo__deploy")
			assert.Contains(t, in.Meta, "io.modelcontextprotocol/serverInfo", "the asking result's _meta")
			kept := *in
			kept.Meta = nil
			assert.Equal(t, &kept, roundTrip(t, in), "JSON round trip (the asking result's _meta is counted once, not kept)")

			for _, tt := range resumes {
				t.Run(tt.name, func(t *testing.T) {
					parked := roundTrip(t, in)
					if tt.edit != nil {
						tt.edit(parked)
					}
					out, err := resumeText(r, callCtx(t), parked, tt.responses, CallOptions{Park: true})
					switch {
					case tt.wantErr != nil:
						require.ErrorIs(t, err, tt.wantErr)
						assert.Empty(t, out)
					case tt.parkAgain:
						var again *InputRequired
						require.ErrorAs(t, err, &again)
						assert.Empty(t, out)
						assert.Equal(t, "deploy/v1", again.RequestState)
						assert.Equal(t, parked.Rounds+1, again.Rounds)
						// The second round completes.
						out, err = resumeText(r, callCtx(t), again, tt.responses, CallOptions{Park: true})
						require.NoError(t, err)
						assert.Contains(t, out, "Deployed api (v2) to staging.")
					default:
						require.NoError(t, err)
						assert.Equal(t, tt.tag, tagOf(t, out), out)
						assert.Contains(t, out, tt.want)
					}
				})
			}
			assert.Empty(t, el.requests())

			t.Run("abandon", func(t *testing.T) {
				require.NoError(t, r.Abandon(callCtx(t), roundTrip(t, in)))
				require.NoError(t, r.Abandon(callCtx(t), nil), "nothing to tell")
			})
			t.Run("timeout", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
				defer cancel()
				<-ctx.Done()
				out, err := resumeText(r, ctx, roundTrip(t, in), accept("staging"), CallOptions{})
				require.NoError(t, err)
				assert.Equal(t, "action_timeout", signalOf(t, out)["error"])
			})
			t.Run("without park the elicitor answers", func(t *testing.T) {
				out := mustCall(t, r, "demo__deploy", deployArgs)
				assert.Contains(t, out, "to production.")
				assert.Len(t, el.requests(), 1)
			})

			t.Run("resume after a restart", func(t *testing.T) {
				stored, err := json.Marshal(parkCall(t, r, "demo__deploy", `{"service":"web"}`))
				require.NoError(t, err)
				require.NoError(t, r.Close())

				r2 := newRegistry(t, []ServerConfig{cfg}, Options{})
				var in InputRequired
				require.NoError(t, json.Unmarshal(stored, &in))
				out, err := resumeText(r2, callCtx(t), &in, accept("staging"), CallOptions{Park: true})
				require.NoError(t, err)
				assert.Equal(t, "OK", tagOf(t, out), out)
				assert.Contains(t, out, "Deployed web (latest) to staging.")
				require.NoError(t, r2.Abandon(callCtx(t), &in))

				_, err = resumeText(r, callCtx(t), &in, accept("staging"), CallOptions{})
				require.ErrorIs(t, err, ErrClosed, "the closed registry")
			})
		})
	}
}

func TestMCPParkDetails(t *testing.T) {
	leakCheck(t)
	fe := newFaultEnv(t)
	r := newRegistry(t, []ServerConfig{fe.server("f")}, Options{})
	in := parkCall(t, r, "f__ask", `{}`)
	require.Len(t, in.Requests, 1)
	assert.Equal(t, "who", in.Requests[0].Key)
	assert.Equal(t, "s1", in.RequestState)
	assert.JSONEq(t, `{}`, string(in.Args), "arguments are an object, never null")

	tests := []struct {
		name    string
		content map[string]any
		tag     string
		want    string
	}{
		{"defaults applied", nil, "OK", "action=accept name=Ada count=3"},
		{"answer kept", map[string]any{"name": "Bob"}, "OK", "name=Bob count=3"},
		{"invalid answer", map[string]any{"count": 99}, "ERROR", "does not match the form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := resumeText(r, callCtx(t), roundTrip(t, in), map[string]*mcp.ElicitResult{"who": {Action: "accept", Content: tt.content}}, CallOptions{})
			require.NoError(t, err)
			assert.Equal(t, tt.tag, tagOf(t, out), out)
			assert.Contains(t, out, tt.want)
		})
	}
	t.Run("sampling is not parked", func(t *testing.T) {
		out, err := callText(r, callCtx(t), "f__sample", nil, CallOptions{Park: true})
		require.NoError(t, err)
		assert.Equal(t, "ERROR", tagOf(t, out))
		assert.Contains(t, out, "sampling")
	})
	t.Run("server no longer configured", func(t *testing.T) {
		empty := newRegistry(t, nil, Options{})
		out, err := resumeText(empty, callCtx(t), roundTrip(t, in), map[string]*mcp.ElicitResult{"who": {Action: "decline"}}, CallOptions{})
		require.NoError(t, err)
		sig := signalOf(t, out)
		assert.Equal(t, "unknown_action", sig["error"])
		assert.Equal(t, "f__ask", sig["requested"])
		require.Error(t, empty.Abandon(callCtx(t), in))
	})
	t.Run("server down", func(t *testing.T) {
		down := newRegistry(t, []ServerConfig{{Name: "f", Command: []string{"/nonexistent/mcp-server"}}}, Options{MaxReconnects: 1})
		out, err := resumeText(down, callCtx(t), roundTrip(t, in), map[string]*mcp.ElicitResult{"who": {Action: "decline"}}, CallOptions{})
		require.NoError(t, err)
		assert.Equal(t, "UNREACHABLE", tagOf(t, out), out)
		require.Error(t, down.Abandon(callCtx(t), in))
	})
}

// TestMCPParkAbandon checks on the wire that Abandon answers every request
// with cancel and sends the request state back.
func TestMCPParkAbandon(t *testing.T) {
	leakCheck(t)
	h := demomcp.Handler(demomcp.NewServer(demomcp.Options{}), nil)
	var mu sync.Mutex
	var calls []map[string]any // the params of every tools/call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var msg struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			mu.Lock()
			calls = append(calls, msg.Params)
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r := newRegistry(t, []ServerConfig{{Name: "demo", URL: srv.URL}}, Options{})
	in := parkCall(t, r, "demo__deploy", deployArgs)
	require.NoError(t, r.Abandon(context.Background(), roundTrip(t, in)))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 2)
	last := calls[1]
	assert.Equal(t, "deploy", last["name"])
	assert.Equal(t, map[string]any{"service": "api", "version": "v2"}, last["arguments"])
	assert.Equal(t, "deploy/v1", last["requestState"])
	assert.Equal(t, map[string]any{"environment": map[string]any{"action": "cancel"}}, last["inputResponses"])
}

// TestMCPParkInSession: a 2025-11-25 server asks inside the call, which
// cannot be parked: the Elicitor answers (or, without one, the request is
// declined), Park or not.
func TestMCPParkInSession(t *testing.T) {
	tests := []struct {
		name string
		el   Elicitor
		want string
	}{
		{"elicitor", &recElicitor{res: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"environment": "staging"}}}, "Deployed api (v2) to staging."},
		{"no elicitor", nil, `the user chose "decline"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakCheck(t)
			url := startDemoHTTP(t, false, demomcp.Options{})
			r := newRegistry(t, []ServerConfig{{Name: "demo", URL: url}}, Options{Elicitor: tt.el})
			out, err := callText(r, callCtx(t), "demo__deploy", json.RawMessage(deployArgs), CallOptions{Park: true})
			require.NoError(t, err)
			assert.Equal(t, "OK", tagOf(t, out), out)
			assert.Contains(t, out, tt.want)
			if el, ok := tt.el.(*recElicitor); ok {
				require.Len(t, el.requests(), 1)
				assert.Equal(t, ShapeSession, el.requests()[0].Shape)
			}
		})
	}
}

func TestMCPParkURLEverything(t *testing.T) {
	transports := []struct {
		name string
		cfg  func(t *testing.T) ServerConfig
	}{
		{"stdio", func(t *testing.T) ServerConfig {
			node, entry := everything(t)
			return ServerConfig{Name: "everything", Command: []string{node, entry, "stdio"}}
		}},
		{"http", func(t *testing.T) ServerConfig {
			return ServerConfig{Name: "everything", URL: startEverythingHTTP(t)}
		}},
	}
	tests := []struct {
		name      string
		responses map[string]*mcp.ElicitResult // keyed by request index, rewritten to the key
		tag       string
		want      string
		asked     bool // the retried call reached the server (which asks in session)
	}{
		{"done", nil, "OK", "User completed the URL elicitation flow", true},
		{"accepted", map[string]*mcp.ElicitResult{"0": {Action: "accept"}}, "OK", "User completed the URL elicitation flow", true},
		{"declined", map[string]*mcp.ElicitResult{"0": {Action: "decline"}}, "ERROR", "the user did not (decline)", false},
	}
	// The transports side by side, checked for leaks together once both are done.
	leakCheck(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			el := &recElicitor{res: &mcp.ElicitResult{Action: "accept"}}
			r := newRegistry(t, []ServerConfig{tr.cfg(t)}, Options{Elicitor: el})
			require.True(t, r.Status()[0].Connected, r.Status()[0].LastError)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := len(el.requests())
					// The server remembers a -32042 by session and URL: a
					// URL per case keeps the cases apart.
					args := `{"url":"https://example.com/` + strings.ReplaceAll(tt.name, " ", "-") + `","message":"Sign in","errorPath":true}`
					in := parkCall(t, r, "everything__trigger-url-elicitation", args)
					assert.True(t, in.URLRequired)
					assert.Empty(t, in.RequestState)
					require.Len(t, in.Requests, 1)
					req := in.Requests[0]
					assert.Equal(t, "url", req.Mode)
					assert.True(t, strings.HasPrefix(req.URL, "https://"), req.URL)
					assert.NotEmpty(t, req.Message)
					assert.NotEmpty(t, req.ElicitationID)
					assert.Equal(t, req.ElicitationID, req.Key)
					assert.Nil(t, req.Schema)
					assert.Len(t, el.requests(), before, "a parked request does not reach the Elicitor")
					assert.Contains(t, in.Error(), "link")
					require.NoError(t, r.Abandon(callCtx(t), in), "nothing to tell")

					parked := roundTrip(t, in)
					assert.Equal(t, in, parked)
					var responses map[string]*mcp.ElicitResult
					if tt.responses != nil {
						responses = map[string]*mcp.ElicitResult{req.Key: tt.responses["0"]}
					}
					out, err := resumeText(r, callCtx(t), parked, responses, CallOptions{Park: true})
					require.NoError(t, err)
					assert.Equal(t, tt.tag, tagOf(t, out), out)
					assert.Contains(t, out, tt.want)
					reqs := el.requests()[before:]
					if !tt.asked {
						assert.Empty(t, reqs)
						return
					}
					// The retry proceeds to an in-session URL elicitation,
					// which only the Elicitor can answer.
					require.Len(t, reqs, 1)
					assert.Equal(t, ShapeSession, reqs[0].Shape)
					assert.Equal(t, "url", reqs[0].Mode)
				})
			}
			t.Run("response to no request", func(t *testing.T) {
				in := parkCall(t, r, "everything__trigger-url-elicitation", `{"url":"https://example.com/bad","errorPath":true}`)
				_, err := resumeText(r, callCtx(t), in, map[string]*mcp.ElicitResult{"nope": {Action: "accept"}}, CallOptions{})
				require.ErrorIs(t, err, ErrInvalidResume)
			})
		})
	}
}

func TestMCPInputRequiredJSON(t *testing.T) {
	tests := []struct {
		name string
		in   InputRequired
		want string
	}{
		{"form", InputRequired{
			Server: "s", Tool: "s__t", ToolName: "t", Args: json.RawMessage(`{"a":1}`),
			Requests:     []InputRequest{{Key: "k", Mode: "form", Message: "m", Schema: map[string]any{"type": "object"}}},
			RequestState: "st", Rounds: 1,
		}, `{"server":"s","tool":"s__t","toolName":"t","args":{"a":1},"requests":[{"key":"k","mode":"form","message":"m","schema":{"type":"object"}}],"requestState":"st","rounds":1}`},
		{"url", InputRequired{
			Server: "s", Tool: "s__t", ToolName: "t", Args: json.RawMessage(`{}`),
			Requests:    []InputRequest{{Key: "e1", Mode: "url", Message: "m", URL: "https://x", ElicitationID: "e1"}},
			URLRequired: true, Rounds: 1,
		}, `{"server":"s","tool":"s__t","toolName":"t","args":{},"requests":[{"key":"e1","mode":"url","message":"m","url":"https://x","elicitationId":"e1"}],"urlRequired":true,"rounds":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(&tt.in)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(b))
			var back InputRequired
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.in, back)
			var err2 error = &back
			var as *InputRequired
			assert.True(t, errors.As(err2, &as))
		})
	}
}

// A 70-character and a non-ASCII server name. The parked call names the
// tool as the catalog does (hashed where cut, one "_" per character), and after a restart
// the new registry resumes it under the same name.
func TestMCPParkOddServerNames(t *testing.T) {
	for _, server := range []string{strings.Repeat("s", 70), "démo-ü"} {
		t.Run(server[:4], func(t *testing.T) {
			leakCheck(t)
			cfg := demoStdio()
			cfg.Name = server
			r := newRegistry(t, []ServerConfig{cfg}, Options{})
			var name string
			for _, tool := range r.Tools() {
				if tool.ToolName == "deploy" {
					name = tool.Name
				}
			}
			require.NotEmpty(t, name)
			assert.Equal(t, toolname.MCP(server, "deploy"), name)
			assert.LessOrEqual(t, len(name), toolname.Max)
			in := parkCall(t, r, name, deployArgs)
			assert.Equal(t, name, in.Tool, "the parked call keeps the catalog name")
			stored, err := json.Marshal(in)
			require.NoError(t, err)
			require.NoError(t, r.Close())

			r2 := newRegistry(t, []ServerConfig{cfg}, Options{})
			var back InputRequired
			require.NoError(t, json.Unmarshal(stored, &back))
			res, err := r2.Resume(callCtx(t), &back, map[string]*mcp.ElicitResult{"environment": {Action: "accept", Content: map[string]any{"environment": "staging"}}}, CallOptions{Park: true})
			require.NoError(t, err)
			assert.Equal(t, StatusOK, res.Status)
			assert.Equal(t, name, res.Tool, "same name after the restart")
		})
	}
}
