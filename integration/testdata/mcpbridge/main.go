// Command mcpbridge is the floor an MCP agent tool is measured against: the least an MCP
// server in a process of its own can do to hand a tool call to an A2A agent, written
// only with the SDKs. One tool whose handler makes one blocking a2a-go SendMessage to the
// agent and answers with the text of the task's artifacts; go-sdk's streamable HTTP
// handler, stateless as Baton's /mcp is for the protocol version go-sdk's client speaks
// (2026-07-28); no logging, no store, no model. With -stream the handler makes one
// SendStreamingMessage instead (a2a-go's own transport) and reads it to its end, as Baton
// streams its delegations to an agent whose card offers streaming.
//
//	mcpbridge -agent URL [-tool NAME] [-stream]
//
// It reads the agent's card from URL, listens on a free loopback port, prints
// "mcpbridge listening on http://ADDR" (the MCP endpoint is /mcp) and serves until
// SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbridge:", err)
		os.Exit(1)
	}
}

type toolIn struct {
	Prompt string `json:"prompt" jsonschema:"the task for the agent"`
}

func run() error {
	agentURL := flag.String("agent", "", "base URL of the A2A agent (its card is read from there)")
	name := flag.String("tool", "peer", "name of the MCP tool")
	stream := flag.Bool("stream", false, "stream the call to the agent (SendStreamingMessage)")
	flag.Parse()
	if *agentURL == "" {
		return errors.New("-agent is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// The client as Baton builds it for an agent whose card offers JSON-RPC: from the card,
	// without a2a-go's default interceptors, on one http.Client.
	hc := &http.Client{}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, *agentURL)
	if err != nil {
		return fmt.Errorf("reading the agent card: %w", err)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return fmt.Errorf("creating the A2A client: %w", err)
	}
	defer func() { _ = client.Destroy() }()

	s := mcp.NewServer(&mcp.Implementation{Name: "mcpbridge", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: *name, Description: "Sends the prompt to the A2A agent."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in toolIn) (*mcp.CallToolResult, any, error) {
			if *stream {
				return sendStreaming(ctx, client, in.Prompt)
			}
			return send(ctx, client, in.Prompt)
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if _, err := fmt.Printf("mcpbridge listening on http://%s\n", ln.Addr()); err != nil {
		_ = srv.Close()
		<-served
		return err
	}
	<-ctx.Done()
	_ = srv.Close()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// send makes one blocking SendMessage and answers with the text parts of the task's
// artifacts (or of the message the agent answered with); a task that did not complete is
// a tool error.
func send(ctx context.Context, client *a2aclient.Client, prompt string) (*mcp.CallToolResult, any, error) {
	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(prompt)),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sending to the agent: %w", err)
	}
	var text strings.Builder
	isError := false
	switch r := res.(type) {
	case *a2a.Task:
		for _, art := range r.Artifacts {
			appendText(&text, art.Parts)
		}
		isError = r.Status.State != a2a.TaskStateCompleted
	case *a2a.Message:
		appendText(&text, r.Parts)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, IsError: isError}, nil, nil
}

func appendText(b *strings.Builder, parts a2a.ContentParts) {
	for _, p := range parts {
		if t, ok := p.Content.(a2a.Text); ok {
			b.WriteString(string(t))
		}
	}
}

// sendStreaming makes one SendStreamingMessage, reads it to its end and answers with the
// text parts of the artifacts it streamed; a final state other than completed is a tool
// error.
func sendStreaming(ctx context.Context, client *a2aclient.Client, prompt string) (*mcp.CallToolResult, any, error) {
	var text strings.Builder
	state := a2a.TaskStateUnspecified
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(prompt))}
	for ev, err := range client.SendStreamingMessage(ctx, req) {
		if err != nil {
			return nil, nil, fmt.Errorf("streaming from the agent: %w", err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			state = e.Status.State
			for _, art := range e.Artifacts {
				appendText(&text, art.Parts)
			}
		case *a2a.TaskArtifactUpdateEvent:
			appendText(&text, e.Artifact.Parts)
		case *a2a.TaskStatusUpdateEvent:
			state = e.Status.State
		case *a2a.Message:
			appendText(&text, e.Parts)
			state = a2a.TaskStateCompleted
		}
	}
	isError := state != a2a.TaskStateCompleted
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, IsError: isError}, nil, nil
}
