// Command demo-agent runs one of Baton's demo A2A sub-agents ("travel" or "research"),
// serving A2A 1.0 at /a2a and A2A 0.3 at /a2a/v0 with a union agent card. It is used by the
// demo stack, docker-compose and the integration tests.
//
//	demo-agent --agent research --listen 127.0.0.1:41241
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/baton-dev/baton/internal/demoagent"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("agent", "", `which demo agent to run: "travel" or "research" (required)`)
	listen := fs.String("listen", "127.0.0.1:41250", "address to listen on")
	publicURL := fs.String("public-url", "", "base URL written into the agent card (default http://<listen address>)")
	debug := fs.Bool("debug", false, "log at debug level, including the A2A SDK's own logs")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kind != "travel" && *kind != "research" {
		fmt.Fprintln(stderr, `demo-agent: --agent must be "travel" or "research"`)
		fs.Usage()
		return 2
	}

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	url, done, err := demoagent.Start(ctx, *listen, demoagent.Options{Kind: *kind, BaseURL: *publicURL, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "demo-agent: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "demo-agent %s listening on %s\n", *kind, url)

	if err := <-done; err != nil {
		fmt.Fprintf(stderr, "demo-agent: %v\n", err)
		return 1
	}
	logger.Info("demo-agent stopped", "agent", *kind)
	return 0
}
