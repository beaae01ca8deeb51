// Command faultmcp is an MCP server with misbehaving tools, for the fault tests of the
// integration package (the coordinator in front of a server that crashes or hangs).
//
//	faultmcp --log FILE stdio
//	faultmcp --log FILE http --listen 127.0.0.1:0
//
// Tools:
//   - echo {text}: answers "echo: <text>" (read-only).
//   - crash_once {}: not idempotent. The first call ever (a marker file next to the log
//     remembers it across restarts) makes the process exit before it answers, as a crash
//     mid-call would; later calls answer "survived".
//   - hang {}: never answers; when the request is cancelled it logs "cancelled hang".
//
// The log file gets one line per event ("start <pid>", "call <tool>", "cancelled hang"), so
// that a test can see what the server went through without reading its protocol stream. In
// http mode the server is stateful (sessions, notifications/cancelled) and prints
// "faultmcp listening on http://ADDR/mcp" to stderr once it accepts connections.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/internal/testutil/mcpcmd"
)

func main() {
	mcpcmd.Command{
		Name:      "faultmcp",
		HTTPUsage: "[--listen ADDR]",
		Server: func(ev *mcpcmd.EventLog) *mcp.Server {
			ev.Add(fmt.Sprintf("start %d", os.Getpid()))
			return newServer(ev)
		},
	}.Main()
}

type echoIn struct {
	Text string `json:"text"`
}

func newServer(ev *mcpcmd.EventLog) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "faultmcp", Version: "0.0.1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			ev.Add("call echo")
			return mcpcmd.Text("echo: " + in.Text), nil, nil
		})
	// envdigest reports a variable of the server's environment by length and digest, so a
	// test can check what reached the child without the value travelling through results.
	mcp.AddTool(s, &mcp.Tool{Name: "envdigest", Description: "Length and SHA-256 prefix of an environment variable.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Text)
			if !ok {
				return mcpcmd.Text("unset"), nil, nil
			}
			sum := sha256.Sum256([]byte(v))
			return mcpcmd.Text(fmt.Sprintf("len=%d sha256=%s", len(v), hex.EncodeToString(sum[:8]))), nil, nil
		})
	marker := ev.Path + ".crashed"
	mcp.AddTool(s, &mcp.Tool{Name: "crash_once", Description: "Crash the server the first time (not idempotent)."},
		func(context.Context, *mcp.CallToolRequest, mcpcmd.Empty) (*mcp.CallToolResult, any, error) {
			ev.Add("call crash_once")
			if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
				_ = os.WriteFile(marker, []byte("x"), 0o600)
				os.Exit(3) // mid-call: the request was received, no answer goes out
			}
			return mcpcmd.Text("survived"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ mcpcmd.Empty) (*mcp.CallToolResult, any, error) {
			ev.Add("call hang")
			<-ctx.Done()
			ev.Add("cancelled hang")
			return nil, nil, ctx.Err()
		})
	return s
}
