package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"os/user"
	"path"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/coordinator"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpserver"
	"github.com/baton-dev/baton/runs"
	"github.com/baton-dev/baton/server"
	"github.com/baton-dev/baton/subagent"
)

// mcpServing reports whether Baton serves MCP: mcp_server.enabled, or --mcp-stdio.
func (a *app) mcpServing() bool { return a.cfg.MCPServe.Enabled || a.flags.mcpStdio }

// newMCPServer returns Baton's MCP surface for the principal anon of calls that carry none.
func newMCPServer(cfg *config.Config, port *coordinator.Runs, agents []coordinator.Agent, anon string, log *slog.Logger) (*mcpserver.Server, error) {
	byName := map[string]coordinator.Agent{}
	for _, ag := range agents {
		byName[ag.Name] = ag
	}
	var offered []mcpserver.Agent
	for _, ac := range cfg.Agents {
		if !matchesAny(cfg.MCPServe.Agents, ac.Name) {
			continue
		}
		target := coordinator.ToolName(ac.Name)
		ag := byName[target]
		offered = append(offered, mcpserver.Agent{Name: ac.Name, Target: target, Describe: func() string { return cardDescription(ag) }})
	}
	return mcpserver.New(mcpserver.Config{
		Engine:          mcpEngine{port: port, maxActive: cfg.Server.MaxActiveRuns},
		Name:            cfg.MCPServe.Name,
		Version:         version,
		Agents:          offered,
		CoordinatorTool: cfg.MCPServe.CoordinatorTool,
		MaxPromptBytes:  int(cfg.Server.MaxBodyBytes),
		Anonymous:       anon,
		CancelHorizon:   time.Duration(cfg.Limits.CancelHorizon),
		TaskTTL:         time.Duration(cfg.MCPServe.TaskTTL),
		// A dropped call is a cancel unless server.on_disconnect says detach.
		KeepOnDisconnect: cfg.Server.OnDisconnect == config.OnDisconnectDetach,
		Logger:           log.With("component", "mcp_server"),
	})
}

// matchesAny reports whether name matches one of the patterns (names or path.Match * patterns).
func matchesAny(patterns config.Patterns, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// cardDescription describes an agent tool from the agent's card: its description and its
// skills (outside text, flattened and capped as for the model); "" while the card has not
// been read.
func cardDescription(ag coordinator.Agent) string {
	d, ok := ag.Client.(interface{ Info() (subagent.Info, bool) })
	if !ok {
		return ""
	}
	info, ok := d.Info()
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString(bridge.Flatten(info.Description, bridge.MaxDescription))
	for i, s := range info.Skills {
		if i == 0 {
			b.WriteString(" Skills:")
		}
		fmt.Fprintf(&b, " %s", bridge.Flatten(s.Name, 100))
		if s.Description != "" {
			fmt.Fprintf(&b, " (%s)", bridge.Flatten(s.Description, bridge.MaxDescription))
		}
		b.WriteString(";")
	}
	return bridge.Flatten(b.String(), 4*bridge.MaxDescription)
}

// portRun is a run the port started, as the MCP surface reads it (mcpserver.Run).
type portRun struct{ s *runs.Started }

func (r portRun) NextFrom() (int64, []agui.Event, bool) { return r.s.Stream.NextFrom() }
func (r portRun) Wake() <-chan struct{}                 { return r.s.Stream.Wake() }
func (r portRun) Done() <-chan struct{}                 { return r.s.Done }
func (r portRun) Cancellations() []cancel.Report        { return r.s.Cancellations() }

// mcpEngine is the engine's port (coordinator.Runs) as the MCP surface uses it
// (mcpserver.Engine): the port's refusals become the surface's errors.
type mcpEngine struct {
	port      *coordinator.Runs
	maxActive int
}

func (m mcpEngine) Start(ctx context.Context, in *agui.RunAgentInput, principal string) (mcpserver.Run, error) {
	// Admitted against server.max_active_runs in one step with every other start.
	st, err := m.port.Start(ctx, in, principal, runs.StartOptions{MaxActive: m.maxActive})
	var budget *runs.BudgetExceededError
	switch {
	case err == nil:
		return portRun{st}, nil
	case errors.As(err, &budget):
		return nil, &mcpserver.Refusal{Message: budget.Error()}
	case errors.Is(err, runs.ErrTooDeep):
		return nil, &mcpserver.Refusal{Message: "[REFUSED:max_depth] This call would nest Batons deeper than server.max_depth allows."}
	case errors.Is(err, runs.ErrTooManyThreads):
		return nil, &mcpserver.Refusal{Message: "This caller holds as many threads as server.max_threads_per_principal allows: delete old threads (DELETE /agui/threads/{threadId}) or set server.thread_retention."}
	case errors.Is(err, runs.ErrThreadBusy), errors.Is(err, runs.ErrTooManyRuns):
		return nil, fmt.Errorf("%w: %w", mcpserver.ErrBusy, err)
	case errors.Is(err, runs.ErrForbidden):
		return nil, fmt.Errorf("%w: %w", mcpserver.ErrForbidden, err)
	case errors.Is(err, runs.ErrShuttingDown):
		return nil, fmt.Errorf("%w: %w", mcpserver.ErrShuttingDown, err)
	default:
		return nil, err
	}
}

// Delegate starts a run that the direct model drives: it makes the one call of agent and
// ends with its result (directModel). The run is otherwise the engine's like any other:
// policy, approvals, the closed tag set, durability and confirmed cancellation apply to
// the call as to the model's calls.
func (m mcpEngine) Delegate(ctx context.Context, agent string, in *agui.RunAgentInput, principal string) (mcpserver.Run, error) {
	marked := *in
	marked.Tools = append(append([]agui.Tool(nil), in.Tools...), agui.Tool{
		Name:        delegateTool,
		Description: "Marks a run of one delegation (Baton's MCP agent tools); never called.",
		Parameters:  mustMarshal(map[string]any{"type": "object", delegateKey: agent}),
	})
	return m.Start(ctx, &marked, principal)
}

func (m mcpEngine) Stop(threadID, runID, principal string) error {
	err := m.port.Stop(threadID, runID, principal)
	switch {
	case errors.Is(err, runs.ErrRunFinished):
		return fmt.Errorf("%w: %w", mcpserver.ErrFinished, err)
	case errors.Is(err, runs.ErrRunNotFound):
		return fmt.Errorf("%w: %w", mcpserver.ErrNotFound, err)
	}
	return err
}

// maxRunLogEvents bounds the events RunLog reads of one run.
const maxRunLogEvents = 100_000

// RunLog reads the latest run of principal's thread through the port, for the tasks
// extension: any replica answers, whichever runs (or ran) it. Another principal's thread,
// and a thread without a run, are not found.
func (m mcpEngine) RunLog(ctx context.Context, threadID, principal string) (*mcpserver.RunLog, error) {
	th, err := m.port.Thread(ctx, principal, threadID)
	switch {
	case errors.Is(err, runs.ErrThreadNotFound), errors.Is(err, runs.ErrThreadExpired):
		return nil, fmt.Errorf("%w: %w", mcpserver.ErrNotFound, err)
	case err != nil:
		return nil, err
	case th.LastRunID == "":
		return nil, fmt.Errorf("%w: the thread has no run", mcpserver.ErrNotFound)
	}
	return m.latestLog(ctx, th)
}

// ListedLog reads the log of the latest run of th, a thread ThreadsPage returned for
// principal, without looking th up again: tasks/list reads one page of threads, then one
// log a listed task.
func (m mcpEngine) ListedLog(ctx context.Context, th mcpserver.ThreadInfo, principal string) (*mcpserver.RunLog, error) {
	if th.LastRunID == "" {
		return nil, fmt.Errorf("%w: the thread has no run", mcpserver.ErrNotFound)
	}
	return m.latestLog(ctx, &runs.Thread{ID: th.ID, CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt,
		LastRunID: th.LastRunID, LastRunAt: th.LastRunAt})
}

// latestLog reads the events of th's latest run, a page of the store at a time, up to
// maxRunLogEvents; th was read (and its owner checked) by the caller.
func (m mcpEngine) latestLog(ctx context.Context, th *runs.Thread) (*mcpserver.RunLog, error) {
	out := &mcpserver.RunLog{RunID: th.LastRunID, Started: th.LastRunAt, Updated: th.UpdatedAt}
	var after int64
	for len(out.Events) < maxRunLogEvents {
		page, err := m.port.LatestLog(ctx, th, after)
		if err != nil {
			return nil, err
		}
		for _, ev := range page {
			after = ev.Seq
			if decoded, err := agui.DecodeEvent(ev.Data); err == nil {
				out.Events = append(out.Events, decoded)
			}
		}
		if len(page) < runs.MaxEventsRead {
			break
		}
	}
	return out, nil
}

// Thread looks principal's thread up through the port, for the tasks extension and for a
// resume's check.
func (m mcpEngine) Thread(ctx context.Context, threadID, principal string) (mcpserver.ThreadInfo, error) {
	th, err := m.port.Thread(ctx, principal, threadID)
	if err != nil {
		return mcpserver.ThreadInfo{}, mcpThreadErr(err)
	}
	return mcpserver.ThreadInfo{ID: th.ID, CreatedAt: th.CreatedAt}, nil
}

// ThreadsPage reads a page of principal's threads through the port, for tasks/list: one
// index range of the store from the cursor, whatever the number of threads.
func (m mcpEngine) ThreadsPage(ctx context.Context, principal, prefix string, before *mcpserver.ThreadInfo, limit int) ([]mcpserver.ThreadInfo, error) {
	var after *runs.ThreadCursor
	if before != nil {
		after = &runs.ThreadCursor{CreatedAt: before.CreatedAt, ID: before.ID}
	}
	list, err := m.port.ThreadsPage(ctx, principal, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]mcpserver.ThreadInfo, len(list))
	for i, th := range list {
		out[i] = mcpserver.ThreadInfo{ID: th.ID, CreatedAt: th.CreatedAt, LastRunID: th.LastRunID,
			LastRunAt: th.LastRunAt, UpdatedAt: th.UpdatedAt}
	}
	return out, nil
}

// AwaitRun follows the run through the port (its live queue on the replica that runs it,
// its stored log anywhere) until its terminal event, for tasks/result. The stream counts
// as one of the principal's followers, as any other.
func (m mcpEngine) AwaitRun(ctx context.Context, threadID, runID, principal string) error {
	evs, err := m.port.Events(ctx, principal, threadID, runID, 0, runs.FollowOptions{})
	switch {
	case errors.Is(err, runs.ErrRunNotFound):
		return fmt.Errorf("%w: %w", mcpserver.ErrNotFound, err)
	case errors.Is(err, runs.ErrTooManyFollowers), errors.Is(err, runs.ErrPrincipalFollowers):
		return fmt.Errorf("%w: %w", mcpserver.ErrBusy, err)
	case err != nil:
		return mcpThreadErr(err)
	}
	for _, err := range evs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// mcpThreadErr maps the port's thread errors to the surface's.
func mcpThreadErr(err error) error {
	if errors.Is(err, runs.ErrThreadNotFound) || errors.Is(err, runs.ErrThreadExpired) {
		return fmt.Errorf("%w: %w", mcpserver.ErrNotFound, err)
	}
	return err
}

// delegateTool is the frontend tool whose presence in a run makes directModel drive it;
// its parameters name the agent (delegateKey). A client of /agui that declares it gets the
// same: one call of that agent with its message, through the same guard, policy and
// approvals as a call the model makes (nothing it could not ask the model for).
const (
	delegateTool = "baton_mcp_delegate"
	delegateKey  = "x-baton-delegate"
)

// directModel stands in for the model in runs marked with delegateTool: its first turn
// calls the marked agent with the user's message as the prompt; once the call's result is
// in, it answers with that result and the run ends. Other runs go to next.
type directModel struct{ next llm.Model }

// directChain is directModel over a fallback chain: the engine streams from the chain's links
// one by one, and each of them delegates without the model as the chain would.
type directChain struct {
	directModel
	chain *llm.Chain
}

// Len is the chain's length.
func (m directChain) Len() int { return m.chain.Len() }

// Link describes the chain's i-th model.
func (m directChain) Link(i int) llm.Link { return m.chain.Link(i) }

// At is the chain's i-th model, delegating without the model.
func (m directChain) At(i int) llm.Model { return directModel{next: m.chain.At(i)} }

func (m directModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Delta, error] {
	agent, ok := delegateTarget(req.Tools)
	if !ok {
		return m.next.Stream(ctx, req)
	}
	return func(yield func(llm.Delta, error) bool) {
		user := -1
		for i, msg := range req.Messages {
			if msg.Role == llm.RoleUser {
				user = i
			}
		}
		if user >= 0 {
			for _, msg := range req.Messages[user+1:] {
				if msg.Role == llm.RoleTool {
					if yield(llm.Delta{Text: msg.Content}, nil) {
						yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishStop}}, nil)
					}
					return
				}
			}
		}
		if user < 0 {
			yield(llm.Delta{}, errors.New("mcp delegation: the run has no prompt"))
			return
		}
		args := mustMarshal(map[string]string{"prompt": req.Messages[user].Content})
		var id [8]byte
		_, _ = rand.Read(id[:])
		if yield(llm.Delta{ToolCall: &llm.ToolCallDelta{ID: "call_mcp_" + hex.EncodeToString(id[:]), Name: agent, Arguments: string(args)}}, nil) {
			yield(llm.Delta{Done: &llm.Completion{FinishReason: llm.FinishToolCalls}}, nil)
		}
	}
}

// AnswersLocally reports whether req is a turn of a run marked with delegateTool, which
// directModel answers itself (coordinator.LocalModel): the engine does not journal it.
func (m directModel) AnswersLocally(req *llm.Request) bool {
	_, ok := delegateTarget(req.Tools)
	return ok
}

// delegateTarget returns the agent a run's delegateTool names.
func delegateTarget(tools []llm.Tool) (string, bool) {
	for _, t := range tools {
		if t.Name == delegateTool {
			agent, ok := t.Parameters[delegateKey].(string)
			return agent, ok && agent != ""
		}
	}
	return "", false
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// localPrincipal is the principal of --mcp-stdio: the local user.
func localPrincipal() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "local:" + u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return "local:" + n
	}
	return "local"
}

// mcpHTTP is the MCP handler for server.Config (nil when mcp_server is off).
func (a *app) mcpHTTP() (*mcpserver.Server, error) {
	if !a.cfg.MCPServe.Enabled {
		return nil, nil
	}
	return newMCPServer(a.cfg, a.runs, a.agents, "", a.log)
}

// serveStdio serves MCP over stdin and stdout (--mcp-stdio) until the client closes its
// end or a shutdown signal arrives, then drains as serveUntilSignal does.
func (a *app) serveStdio() int {
	srv, err := newMCPServer(a.cfg, a.runs, a.agents, localPrincipal(), a.log)
	if err != nil {
		fmt.Fprintf(a.stderr, "coordinator: mcp_server: %v\n", err)
		return 2
	}
	a.log.Info("serving MCP over stdio", "version", version, "agents", len(a.agents), "demo", a.demo, "principal", localPrincipal())
	err = srv.Serve(a.ctx, &mcp.StdioTransport{})
	if err != nil && a.ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		a.log.Warn("mcp stdio session ended", "err", err)
	}
	a.draining.Store(true)
	a.stop()
	a.log.Info("shutting down", "active_runs", a.engine.Active())
	a.stopServices()
	a.log.Info("stopped")
	return 0
}

// mcpBodyLimit is /mcp's body cap for the MCP handler (server's own is the same).
func mcpBodyLimit(cfg *config.Config) int64 { return server.MCPBodyLimit(cfg.Server.MaxBodyBytes) }
