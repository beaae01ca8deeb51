// Command demo-mcp runs Baton's demo MCP server (tools deploy, divide,
// count_slowly; see internal/demomcp).
//
//	demo-mcp stdio                             # MCP over stdin/stdout
//	demo-mcp http [--listen 127.0.0.1:3902]    # streamable HTTP (stateless) at /mcp
//
// Logs go to stderr; stdout carries only the protocol in stdio mode.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-dev/baton/internal/demomcp"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "demo-mcp:", err)
		os.Exit(1)
	}
}

const usage = "usage: demo-mcp stdio | demo-mcp http [--listen host:port]"

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	opts := demomcp.Options{Logger: logger}

	switch args[0] {
	case "stdio":
		if len(args) > 1 {
			return fmt.Errorf("stdio takes no arguments; %s", usage)
		}
		err := demomcp.RunStdio(ctx, opts)
		if ctx.Err() != nil {
			return nil // stopped by a signal
		}
		return err
	case "http":
		fs := flag.NewFlagSet("http", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", "127.0.0.1:3902", "address to listen on (host:port)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return serveHTTP(ctx, *listen, opts)
	default:
		return fmt.Errorf("unknown mode %q; %s", args[0], usage)
	}
}

// serveHTTP serves until ctx is done, then shuts down gracefully.
func serveHTTP(ctx context.Context, addr string, opts demomcp.Options) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", demomcp.Handler(demomcp.NewServer(opts), opts.Logger))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	opts.Logger.Info("demo MCP server listening", "url", "http://"+ln.Addr().String()+"/mcp")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
