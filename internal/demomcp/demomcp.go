// Package demomcp is Baton's demo MCP server (DESIGN §11): four tools that
// show every MCP path through the coordinator.
//
//   - deploy asks the user for the target environment (staging or
//     production) in multi round-trip style: the first call returns an
//     input request, the retried call carries the answer. This works for
//     2026-07-28 clients directly and, through go-sdk's shim, for 2025-11-25
//     clients on stateful sessions (an in-session elicitation/create).
//   - divide returns isError on division by zero.
//   - count_slowly reports progress and stops when the call is cancelled.
//   - delete_release is annotated destructiveHint, so that a coordinator
//     configured with approvals.destructive asks the user first; it only says
//     what it would delete.
//
// The server runs over stdio (RunStdio) or streamable HTTP (Handler, Start),
// where it is stateless (2026-07-28) and propagates request cancellation to
// the tool.
package demomcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names.
const (
	ToolDeploy      = "deploy"
	ToolDivide      = "divide"
	ToolCountSlowly = "count_slowly"
	ToolDelete      = "delete_release"
)

// Environments offered by deploy.
var Environments = []string{"staging", "production"}

// Options configures the demo server. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// OnCancelled, if set, is called when a tool call stops because its
	// request was cancelled (tests use it to observe the cancellation).
	OnCancelled func(tool string)
}

// NewServer returns the demo server with its four tools.
func NewServer(opts Options) *mcp.Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "baton-demo-mcp", Version: "0.1.0"}, &mcp.ServerOptions{
		Logger:       opts.Logger,
		Instructions: "Demo tools of Baton: deploy (asks the user for the environment), divide, count_slowly, delete_release (destructive: a coordinator may ask for approval).",
	})
	d := demo{opts: opts}
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDeploy,
		Description: "Deploy a service (a demo: nothing is deployed). Asks the user which environment to deploy to.",
		InputSchema: mustSchema[DeployIn](func(s *jsonschema.Schema) {
			s.Properties["service"].MinLength = ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Deploy", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, d.deploy)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDivide,
		Description: "Divide a by b. Fails on division by zero.",
		Annotations: &mcp.ToolAnnotations{Title: "Divide", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, d.divide)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolCountSlowly,
		Description: "Count from 1 to `to`, one number every `interval_ms` milliseconds, reporting progress. Stops when cancelled.",
		InputSchema: mustSchema[CountIn](func(s *jsonschema.Schema) {
			to, iv := s.Properties["to"], s.Properties["interval_ms"]
			to.Minimum, to.Maximum, to.Default = ptr(1.0), ptr(1000.0), []byte("5")
			iv.Minimum, iv.Maximum, iv.Default = ptr(0.0), ptr(10000.0), []byte("500")
			s.Required = nil
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Count slowly", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, d.countSlowly)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDelete,
		Description: "Delete a release of a service (a demo: nothing is deleted; it reports what would be).",
		InputSchema: mustSchema[DeleteIn](func(s *jsonschema.Schema) {
			s.Properties["release"].MinLength = ptr(1)
		}),
		Annotations: &mcp.ToolAnnotations{Title: "Delete release", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, d.deleteRelease)
	return s
}

// DeleteIn is the input of delete_release.
type DeleteIn struct {
	Release string `json:"release" jsonschema:"the release to delete, e.g. v1.2.3"`
	Service string `json:"service,omitempty" jsonschema:"the service it belongs to (default: web)"`
}

func (d demo) deleteRelease(_ context.Context, _ *mcp.CallToolRequest, in DeleteIn) (*mcp.CallToolResult, any, error) {
	service := in.Service
	if service == "" {
		service = "web"
	}
	return text(fmt.Sprintf("Would delete release %s of %s: its images, its configuration and its deployment record. (Demo: nothing was deleted.)", in.Release, service)), nil, nil
}

// DeployIn is the input of deploy.
type DeployIn struct {
	Service string `json:"service" jsonschema:"the service to deploy"`
	Version string `json:"version,omitempty" jsonschema:"the version to deploy (default: latest)"`
}

// DivideIn is the input of divide.
type DivideIn struct {
	A float64 `json:"a" jsonschema:"the dividend"`
	B float64 `json:"b" jsonschema:"the divisor"`
}

// DivideOut is the output of divide.
type DivideOut struct {
	Quotient float64 `json:"quotient"`
}

// CountIn is the input of count_slowly.
type CountIn struct {
	To         int `json:"to,omitempty" jsonschema:"count up to this number (1 to 1000)"`
	IntervalMS int `json:"interval_ms,omitempty" jsonschema:"milliseconds between numbers (0 to 10000)"`
}

type demo struct{ opts Options }

// deployState is echoed back by the client with the answer. It carries no
// secret: the retried call repeats the arguments, and the answer is checked.
const deployState = "deploy/v1"

func (d demo) deploy(_ context.Context, req *mcp.CallToolRequest, in DeployIn) (*mcp.CallToolResult, any, error) {
	version := in.Version
	if version == "" {
		version = "latest"
	}
	answer, ok := req.Params.InputResponses["environment"].(*mcp.ElicitResult)
	if !ok || req.Params.RequestState != deployState {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"environment": &mcp.ElicitParams{
				Mode:    "form",
				Message: fmt.Sprintf("Deploy %s (%s) to which environment?", in.Service, version),
				RequestedSchema: &jsonschema.Schema{
					Type: "object",
					Properties: map[string]*jsonschema.Schema{
						"environment": {Type: "string", Title: "Environment", Enum: envEnum()},
					},
					Required: []string{"environment"},
				},
			}},
			RequestState: deployState,
		}, nil, nil
	}
	switch answer.Action {
	case "accept":
		env, _ := answer.Content["environment"].(string)
		if !validEnv(env) {
			return nil, nil, fmt.Errorf("unknown environment %q: choose one of %s", env, strings.Join(Environments, ", "))
		}
		return text(fmt.Sprintf("Deployed %s (%s) to %s. (Demo: nothing was deployed.)", in.Service, version, env)), nil, nil
	default:
		return text(fmt.Sprintf("Deployment of %s was not started: the user chose %q.", in.Service, answer.Action)), nil, nil
	}
}

func (d demo) divide(_ context.Context, _ *mcp.CallToolRequest, in DivideIn) (*mcp.CallToolResult, DivideOut, error) {
	if in.B == 0 {
		return nil, DivideOut{}, errors.New("division by zero")
	}
	return nil, DivideOut{Quotient: in.A / in.B}, nil
}

func (d demo) countSlowly(ctx context.Context, req *mcp.CallToolRequest, in CountIn) (*mcp.CallToolResult, any, error) {
	interval := time.Duration(in.IntervalMS) * time.Millisecond
	tok := req.Params.GetProgressToken()
	t := time.NewTimer(0)
	defer t.Stop()
	for i := 1; i <= in.To; i++ {
		select {
		case <-ctx.Done():
			if d.opts.OnCancelled != nil {
				d.opts.OnCancelled(ToolCountSlowly)
			}
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		if tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok,
				Progress:      float64(i),
				Total:         float64(in.To),
				Message:       fmt.Sprintf("counted %d of %d", i, in.To),
			})
		}
		t.Reset(interval)
	}
	return text(fmt.Sprintf("Counted to %d.", in.To)), nil, nil
}

// Handler serves s over streamable HTTP, stateless (protocol 2026-07-28),
// with request cancellation propagated to the tools.
func Handler(s *mcp.Server, logger *slog.Logger) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       logger,
	})
}

// RunStdio serves the demo server on stdin/stdout until stdin closes or ctx
// is done.
func RunStdio(ctx context.Context, opts Options) error {
	return NewServer(opts).Run(ctx, &mcp.StdioTransport{})
}

// Start serves the demo server over streamable HTTP on addr (host:port;
// port 0 picks a free one) at /mcp, until ctx is done. It returns the
// endpoint URL.
func Start(ctx context.Context, addr string) (string, error) {
	return StartWith(ctx, addr, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, addr string, opts Options) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("demo mcp: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(NewServer(opts), opts.Logger))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}()
	return "http://" + loopbackAddr(ln.Addr()) + "/mcp", nil
}

// loopbackAddr is a's host:port, with an unspecified host (":3902")
// replaced by 127.0.0.1 so that the URL can be dialled.
func loopbackAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func validEnv(env string) bool { return slices.Contains(Environments, env) }

func envEnum() []any {
	out := make([]any, len(Environments))
	for i, e := range Environments {
		out[i] = e
	}
	return out
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func ptr[T any](v T) *T { return &v }

// mustSchema infers the schema of T and lets edit refine it.
func mustSchema[T any](edit func(*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("demomcp: schema of %T: %v", *new(T), err))
	}
	edit(s)
	return s
}
