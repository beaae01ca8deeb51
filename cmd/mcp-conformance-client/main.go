// Command mcp-conformance-client drives Baton's own MCP client layer
// (package mcpclient) for the client scenarios of
// @modelcontextprotocol/conformance:
//
//	npx conformance client --command "/path/to/mcp-conformance-client" --scenario tools_call
//
// The conformance runner appends the scenario server's URL as the last
// argument and names the scenario in MCP_CONFORMANCE_SCENARIO. The client
// connects, lists the tools and (except for "initialize") calls each one,
// accepting every elicitation with the requested schema's defaults. It
// exits non-zero when the server cannot be reached or a call does not end
// in [OK].
//
// The auth/* scenarios run through package signin instead (auth.go): a
// signin.Handler with an in-memory store signs in as a user (the client plays
// the browser: it reads code and state from the authorization server's
// redirect and calls signin.Complete, as Baton's /oauth/callback does), and
// the service handler covers client credentials, workload identity and
// enterprise-managed authorization, with credentials from
// MCP_CONFORMANCE_CONTEXT.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/baton-dev/baton/bridge"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/baton-dev/baton/mcpclient"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcp-conformance-client <server-url>")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	url, scenario := os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var err error
	if strings.HasPrefix(scenario, "auth/") {
		err = runAuth(ctx, url, scenario, os.Getenv("MCP_CONFORMANCE_CONTEXT"), os.Stdout)
	} else {
		err = run(ctx, url, scenario, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcp-conformance-client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, scenario string, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg, err := mcpclient.New(ctx, []mcpclient.ServerConfig{{Name: "conformance", URL: url}},
		mcpclient.Options{Logger: logger, Elicitor: DefaultsElicitor{}, MaxReconnects: 1})
	if err != nil {
		return err
	}
	defer reg.Close()
	st := reg.Status()[0]
	if !st.Connected {
		return fmt.Errorf("not connected: %s", st.LastError)
	}
	tools := reg.Tools()
	fmt.Fprintf(stdout, "scenario %q: %d tools\n", scenario, len(tools))
	if scenario == "initialize" {
		return nil
	}
	var failed []string
	for _, t := range tools {
		args, err := json.Marshal(argsFor(t))
		if err != nil {
			return err
		}
		res, err := reg.Call(ctx, t.Name, args, mcpclient.CallOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", t.ToolName, err)
		}
		out := string(res.Status)
		if res.Status == mcpclient.StatusOK {
			out = bridge.MCPOK(res.Content, res.Note)
		}
		fmt.Fprintf(stdout, "%s -> %s %s\n", t.ToolName, out, res.Detail)
		if res.Status != mcpclient.StatusOK {
			failed = append(failed, t.ToolName)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("calls not OK: %s", strings.Join(failed, ", "))
	}
	return nil
}

// argsFor builds arguments for a tool: known scenario tools get their
// values; otherwise every required property gets its default or a value of
// its type.
func argsFor(t mcpclient.Tool) map[string]any {
	if t.ToolName == "add_numbers" {
		return map[string]any{"a": 2, "b": 3}
	}
	args := map[string]any{}
	props, _ := t.InputSchema["properties"].(map[string]any)
	required, _ := t.InputSchema["required"].([]any)
	for _, r := range required {
		name, _ := r.(string)
		p, _ := props[name].(map[string]any)
		args[name] = sampleValue(p)
	}
	return args
}

func sampleValue(p map[string]any) any {
	if d, ok := p["default"]; ok {
		return d
	}
	if e, ok := p["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	switch p["type"] {
	case "number", "integer":
		return 1
	case "boolean":
		return true
	case "object":
		return map[string]any{}
	case "array":
		return []any{}
	default:
		return "test"
	}
}

// DefaultsElicitor accepts every elicitation. A form answer holds the
// default of every property of the requested schema that has one (SEP-1034:
// a client keeps the schema's defaults).
type DefaultsElicitor struct{}

// Elicit implements mcpclient.Elicitor.
func (DefaultsElicitor) Elicit(_ context.Context, req mcpclient.ElicitRequest) (*mcp.ElicitResult, error) {
	if req.Mode != "form" {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: schemaDefaults(req.Schema)}, nil
}

// schemaDefaults returns the defaults of the top-level properties of a
// schema (as sent by the server, any JSON shape).
func schemaDefaults(schema any) map[string]any {
	out := map[string]any{}
	b, err := json.Marshal(schema)
	if err != nil {
		return out
	}
	var s struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return out
	}
	for name, p := range s.Properties {
		if p.Default != nil {
			out[name] = p.Default
		}
	}
	return out
}
