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
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faultmcp:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("faultmcp", flag.ContinueOnError)
	logPath := fs.String("log", "", "file that receives one line per event (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logPath == "" || fs.NArg() == 0 {
		return errors.New("usage: faultmcp --log FILE stdio | http [--listen ADDR]")
	}
	ev := &eventLog{path: *logPath}
	ev.add(fmt.Sprintf("start %d", os.Getpid()))
	srv := newServer(ev)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch mode := fs.Arg(0); mode {
	case "stdio":
		err := srv.Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	case "http":
		hfs := flag.NewFlagSet("http", flag.ContinueOnError)
		listen := hfs.String("listen", "127.0.0.1:0", "address to listen on")
		if err := hfs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
		return serveHTTP(ctx, *listen, srv)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
}

func serveHTTP(ctx context.Context, addr string, s *mcp.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "faultmcp listening on http://%s/mcp\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A hanging call keeps its stream open: close instead of waiting for it.
	return hs.Close()
}

type echoIn struct {
	Text string `json:"text"`
}

type emptyIn struct{}

func newServer(ev *eventLog) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "faultmcp", Version: "0.0.1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			ev.add("call echo")
			return text("echo: " + in.Text), nil, nil
		})
	// envdigest reports a variable of the server's environment by length and digest, so a
	// test can check what reached the child without the value travelling through results.
	mcp.AddTool(s, &mcp.Tool{Name: "envdigest", Description: "Length and SHA-256 prefix of an environment variable.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Text)
			if !ok {
				return text("unset"), nil, nil
			}
			sum := sha256.Sum256([]byte(v))
			return text(fmt.Sprintf("len=%d sha256=%s", len(v), hex.EncodeToString(sum[:8]))), nil, nil
		})
	marker := ev.path + ".crashed"
	mcp.AddTool(s, &mcp.Tool{Name: "crash_once", Description: "Crash the server the first time (not idempotent)."},
		func(context.Context, *mcp.CallToolRequest, emptyIn) (*mcp.CallToolResult, any, error) {
			ev.add("call crash_once")
			if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
				_ = os.WriteFile(marker, []byte("x"), 0o600)
				os.Exit(3) // mid-call: the request was received, no answer goes out
			}
			return text("survived"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ emptyIn) (*mcp.CallToolResult, any, error) {
			ev.add("call hang")
			<-ctx.Done()
			ev.add("cancelled hang")
			return nil, nil, ctx.Err()
		})
	return s
}

// eventLog appends lines to a file; each line is written with one write call.
type eventLog struct {
	mu   sync.Mutex
	path string
}

func (l *eventLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultmcp: log:", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}
