package coordinator

import (
	"time"

	"github.com/baton-dev/baton/internal/config"
)

// The engine's defaults, for a Config field left zero. Each is internal/config's, the one
// place a default is defined: an engine built without a configuration file behaves as the
// default configuration, and a default changed there changes here.
const (
	// DefaultMaxIterations is Limits.MaxIterations' default (limits.max_iterations).
	DefaultMaxIterations = config.DefaultMaxIterations
	// DefaultMaxRunTime is Limits.MaxRunTime's default (limits.max_run_seconds).
	DefaultMaxRunTime = config.DefaultMaxRunSeconds * time.Second
	// DefaultToolTimeout is Limits.ToolTimeout's default (limits.tool_timeout).
	DefaultToolTimeout = time.Duration(config.DefaultToolTimeout)
	// DefaultAgentTimeout is Agent.Timeout's default (agents[].timeout).
	DefaultAgentTimeout = time.Duration(config.DefaultAgentTimeout)
	// DefaultLease is Config.Lease's default (replication.lease).
	DefaultLease = time.Duration(config.DefaultLease)
	// DefaultEventRetention is Config.EventRetention's default (server.event_retention).
	DefaultEventRetention = time.Duration(config.DefaultEventRetention)
	// DefaultReconnectGrace is how long a detached run waits for a reconnect when
	// Config.ReconnectGrace is 0 (server.reconnect_grace).
	DefaultReconnectGrace = time.Duration(config.DefaultReconnectGrace)
	// DefaultStreamBufferBytes is the default bound of the events waiting for one client
	// (server.stream_buffer_bytes).
	DefaultStreamBufferBytes = config.DefaultStreamBufferBytes
	// DefaultMaxEventsPerRun is Config.MaxEventsPerRun's default (server.max_events_per_run).
	DefaultMaxEventsPerRun = config.DefaultMaxEventsPerRun
	// DefaultMaxThreadsPerPrincipal is Config.MaxThreadsPerPrincipal's default
	// (server.max_threads_per_principal).
	DefaultMaxThreadsPerPrincipal = config.DefaultMaxThreadsPerPrincipal
	// DefaultMaxDepth is Config.MaxDepth's default (server.max_depth).
	DefaultMaxDepth = config.DefaultMaxDepth
)

// Values of Config.OnToolError (config mcp_servers[].on_tool_error, DESIGN §6).
const (
	OnToolErrorRetry = config.OnToolErrorRetry // a tool error is [RETRY:tool_error] while the run's budget for the tool lasts (default)
	OnToolErrorFail  = config.OnToolErrorFail  // a tool error is [ERROR]
	OnToolErrorError = config.OnToolErrorError // a tool error ends the run
)
