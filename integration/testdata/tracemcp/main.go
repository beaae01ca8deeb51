// Command tracemcp is a stdio MCP server for the tracing tests of the integration package: it
// records the W3C trace context each tools/call request carries in params._meta.
//
//	tracemcp --log FILE
//
// Tools:
//   - echo {text}: answers "echo: <text>".
//
// The log file gets one line per tools/call: the request's _meta.traceparent ("-" when it
// has none).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tracemcp:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tracemcp", flag.ContinueOnError)
	logPath := fs.String("log", "", "file that gets the traceparent of every tools/call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logPath == "" {
		return fmt.Errorf("--log is required")
	}
	var mu sync.Mutex
	record := func(tp string) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(*logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		if tp == "" {
			tp = "-"
		}
		fmt.Fprintln(f, tp)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "tracemcp", Version: "1.0.0"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echoes the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				tp := ""
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
					tp, _ = p.Meta["traceparent"].(string)
				}
				record(tp)
			}
			return next(ctx, method, req)
		}
	})
	return server.Run(context.Background(), &mcp.StdioTransport{})
}
