package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMCPToolNames(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		server, tool string
		want         string
	}{
		{"files", "read_file", "files__read_file"},
		{"my server", "get.thing/v2", "my_server__get_thing_v2"},
		{"ünï", "tool-1", "_n___tool-1"},
		{"a", long, ("a__" + long)[:55] + "_" + fmt.Sprintf("%08x", fnv32("a\x00"+long))},
	}
	for _, tt := range tests {
		got := toolName(tt.server, tt.tool)
		assert.Equal(t, tt.want, got, "%s/%s", tt.server, tt.tool)
		assert.LessOrEqual(t, len(got), 64)
	}
	assert.NotEqual(t, toolName("a", long+"1"), toolName("a", long+"2"), "long names keep a distinguishing hash")

	// Raw names that sanitise alike: the lossless one keeps the plain name, the others
	// get a stable hash of their raw name, whatever the order.
	raws := []rawName{{"caf?", "t"}, {"caf_", "t"}, {"café", "t"}}
	names, _ := catalogNames(raws)
	assert.Equal(t, "caf___t", names[1])
	assert.NotEqual(t, names[0], names[2])
	assert.True(t, strings.HasPrefix(names[0], "caf___t_"), names[0])
	rev, _ := catalogNames([]rawName{raws[2], raws[1], raws[0]})
	assert.Equal(t, []string{names[2], names[1], names[0]}, rev, "names do not depend on order")
}

// TestCatalogNamesTwoLossless: server "a" with tool "_b" and server "a_" with tool "b" both
// sanitise losslessly to "a___b": neither may keep it (the first in config order used to),
// both get a stable hash, whatever the order, and the collision is reported.
func TestCatalogNamesTwoLossless(t *testing.T) {
	raws := []rawName{{"a", "_b"}, {"a_", "b"}, {"a", "c"}}
	names, collisions := catalogNames(raws)
	assert.NotEqual(t, names[0], names[1], "two tools, one name")
	assert.NotEqual(t, "a___b", names[0])
	assert.NotEqual(t, "a___b", names[1])
	assert.True(t, strings.HasPrefix(names[0], "a___b_"), names[0])
	assert.True(t, strings.HasPrefix(names[1], "a___b_"), names[1])
	assert.Equal(t, "a__c", names[2], "a name nobody else has stays plain")
	assert.Equal(t, map[string][]rawName{"a___b": {{"a", "_b"}, {"a_", "b"}}}, collisions)
	rev, _ := catalogNames([]rawName{raws[2], raws[1], raws[0]})
	assert.Equal(t, []string{names[2], names[1], names[0]}, rev, "names do not depend on order (stable across restarts)")
	again, _ := catalogNames(raws)
	assert.Equal(t, names, again)
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

func TestMCPSchemaCheck(t *testing.T) {
	sch, err := compileSchema(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"a":     map[string]any{"type": "number"},
			"name":  map[string]any{"type": "string", "minLength": 2},
			"kind":  map[string]any{"type": "string", "enum": []any{"x", "y"}},
			"flag":  map[string]any{"type": "boolean"},
			"n":     map[string]any{"type": "boolean"},
			"count": map[string]any{"type": "integer", "minimum": 1},
		},
		"required":             []any{"a"},
		"additionalProperties": false,
	})
	require.NoError(t, err)
	tests := []struct {
		name   string
		args   map[string]any
		field  string
		got    any
		reason string
	}{
		{"ok", map[string]any{"a": 1.0}, "", nil, ""},
		{"optional null is absent", map[string]any{"a": 1.0, "name": nil}, "", nil, ""},
		{"type", map[string]any{"a": "1"}, "a", "1", `a: expected number, got the string "1"`},
		{"required null", map[string]any{"a": nil}, "a", nil, "a: expected number, got null"},
		{"bool null", map[string]any{"a": 1.0, "flag": false, "n": nil}, "", nil, ""},
		{"missing", map[string]any{"name": "bob"}, "a", nil, "a: required, but missing"},
		{"enum", map[string]any{"a": 1.0, "kind": "z"}, "kind", "z", `kind: expected one of ["x","y"], got the string "z"`},
		{"extra", map[string]any{"a": 1.0, "zz": true}, "zz", true, "zz: unknown argument"},
		{"min length", map[string]any{"a": 1.0, "name": "b"}, "name", "b", "name: expected a string of at least 2 characters, got 1"},
		{"minimum", map[string]any{"a": 1.0, "count": 0.0}, "count", 0.0, "count: expected a number of at least 1, got the number 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ae := sch.check(tt.args)
			if tt.reason == "" {
				assert.Nil(t, ae)
				return
			}
			require.NotNil(t, ae)
			assert.Equal(t, tt.field, ae.field)
			assert.Equal(t, tt.got, ae.got)
			assert.Contains(t, ae.reason, tt.reason)
			assert.NotContains(t, ae.reason, "validating")
			assert.NotContains(t, ae.reason, "reflect")
			assert.NotContains(t, ae.reason, "000000")
		})
	}

	var nilSchema *schema
	assert.Nil(t, nilSchema.check(map[string]any{"anything": 1}), "no schema, no client-side check")
	unsupported, err := compileSchema(map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"})
	require.Error(t, err)
	assert.Nil(t, unsupported)
}

func TestMCPSchemaDefaults(t *testing.T) {
	sch, err := compileSchema(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "default": "Ada"},
			"n":    map[string]any{"type": "integer", "default": 3},
			"ok":   map[string]any{"type": "boolean"},
		},
	})
	require.NoError(t, err)
	content := map[string]any{"name": "Bob"}
	require.NoError(t, sch.applyDefaults(content))
	assert.Equal(t, map[string]any{"name": "Bob", "n": 3.0}, content)
}

func TestMCPClassify(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	eof := &url.Error{Op: "Post", URL: "http://x", Err: errors.New("EOF")}
	rejected := &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}
	invalid := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "nope"`}
	tests := []struct {
		name    string
		err     error
		code    int64 // 0: no JSON-RPC error
		notSent bool
	}{
		{"server error", fmt.Errorf("calling %q: %w", "tools/call", invalid), jsonrpc.CodeInvalidParams, false},
		{"4xx with body", fmt.Errorf("sending: %w: %w: %v", invalid, rejected, "Bad Request"), jsonrpc.CodeInvalidParams, false},
		{"refused", fmt.Errorf("sending: %w: %w", rejected, dial), 0, true},
		{"eof after write", fmt.Errorf("sending: %w: %w", rejected, eof), 0, false},
		{"503", fmt.Errorf("%w: sending: %v", rejected, "Service Unavailable"), 0, true},
		{"session missing", fmt.Errorf("failed to connect: %w", mcp.ErrSessionMissing), 0, true},
		{"connection closed", fmt.Errorf("%w: calling %q", mcp.ErrConnectionClosed, "tools/call"), 0, false},
		{"stale session answered 400", fmt.Errorf("calling %q: %v", "tools/call", errors.New(`sending "tools/call": Bad Request`)), 0, true},
		{"500 is ambiguous", errors.New(`sending "tools/call": Internal Server Error`), 0, false},
		{"403 is ambiguous", errors.New(`sending "tools/call": Forbidden`), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rpcErr, notSent := classify(tt.err)
			if tt.code == 0 {
				assert.Nil(t, rpcErr)
			} else {
				require.NotNil(t, rpcErr)
				assert.Equal(t, tt.code, rpcErr.Code)
			}
			assert.Equal(t, tt.notSent, notSent)
		})
	}
}

func TestMCPProgressRouter(t *testing.T) {
	var p progressRouter
	p.live = map[string]func(Progress){}
	var mu sync.Mutex
	got := map[string]int{}
	fn := func(name string) func(Progress) {
		return func(Progress) {
			mu.Lock()
			defer mu.Unlock()
			got[name]++
		}
	}
	assert.Empty(t, p.register(nil), "no callback, no token")
	first := p.register(fn("first"))
	p.finish(first)
	p.deliver(first, Progress{Progress: 1})
	assert.Equal(t, 1, got["first"], "late notifications still reach a finished call")
	for i := range keepFinished {
		p.finish(p.register(fn(fmt.Sprint(i))))
	}
	p.deliver(first, Progress{Progress: 2})
	assert.Equal(t, 1, got["first"], "evicted after keepFinished newer calls")
	p.deliver(42, Progress{})
	p.deliver("unknown", Progress{})
}

func TestMCPDecodeArgs(t *testing.T) {
	for _, in := range []string{"", "  ", "null"} {
		m, ae := decodeArgs([]byte(in))
		assert.Nil(t, ae)
		assert.Equal(t, map[string]any{}, m, "%q becomes an empty object, never null", in)
	}
	_, ae := decodeArgs([]byte(`"str"`))
	require.NotNil(t, ae)
	assert.Equal(t, "str", ae.got)
}

func TestMCPElicitModes(t *testing.T) {
	el := &recElicitor{res: &mcp.ElicitResult{Action: "accept"}}
	r := &Registry{ask: &asker{elicitor: el, log: testLogger(t)}, log: testLogger(t)}
	_, err := r.ask.elicit(context.Background(), "s", nil, &mcp.ElicitParams{URL: "https://x/y", ElicitationID: "e1", Message: "open"}, ShapeSession)
	require.NoError(t, err)
	res, err := r.ask.elicit(context.Background(), "s", nil, &mcp.ElicitParams{Message: "form"}, ShapeSession)
	require.NoError(t, err)
	assert.NotNil(t, res.Content, "an accepted form answer has content, so that go-sdk fills in defaults")
	reqs := el.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, ElicitRequest{Server: "s", Mode: "url", Message: "open", URL: "https://x/y", Shape: ShapeSession}, reqs[0])
	assert.Equal(t, "form", reqs[1].Mode)
}

func TestMCPRedactURL(t *testing.T) {
	tests := []struct {
		url, msg, want string
	}{
		{"http://h/mcp?token=abc", `Post "http://h/mcp?token=abc": refused`, `Post "http://h/mcp": refused`},
		{"http://u:pw@h/mcp", `Post "http://u:pw@h/mcp": refused`, `Post "http://h/mcp": refused`},
		{"http://h/mcp", `Post "http://h/mcp": refused`, `Post "http://h/mcp": refused`},
	}
	for _, tt := range tests {
		s := &server{cfg: ServerConfig{URL: tt.url}}
		base := errors.New(tt.msg)
		err := s.safe(fmt.Errorf("connecting: %w", base))
		assert.Equal(t, "connecting: "+tt.want, err.Error())
		assert.ErrorIs(t, err, base)
	}
}

// TestCollidingToolNamesThroughRegistry: server "a" with tool "_b" and server "a_" with tool
// "b" (real MCP servers over HTTP) both reach the catalog under two different, stable names,
// each call reaches its own server, and the collision is logged once. Before, both were
// "a___b" and the second server's tool was invisible.
func TestCollidingToolNamesThroughRegistry(t *testing.T) {
	leakCheck(t)
	serve := func(tool, reply string) string {
		s := mcp.NewServer(&mcp.Implementation{Name: "collide", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: reply}}}, nil
			})
		srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	first, second := serve("_b", "from a"), serve("b", "from a_")
	cfg := []ServerConfig{{Name: "a", URL: first}, {Name: "a_", URL: second}}
	var logs lockedBuffer
	catalog := func(r *Registry) map[string]string {
		out := map[string]string{}
		for _, tool := range r.Tools() {
			res := mustCall(t, r, tool.Name, `{}`)
			assert.Equal(t, "OK", tagOf(t, res), res)
			_, text, _ := strings.Cut(res, "\n")
			out[tool.Name] = strings.TrimSpace(text)
		}
		return out
	}
	r := newRegistry(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	got := catalog(r)
	require.Len(t, got, 2, "both tools are in the catalog: %v", got)
	var replies []string
	for name, out := range got {
		assert.True(t, strings.HasPrefix(name, "a___b_"), "a hashed name: %s", name)
		replies = append(replies, out)
	}
	assert.ElementsMatch(t, []string{"from a", "from a_"}, replies, "each name calls its own server")
	assert.Equal(t, 1, strings.Count(logs.String(), "mcp tool names collide"), logs.String())
	assert.Contains(t, logs.String(), "a/_b, a_/b")

	// A restart (a new registry, the servers in the other order) gives the same names.
	again := newRegistry(t, []ServerConfig{cfg[1], cfg[0]}, Options{})
	assert.Equal(t, got, catalog(again), "the names are stable across restarts")
}
