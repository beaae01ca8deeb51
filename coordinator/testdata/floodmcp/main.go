// Command floodmcp is an MCP server over streamable HTTP for the coordinator's progress
// benchmarks: it runs in a process of its own, so that the CPU it spends encoding and
// writing its notifications is not counted as the coordinator's.
//
//	floodmcp [-stdin]
//
// It listens on a free loopback port, prints its URL as the first line of its standard
// output, and serves until SIGTERM or SIGINT, or with -stdin until its standard input is
// closed (so that it ends with the benchmark that started it, however that ends).
//
// Tools:
//   - flood {n}: sends n progress notifications (progress 1..n of n, message "step i") as
//     fast as it can, then answers "flooded".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floodmcp:", err)
		os.Exit(1)
	}
}

type floodIn struct {
	N int `json:"n"`
}

func run() error {
	untilStdin := flag.Bool("stdin", false, "serve until the standard input is closed")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "flood", Description: "Sends progress."}, flood)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := fmt.Printf("http://%s\n", ln.Addr()); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *untilStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}
	<-ctx.Done()
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// flood sends in.N progress notifications of the call, as fast as the transport takes them.
func flood(ctx context.Context, req *mcp.CallToolRequest, in floodIn) (*mcp.CallToolResult, any, error) {
	tok := req.Params.GetProgressToken()
	for i := 1; i <= in.N && tok != nil; i++ {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
			Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("step %d", i)}); err != nil {
			return nil, nil, err
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
}
