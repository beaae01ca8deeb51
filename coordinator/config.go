package coordinator

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/mcpclient"
	"github.com/baton-dev/baton/spend"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// Delegate is the A2A client side of one sub-agent, as the engine uses it.
type Delegate interface {
	Send(ctx context.Context, req subagent.Request, obs subagent.Observer) (*subagent.Result, error)
	Cancel(ctx context.Context, taskID string) error
	GetTask(ctx context.Context, taskID string) (*subagent.Result, error)
}

// ToolServer is the MCP side as the engine uses it (implemented by *mcpclient.Registry).
type ToolServer interface {
	Tools() []mcpclient.Tool
	Call(ctx context.Context, name string, args json.RawMessage, opts mcpclient.CallOptions) (mcpclient.Result, error)
	Resume(ctx context.Context, in *mcpclient.InputRequired, responses map[string]*mcp.ElicitResult, opts mcpclient.CallOptions) (mcpclient.Result, error)
	Abandon(ctx context.Context, in *mcpclient.InputRequired) error
}

// A2ASignIn signs users in to A2A agents whose card declares an OAuth 2 authorization-code
// flow (implemented in cmd/coordinator with package a2aauth).
type A2ASignIn interface {
	// Start returns the authorization URL of principal's sign-in to agent (bound to the
	// thread and interrupt that show it) and until when it is accepted; "" when the agent's
	// card declares no flow Baton can use.
	Start(ctx context.Context, principal, agent, threadID, interruptID string) (url string, expires time.Time, err error)
	// Authorize returns ctx carrying principal's credentials for agent when they have
	// signed in to it, else ctx.
	Authorize(ctx context.Context, principal, agent string) context.Context
}

// Metrics receives the engine's operational counters (implemented by package metrics).
type Metrics interface {
	// RunFinished gets the run's typed outcome (EndReason.Outcome), never a reason to parse.
	RunFinished(outcome string)
	// ToolResult gets a result's tag and, for a retry signal, its code.
	ToolResult(tag, code string)
	A2ATaskState(state string)
	Cancellation(result string, d time.Duration)
	InterruptsOpen(delta int)
	Retry(kind string)
}

// Agent is a sub-agent offered to the model as a tool.
type Agent struct {
	// Name is the tool name (already sanitised).
	Name        string
	Description string
	Skills      []subagent.Skill
	// Timeout bounds the active time of one delegation; 0 means 120 s.
	Timeout time.Duration
	// InputRequired is "ask_user" or "model" (config agents[].input_required).
	InputRequired string
	Client        Delegate
}

// Limits are the run limits of the config's limits section.
type Limits struct {
	MaxIterations int
	MaxRunTime    time.Duration
	ToolTimeout   time.Duration
}

// Config configures an Engine.
type Config struct {
	// Model is the model, or an *llm.Chain of it and its fallbacks.
	Model llm.Model
	// Spend prices model calls and keeps the principals' days (policy.principal_budget);
	// nil prices nothing.
	Spend *spend.Meter
	// SystemPrompt is the operator's instructions (llm.system_prompt), appended to
	// Baton's own system prompt; "" adds nothing.
	SystemPrompt string
	Agents       []Agent
	// Tools is optional: nil when no MCP servers are configured.
	Tools ToolServer
	// A2ASignIn is optional: without it an auth-required task's interrupt has no
	// authorization URL, and the user's "done" continues the task.
	A2ASignIn A2ASignIn
	// OnToolError maps an MCP server's name to what a tool error does to the run
	// (OnToolErrorRetry, the default, OnToolErrorFail or OnToolErrorError).
	OnToolError map[string]string
	Limits      Limits
	Logger      *slog.Logger
	// CancelTimeout bounds the downstream cancellation of a run (CancelTask calls); default 5 s.
	CancelTimeout time.Duration
	// CancelHorizon bounds how long a CancelTask that failed is retried in the background
	// before it is logged at warn and counted as abandoned (limits.cancel_horizon);
	// default 2 min.
	CancelHorizon time.Duration
	// CancelPerAgent bounds the CancelTask calls in flight per agent, so that a mass
	// disconnect does not flood it; default 32.
	CancelPerAgent int
	// Metrics is optional.
	Metrics Metrics
	// Store persists suspensions (interrupts); default: an in-memory store.
	Store store.Store
	// Sessions answers in-session MCP elicitations; pass the same value to
	// mcpclient.Options.Elicitor. Default: a fresh one (in-session questions then decline).
	Sessions *SessionElicitor
	// InterruptTTL is how long an interrupt stays open; default 30 min.
	InterruptTTL time.Duration
	// ExpiryInterval is how often expired interrupts are looked for; 0 disables the scan
	// (expired interrupts are then only noticed by a resume).
	ExpiryInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Policy decides what to do about failures (DESIGN §6); default &DefaultPolicy{}.
	Policy failure.Policy
	// Guard is the config's policy section: allow/deny lists, rate limits, budget
	// (DESIGN §7). The zero value allows everything.
	Guard failure.GuardPolicy
	// Tracing reports runs, model calls, tool calls and delegations as spans; the zero
	// value traces nothing.
	Tracing Tracing
	// Approvals lists the calls the user must approve before they are sent (DESIGN §9).
	Approvals ApprovalPolicy
	// Loop sets the loop detector's thresholds and the stall detection; the zero value
	// means the defaults (DefaultLoopSoft, DefaultLoopHard, DefaultStallTurns).
	Loop failure.LoopConfig
	// History bounds what the model is sent of a long thread (the history section and the
	// model's context window, DESIGN §4): tool results cut, older turns compacted. The zero
	// value means history's defaults (history.Options.WithDefaults).
	History history.Options
	// StreamBufferBytes bounds the events held in memory for a run's live client (server.
	// stream_buffer_bytes); a client that falls further behind reads from the event log.
	// 0 means DefaultStreamBufferBytes.
	StreamBufferBytes int
	// MaxEventsPerRun caps a run's events (server.max_events_per_run): beyond it the run's
	// work is cancelled and it ends with RUN_ERROR EVENT_LIMIT. 0 means
	// DefaultMaxEventsPerRun.
	MaxEventsPerRun int
	// MaxThreadsPerPrincipal caps the threads of one principal (server.
	// max_threads_per_principal): a run that would create one more fails with
	// ErrTooManyThreads. 0 means DefaultMaxThreadsPerPrincipal; negative means no cap.
	MaxThreadsPerPrincipal int
	// MaxDepth bounds nesting (server.max_depth): a call to an agent that would start a
	// run deeper than this is refused with [REFUSED:max_depth], and a run started deeper
	// fails with ErrTooDeep. 0 means DefaultMaxDepth.
	MaxDepth int
	// OnDisconnect is what a run does when its client goes away (server.on_disconnect);
	// the zero value is DisconnectCancel. ReconnectGrace is how long a detached run waits
	// for a reconnect (server.reconnect_grace); 0 means DefaultReconnectGrace.
	OnDisconnect   DisconnectPolicy
	ReconnectGrace time.Duration
	// Replica identifies this process in the store's runs table; default a random id, new
	// per process.
	Replica string
	// Lease is how long a run's record holds its thread without a heartbeat (replication.lease);
	// default 10 s. Heartbeat renews the leases of this replica's runs (replication.heartbeat);
	// 0 disables the heartbeat, and the lease is then an hour, so that a long run on a
	// single process never loses its thread.
	Lease     time.Duration
	Heartbeat time.Duration
	// Handoff: runs still active when Shutdown's grace is over are handed to other
	// replicas (server.on_shutdown: handoff) rather than cancelled.
	Handoff bool
	// TakeOverAtStart: at start, take over every run that another replica id left
	// running, whatever its lease (a single process on SQLite: the previous process is
	// dead by definition). Without it only runs whose lease lapsed are taken over.
	TakeOverAtStart bool
	// AdvertiseURL is how other replicas reach this one (replication.advertise_url): it is
	// recorded with an in-session MCP elicitation this replica holds, so that a resume that
	// reaches another replica is forwarded here (design/replica-forwarding.md). Empty: such
	// resumes are not forwarded, and one that lands elsewhere gets a tool error.
	AdvertiseURL string
	// EventRetention is how long a run's event log is kept (server.event_retention);
	// default 24 h. The sweep runs with the heartbeat.
	EventRetention time.Duration
}
