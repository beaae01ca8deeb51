package agui

// ProtocolVersion is the AG-UI protocol version Baton speaks and announces in RUN_STARTED.
const ProtocolVersion = "1.0"

// EventType is the wire "type" string of an event.
type EventType string

// The event types Baton emits. All of them are known to both the 1.0 client and the legacy
// 0.0.59 client, which fails on any type it does not know.
const (
	EventRunStarted         EventType = "RUN_STARTED"
	EventRunFinished        EventType = "RUN_FINISHED"
	EventRunError           EventType = "RUN_ERROR"
	EventStepStarted        EventType = "STEP_STARTED"
	EventStepFinished       EventType = "STEP_FINISHED"
	EventTextMessageStart   EventType = "TEXT_MESSAGE_START"
	EventTextMessageContent EventType = "TEXT_MESSAGE_CONTENT"
	EventTextMessageEnd     EventType = "TEXT_MESSAGE_END"
	EventToolCallStart      EventType = "TOOL_CALL_START"
	EventToolCallArgs       EventType = "TOOL_CALL_ARGS"
	EventToolCallEnd        EventType = "TOOL_CALL_END"
	EventToolCallResult     EventType = "TOOL_CALL_RESULT"
	EventStateSnapshot      EventType = "STATE_SNAPSHOT"
	EventStateDelta         EventType = "STATE_DELTA"
	EventMessagesSnapshot   EventType = "MESSAGES_SNAPSHOT"
	EventActivitySnapshot   EventType = "ACTIVITY_SNAPSHOT"
	EventCustom             EventType = "CUSTOM"
	EventSubagentStarted    EventType = "SUBAGENT_STARTED"
	EventSubagentFinished   EventType = "SUBAGENT_FINISHED"
	EventSubagentError      EventType = "SUBAGENT_ERROR"
)

// knownTypes is the closed set of types this package defines; a legacy stream may carry only
// these.
var knownTypes = map[EventType]bool{
	EventRunStarted: true, EventRunFinished: true, EventRunError: true,
	EventStepStarted: true, EventStepFinished: true,
	EventTextMessageStart: true, EventTextMessageContent: true, EventTextMessageEnd: true,
	EventToolCallStart: true, EventToolCallArgs: true, EventToolCallEnd: true, EventToolCallResult: true,
	EventStateSnapshot: true, EventStateDelta: true, EventMessagesSnapshot: true,
	EventActivitySnapshot: true, EventCustom: true,
	EventSubagentStarted: true, EventSubagentFinished: true, EventSubagentError: true,
}

// Event is any AG-UI event Baton emits. Callers build events as struct literals, for example
// &agui.TextMessageContent{MessageID: "m1", Delta: "hi"}, and never set the wire type: the
// encoder writes it from EventType().
type Event interface {
	EventType() EventType
}

// Base holds the fields every event may carry. It is embedded in every event struct.
type Base struct {
	// Timestamp is Unix milliseconds. The Sequencer stamps it when it is zero.
	Timestamp int64 `json:"timestamp,omitempty"`
	// Metadata is open by key; the key "ag-ui" is reserved by the protocol.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// base gives the Sequencer access to the embedded Base of any event, including events defined
// outside this package that embed Base.
func (b *Base) base() *Base { return b }

type baser interface{ base() *Base }

// Outcome types of RUN_FINISHED.
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeCancelled = "cancelled" // 1.0 only; legacy clients get RUN_ERROR{code:"CANCELLED"}
)

// Outcome types of SUBAGENT_FINISHED.
const (
	SubagentOutcomeSuccess   = "success"
	SubagentOutcomeSuspended = "suspended"
)

// Outcome is RUN_FINISHED.outcome. An absent outcome means success.
type Outcome struct {
	Type       string      `json:"type"` // OutcomeSuccess, OutcomeInterrupt or OutcomeCancelled
	Interrupts []Interrupt `json:"interrupts,omitempty"`
	// PendingToolCallIDs lists frontend tool calls the client must answer (success only).
	// It is never sent to legacy clients.
	PendingToolCallIDs []string `json:"pendingToolCallIds,omitempty"`
}

// Interrupt is one question the run needs answered; the answer arrives in the next run's
// RunAgentInput.Resume.
type Interrupt struct {
	ID             string         `json:"id"`
	Reason         string         `json:"reason"`
	Message        string         `json:"message,omitempty"`
	ToolCallID     string         `json:"toolCallId,omitempty"`
	ResponseSchema map[string]any `json:"responseSchema,omitempty"`
	ExpiresAt      string         `json:"expiresAt,omitempty"` // RFC 3339
	Metadata       map[string]any `json:"metadata,omitempty"`
	SubagentRunID  string         `json:"subagentRunId,omitempty"`
}

// SubagentOutcome is SUBAGENT_FINISHED.outcome.
type SubagentOutcome struct {
	Type         string   `json:"type"` // SubagentOutcomeSuccess or SubagentOutcomeSuspended
	InterruptIDs []string `json:"interruptIds,omitempty"`
}

// RunStarted opens a run. The Sequencer fills ProtocolVersion ("1.0") for 1.0 clients and
// removes it for legacy clients.
type RunStarted struct {
	Base
	ThreadID        string `json:"threadId"`
	RunID           string `json:"runId"`
	ParentRunID     string `json:"parentRunId,omitempty"`
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

// RunFinished ends a run. Prefer Sequencer.Finish, which closes what is still open first.
type RunFinished struct {
	Base
	ThreadID string   `json:"threadId"`
	RunID    string   `json:"runId"`
	Result   any      `json:"result,omitempty"`
	Outcome  *Outcome `json:"outcome,omitempty"`
}

// RunError ends a run with an error. Message is shown to the user.
type RunError struct {
	Base
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
}

// StepStarted opens a named step. Steps are keyed by (SubagentRunID, StepName).
type StepStarted struct {
	Base
	StepName      string `json:"stepName"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// StepFinished closes a step opened by StepStarted.
type StepFinished struct {
	Base
	StepName      string `json:"stepName"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// TextMessageStart opens a streamed text message.
type TextMessageStart struct {
	Base
	MessageID     string `json:"messageId"`
	Role          string `json:"role,omitempty"` // developer|system|assistant|user; default assistant
	Name          string `json:"name,omitempty"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// TextMessageContent appends Delta to an open text message. An empty Delta is sent as "".
type TextMessageContent struct {
	Base
	MessageID     string `json:"messageId"`
	Delta         string `json:"delta"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// TextMessageEnd closes a text message.
type TextMessageEnd struct {
	Base
	MessageID     string `json:"messageId"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// ToolCallStart opens a streamed tool call.
type ToolCallStart struct {
	Base
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
	SubagentRunID   string `json:"subagentRunId,omitempty"`
}

// ToolCallArgs appends a fragment of the JSON arguments to an open tool call.
type ToolCallArgs struct {
	Base
	ToolCallID    string `json:"toolCallId"`
	Delta         string `json:"delta"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// ToolCallEnd closes a tool call.
type ToolCallEnd struct {
	Base
	ToolCallID    string `json:"toolCallId"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// ToolCallResult reports a tool's result as a new tool message; the call need not be open.
type ToolCallResult struct {
	Base
	MessageID     string `json:"messageId"`
	ToolCallID    string `json:"toolCallId"`
	Content       string `json:"content"`
	Role          string `json:"role,omitempty"` // "tool" when set
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// StateSnapshot replaces the shared state. A nil Snapshot is sent as {}.
type StateSnapshot struct {
	Base
	Snapshot any `json:"snapshot"`
}

// StateDelta patches the shared state with an RFC 6902 JSON Patch. A nil Delta is sent as [].
type StateDelta struct {
	Base
	Delta any `json:"delta"`
}

// MessagesSnapshot restates the conversation. A nil Messages is sent as [].
type MessagesSnapshot struct {
	Base
	Messages []Message `json:"messages"`
}

// ActivitySnapshot shows or replaces an activity (for example progress). A nil Content is sent
// as {}.
type ActivitySnapshot struct {
	Base
	MessageID     string         `json:"messageId"`
	ActivityType  string         `json:"activityType"`
	Content       map[string]any `json:"content"`
	Replace       *bool          `json:"replace,omitempty"`
	SubagentRunID string         `json:"subagentRunId,omitempty"`
}

// Custom is an application event. Value is required by the protocol; a nil Value is sent as {}.
type Custom struct {
	Base
	Name          string `json:"name"`
	Value         any    `json:"value"`
	SubagentRunID string `json:"subagentRunId,omitempty"`
}

// SubagentStarted opens a subagent invocation. Its SubagentRunID may not be reused in the run.
type SubagentStarted struct {
	Base
	SubagentRunID       string `json:"subagentRunId"`
	Name                string `json:"name"`
	Description         string `json:"description,omitempty"`
	ParentSubagentRunID string `json:"parentSubagentRunId,omitempty"`
	ParentToolCallID    string `json:"parentToolCallId,omitempty"`
	ParentMessageID     string `json:"parentMessageId,omitempty"`
}

// SubagentFinished closes a subagent invocation that completed or is suspended on interrupts.
type SubagentFinished struct {
	Base
	SubagentRunID string           `json:"subagentRunId"`
	Result        any              `json:"result,omitempty"`
	Outcome       *SubagentOutcome `json:"outcome,omitempty"`
}

// SubagentError closes a subagent invocation that failed. The run itself continues.
type SubagentError struct {
	Base
	SubagentRunID string `json:"subagentRunId"`
	Message       string `json:"message"`
	Code          string `json:"code,omitempty"`
}

// EventType implements Event.
func (*RunStarted) EventType() EventType { return EventRunStarted }

// EventType implements Event.
func (*RunFinished) EventType() EventType { return EventRunFinished }

// EventType implements Event.
func (*RunError) EventType() EventType { return EventRunError }

// EventType implements Event.
func (*StepStarted) EventType() EventType { return EventStepStarted }

// EventType implements Event.
func (*StepFinished) EventType() EventType { return EventStepFinished }

// EventType implements Event.
func (*TextMessageStart) EventType() EventType { return EventTextMessageStart }

// EventType implements Event.
func (*TextMessageContent) EventType() EventType { return EventTextMessageContent }

// EventType implements Event.
func (*TextMessageEnd) EventType() EventType { return EventTextMessageEnd }

// EventType implements Event.
func (*ToolCallStart) EventType() EventType { return EventToolCallStart }

// EventType implements Event.
func (*ToolCallArgs) EventType() EventType { return EventToolCallArgs }

// EventType implements Event.
func (*ToolCallEnd) EventType() EventType { return EventToolCallEnd }

// EventType implements Event.
func (*ToolCallResult) EventType() EventType { return EventToolCallResult }

// EventType implements Event.
func (*StateSnapshot) EventType() EventType { return EventStateSnapshot }

// EventType implements Event.
func (*StateDelta) EventType() EventType { return EventStateDelta }

// EventType implements Event.
func (*MessagesSnapshot) EventType() EventType { return EventMessagesSnapshot }

// EventType implements Event.
func (*ActivitySnapshot) EventType() EventType { return EventActivitySnapshot }

// EventType implements Event.
func (*Custom) EventType() EventType { return EventCustom }

// EventType implements Event.
func (*SubagentStarted) EventType() EventType { return EventSubagentStarted }

// EventType implements Event.
func (*SubagentFinished) EventType() EventType { return EventSubagentFinished }

// EventType implements Event.
func (*SubagentError) EventType() EventType { return EventSubagentError }
