// Package agui is Baton's own server side of the AG-UI 1.0 protocol: the event types, their
// JSON encoding, an SSE writer, a Sequencer that enforces the official client's ordering rules
// on the producer side, and the decoding and validation of RunAgentInput request bodies.
//
// # Encoding
//
// Every event is a plain struct that callers build as a literal; the wire "type" comes from
// EventType() and is always the first key. The official 1.0 client rejects a stream that holds
// a null in an optional field, a fractional timestamp or a missing required field, so the
// encoder is hand-written rather than left to struct tags: optional fields are omitted when
// empty, required "any" fields that are nil are sent as {} (or [] for lists), and strings that
// are required (a delta, a tool result's content) are always present, even when empty. The
// hand-written encoder is also what makes the hot path (TEXT_MESSAGE_CONTENT, TOOL_CALL_ARGS)
// cheap: no reflection and one reused buffer per SSE writer.
//
// # Sequencer
//
// The official client validates every stream with a state machine (verifyEvents) and fails the
// whole run on the first violation, which the user sees as a broken chat. The Sequencer runs
// the same rules before anything is written, so that a bug in Baton is a Go error at the call
// site instead of a dead frontend: a violating event is refused and nothing is sent. It also
// owns the end of the stream: Finish and Fail close whatever is still open (messages, tool
// calls, steps, subagents) before the single terminal event, and it stamps integer millisecond
// timestamps.
//
// # Legacy clients
//
// A RunAgentInput without protocolVersion comes from a pre-1.0 client (@ag-ui/client 0.0.59, as
// pinned by CopilotKit 1.75). That client rejects the "cancelled" outcome and pendingToolCallIds
// outright, so a Sequencer in legacy mode downgrades them: a cancelled run ends with
// RUN_ERROR{code:"CANCELLED"}, pendingToolCallIds is dropped, a bare success outcome is omitted,
// and protocolVersion is not announced in RUN_STARTED.
package agui
