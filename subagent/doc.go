// Package subagent is Baton's client side of the A2A protocol: it resolves sub-agents from their
// agent cards (A2A 1.0 over JSON-RPC or HTTP+JSON, or 0.3 over JSON-RPC through the SDK's
// a2av0 compat layer) and delegates messages to them, reporting progress to an [Observer]
// and returning a protocol-neutral [Result].
//
// # Cards
//
// [New] does no I/O: the card is read by [Agent.Start] in the background (with backoff) and
// by the first call, again once it is older than AgentConfig.CardTTL, and again after a
// call ended [ErrUnreachable] (a network or protocol error: the agent may have moved). A
// re-read that fails keeps the previous card. [Agent.Ready] tells whether a card was read.
// Requests go only to the configured origins (URL, CardURL) and AllowedOrigins: card
// interfaces elsewhere are ignored, redirects are followed only within the origin of the
// request, and configured headers are added only for the configured origins. See
// design/agent-cards.md.
//
// # Delegation
//
// [Agent.Send] streams when the card allows it. Otherwise it sends SendMessage asking the
// agent to return at once (ReturnImmediately; blocking:false on the 0.3 wire), so that the
// task id is known while the task runs and a cancel can reach it, and follows the task with
// GetTask, polling with a period that grows while nothing changes (Options.PollInterval up
// to MaxPollInterval). An agent that ignores the flag answers when the task is over, which
// ends the delegation as before. See design/agent-conventions.md.
// Reading stops as soon as the task is terminal or interrupted (input-required,
// auth-required): some SDKs keep the stream open after auth-required, waiting for
// credentials on the same event bus, so waiting for the server to close it would hang.
//
// Only the initial send is retried (429, 5xx and network failures, honouring Retry-After),
// and only while no event of that send has arrived: after that the server has accepted the
// message and a resend could run the work twice. A stream that drops later is resumed with
// SubscribeToTask and, when that is not possible (no active execution, unsupported, or the
// resubscribe budget is spent), with GetTask polling until the task is terminal or
// interrupted.
//
// When the caller's context ends, Send returns its error at once if the task id is known
// (the caller cancels the task with it, see [TaskIDOf]). Until the id is known the initial
// request is kept open for Options.IDGrace: a server may send nothing at all before its
// first event, and a task whose id is never learned cannot be cancelled.
//
// # Text that is neither lost nor duplicated
//
// Resuming means mixing incremental events (artifact chunks with append) with task
// snapshots (the Task that SubscribeToTask yields first, GetTask results). The delegation
// keeps its own view of the task: the parts of every artifact by id and the status message.
// A snapshot is authoritative and replaces the view; incremental events update it. The text
// reported to [Observer.Text] is tracked per source (artifact id, message id) and each
// update reports only what extends the text already reported for that source (prefix
// diff), so a snapshot that repeats known text reports nothing and one that carries text
// missed while disconnected reports exactly that. Missed intermediate status messages are
// recovered from the snapshot's history (agent messages after our own message).
//
// # Status messages are paced
//
// A status message of a task at work is replaced by the next, and an agent may send them
// as fast as it can. Those that come within Options.StatusInterval (default 100 ms) of the
// last one reported replace each other, the latest winning (pace.go); the one held back
// is reported when the interval is over, before any other text of the task, and before
// Send or Follow returns, so the last status before the task's end is never lost and text
// keeps its order. Artifact text and messages are content: never held back.
//
// # Streams and memory
//
// Streams are read by a thin layer over the SDK's transport (design/streams.md): the SDK's
// JSON-RPC transport with its own SSE reader for SendStreamingMessage and SubscribeToTask,
// which starts with a pooled 1 KiB buffer and grows only for large events (bounded at
// 10 MiB each), where the SDK allocates 64 KiB per stream. Every request goes through
// net/http; [NewHTTPTransport] gives the small connection buffers suited to many open
// streams. [Agent.CancelOnce] is one cancel
// attempt without retries, for a caller that paces and retries cancels itself.
//
// # Continuations
//
// A message that continues an input-required task first reads the task (GetTask): an
// unknown or finished task is an [ErrInvalidTransition] without sending anything, and the
// parked status becomes the baseline. Some servers (@a2a-js/sdk) stream the parked task
// first, still input-required; a status equal to the baseline (same status message id) is
// therefore not taken as the answer, and reading goes on until the status moves.
//
// An auth-required task is continued the same way, but a server may keep its execution
// running while it waits for credentials given out of band (a2a-go does) and refuse the new
// message with a generic error: then the task is followed (resubscribe, poll) instead.
package subagent
