// Package mcpcmd is the command-line shell shared by the integration tests' MCP server
// binaries (integration/testdata/faultmcp, hostilemcp): the --log flag, the stdio and
// http modes, the listening line a test waits for, and the event log file.
//
//	NAME --log FILE stdio
//	NAME --log FILE http [--listen 127.0.0.1:0] [flags of the command]
package mcpcmd

import (
	"context"
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

// ErrUsage is returned for a command line without --log or a mode.
var ErrUsage = errors.New("usage")

// Command describes one server binary.
type Command struct {
	// Name prefixes error messages and the listening line.
	Name string
	// HTTPUsage is the http mode's flags in the usage message ("[--listen ADDR]").
	HTTPUsage string
	// Server builds the MCP server once the log is open.
	Server func(log *EventLog) *mcp.Server
	// HTTP, when set, registers the http mode's own flags on fs and returns how to wrap
	// the server once they are parsed. Without it the stateful streamable handler serves
	// /mcp alone.
	HTTP func(fs *flag.FlagSet) func(s *mcp.Server, log *EventLog) http.Handler
}

// Main runs c on the process's arguments and exits 1 on an error.
func (c Command) Main() {
	if err := c.Run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		os.Exit(1)
	}
}

// Run parses args and serves until SIGINT or SIGTERM.
func (c Command) Run(args []string) error {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	logPath := fs.String("log", "", "file that receives one line per event (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logPath == "" || fs.NArg() == 0 {
		return fmt.Errorf("%w: %s --log FILE stdio | http %s", ErrUsage, c.Name, c.HTTPUsage)
	}
	ev := &EventLog{Path: *logPath, Name: c.Name}
	srv := c.Server(ev)

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
		wrap := c.HTTP
		if wrap == nil {
			wrap = func(*flag.FlagSet) func(*mcp.Server, *EventLog) http.Handler { return serveMCP }
		}
		handler := wrap(hfs)
		if err := hfs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
		return c.serveHTTP(ctx, *listen, handler(srv, ev))
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
}

// serveMCP is the default http handler: the stateful streamable transport on /mcp.
func serveMCP(s *mcp.Server, _ *EventLog) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	return mux
}

func (c Command) serveHTTP(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "%s listening on http://%s/mcp\n", c.Name, ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A hanging call keeps its stream open: close instead of waiting for it.
	return hs.Close()
}

// Empty is the input of a tool without arguments.
type Empty struct{}

// Text is a tool result of one text.
func Text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// EventLog appends lines to a file; each line is written with one write call, so that a
// test reading the file sees whole lines whatever the server is doing.
type EventLog struct {
	// Path is the file.
	Path string
	// Name prefixes the message of a line that could not be written.
	Name string

	mu sync.Mutex
}

// Add appends line; a failure is reported on stderr, not to the caller (a tool's answer
// does not depend on its log).
func (l *EventLog) Add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: log: %v\n", l.Name, err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}
