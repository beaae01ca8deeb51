package agui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
)

// defaultMaxBodyBytes caps a RunAgentInput body when DecodeRunAgentInput gets no limit.
const defaultMaxBodyBytes = 1 << 20

// Error codes of InputError, sent as the "error" member of the JSON error body.
const (
	codeInvalidJSON  = "INVALID_JSON"
	codeInvalidInput = "INVALID_INPUT"
	codeBodyTooLarge = "BODY_TOO_LARGE"
	// codeBodyTimeout: the body did not arrive within the server's body read timeout.
	codeBodyTimeout = "BODY_TIMEOUT"
)

// Message roles.
const (
	RoleDeveloper = "developer"
	RoleSystem    = "system"
	RoleAssistant = "assistant"
	RoleUser      = "user"
	RoleTool      = "tool"
	RoleActivity  = "activity"
	RoleReasoning = "reasoning"
)

// Resume statuses.
const (
	ResumeResolved  = "resolved"
	ResumeCancelled = "cancelled"
)

// RunAgentInput is the body of an AG-UI run request.
type RunAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	State           json.RawMessage `json:"state,omitempty"`
	Messages        []Message       `json:"messages"`
	Tools           []Tool          `json:"tools,omitempty"`
	Context         []ContextItem   `json:"context,omitempty"`
	ForwardedProps  json.RawMessage `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry   `json:"resume,omitempty"`
	// Depth is the run's nesting depth when another Baton started it over A2A (the
	// caller's baton/depth plus one); 0 for a run a user started. Never read from an
	// AG-UI request: only Baton's A2A door sets it.
	Depth int `json:"-"`
	// Budget, when another Baton started the run over A2A and sent its own remaining
	// budget (baton/budget), is what the run may spend at most: the run keeps the
	// smaller of its own budget and this one. Never read from an AG-UI request.
	Budget *CallerBudget `json:"-"`
}

// CallerBudget is a calling Baton's remaining budget; a zero field limits nothing.
type CallerBudget struct {
	Tokens  int64
	CostUSD float64
}

// Legacy reports whether the input comes from a pre-1.0 client: such clients send no
// protocolVersion, and their stream must be downgraded (SequencerOptions.Legacy).
func (in *RunAgentInput) Legacy() bool { return in.ProtocolVersion == "" }

// Message is one message of the conversation history.
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a JSON string or a ContentPart array (an object for activity messages).
	Content       json.RawMessage `json:"content,omitempty"`
	Name          string          `json:"name,omitempty"`
	ToolCalls     []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID    string          `json:"toolCallId,omitempty"`
	Error         string          `json:"error,omitempty"`
	ActivityType  string          `json:"activityType,omitempty"`
	SubagentRunID string          `json:"subagentRunId,omitempty"`
}

// ContentPart is one part of a multimodal message content.
type ContentPart struct {
	Type   string         `json:"type"` // text|image|audio|video|document
	Text   string         `json:"text,omitempty"`
	Source *ContentSource `json:"source,omitempty"`
}

// ContentSource locates the data of a non-text ContentPart.
type ContentSource struct {
	Type     string `json:"type"` // data|url|file
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// StringContent encodes s as a message Content.
func StringContent(s string) json.RawMessage { return appendString(nil, s) }

// Parts returns the content as parts: a string content is one text part; an object content or
// an unparsable one gives nil.
func (m Message) Parts() []ContentPart {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 {
		return nil
	}
	switch c[0] {
	case '"':
		var s string
		if json.Unmarshal(c, &s) != nil {
			return nil
		}
		return []ContentPart{{Type: "text", Text: s}}
	case '[':
		var parts []ContentPart
		if json.Unmarshal(c, &parts) != nil {
			return nil
		}
		return parts
	}
	return nil
}

// Text returns the content as text: a string content as is; for a ContentPart array the text
// parts joined by newlines, with each non-text part described briefly, such as "[image]".
func (m Message) Text() string {
	c := bytes.TrimSpace(m.Content)
	if len(c) > 0 && c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return s
	}
	parts := m.Parts()
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		if p.Type == "text" {
			b.WriteString(p.Text)
			continue
		}
		b.WriteString("[" + p.Type + "]")
	}
	return b.String()
}

// ToolCall is a tool call recorded in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function of a ToolCall and holds its JSON arguments as a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a frontend tool the client offers to the agent.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // JSON Schema
}

// ContextItem is a piece of context the client supplies.
type ContextItem struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one interrupt of the previous run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"` // ResumeResolved or ResumeCancelled
	Payload     json.RawMessage `json:"payload,omitempty"`
	Metadata    map[string]any  `json:"metadata,omitempty"`
}

// InputError is a structured 4xx error for a bad request body, reported before any stream
// starts. Message is safe to show to the client.
type InputError struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *InputError) Error() string { return "agui: " + e.Code + ": " + e.Message }

func invalid(format string, args ...any) *InputError {
	return &InputError{Status: http.StatusBadRequest, Code: codeInvalidInput, Message: fmt.Sprintf(format, args...)}
}

// DecodeRunAgentInput reads and validates a RunAgentInput body of at most maxBytes (0 means
// 1 MiB). Unknown members are ignored, absent lists read as empty and JSON null
// reads as absent. Every error is an *InputError: 413 BODY_TOO_LARGE, 400 INVALID_JSON for a
// body that does not parse, and 400 INVALID_INPUT, naming the field, for everything else.
func DecodeRunAgentInput(r io.Reader, maxBytes int64) (*RunAgentInput, error) {
	if maxBytes <= 0 {
		maxBytes = defaultMaxBodyBytes
	}
	body, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge(mbe.Limit)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &InputError{Status: http.StatusRequestTimeout, Code: codeBodyTimeout, Message: "the request body did not arrive in time"}
		}
		return nil, invalid("the request body could not be read")
	}
	if int64(len(body)) > maxBytes {
		return nil, tooLarge(maxBytes)
	}
	// protocolVersion is decoded through a pointer so that an empty string can be told apart
	// from an absent member.
	var wire struct {
		RunAgentInput
		ProtocolVersion *string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, jsonError(err)
	}
	in := &wire.RunAgentInput
	if wire.ProtocolVersion != nil {
		if *wire.ProtocolVersion == "" {
			return nil, invalid("protocolVersion must be a non-empty string when present")
		}
		in.ProtocolVersion = *wire.ProtocolVersion
	}
	if err := in.validate(); err != nil {
		return nil, err
	}
	return in, nil
}

func tooLarge(limit int64) *InputError {
	return &InputError{
		Status:  http.StatusRequestEntityTooLarge,
		Code:    codeBodyTooLarge,
		Message: fmt.Sprintf("the request body exceeds %d bytes", limit),
	}
}

// jsonError turns an encoding/json error into an InputError that names the offending field.
func jsonError(err error) *InputError {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return &InputError{Status: http.StatusBadRequest, Code: codeInvalidJSON,
			Message: fmt.Sprintf("the request body is not valid JSON (%s at offset %d)", se.Error(), se.Offset)}
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return invalid("the request body must be a JSON object, got %s", te.Value)
		}
		// The decoder embeds RunAgentInput in a wrapper struct; the client knows no such name.
		field := strings.TrimPrefix(te.Field, "RunAgentInput.")
		return invalid("%s must be %s, got %s", field, jsonKind(te.Type), te.Value)
	}
	return &InputError{Status: http.StatusBadRequest, Code: codeInvalidJSON, Message: "the request body is not valid JSON"}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a different type"
}

var knownRoles = map[string]bool{
	RoleDeveloper: true, RoleSystem: true, RoleAssistant: true, RoleUser: true,
	RoleTool: true, RoleActivity: true, RoleReasoning: true,
}

// nullToNil treats a JSON null (or nothing) as absent.
func nullToNil(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	return t
}

func (in *RunAgentInput) validate() *InputError {
	if in.ThreadID == "" {
		return invalid("threadId is required and must be a non-empty string")
	}
	if !ValidID(in.ThreadID) {
		return invalid("threadId must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", maxIDLen)
	}
	if in.RunID == "" {
		return invalid("runId is required and must be a non-empty string")
	}
	if !ValidID(in.RunID) {
		return invalid("runId must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", maxIDLen)
	}
	in.State = nullToNil(in.State)
	in.ForwardedProps = nullToNil(in.ForwardedProps)
	if in.Messages == nil {
		in.Messages = []Message{}
	}
	for i := range in.Messages {
		if err := in.Messages[i].validate(fmt.Sprintf("messages[%d]", i)); err != nil {
			return err
		}
	}
	if err := validateTools(in.Tools); err != nil {
		return err
	}
	for i := range in.Resume {
		e := &in.Resume[i]
		if e.InterruptID == "" {
			return invalid("resume[%d].interruptId is required", i)
		}
		if e.Status != ResumeResolved && e.Status != ResumeCancelled {
			return invalid("resume[%d].status must be %q or %q", i, ResumeResolved, ResumeCancelled)
		}
		e.Payload = nullToNil(e.Payload)
	}
	return nil
}

func (m *Message) validate(at string) *InputError {
	if m.ID == "" {
		return invalid("%s.id is required", at)
	}
	if !knownRoles[m.Role] {
		if m.Role == "" {
			return invalid("%s.role is required", at)
		}
		return invalid("%s.role %q is not one of developer, system, assistant, user, tool, activity, reasoning", at, m.Role)
	}
	m.Content = nullToNil(m.Content)
	if m.Role == RoleTool && m.ToolCallID == "" {
		return invalid("%s.toolCallId is required for a tool message", at)
	}
	for j, tc := range m.ToolCalls {
		if tc.ID == "" {
			return invalid("%s.toolCalls[%d].id is required", at, j)
		}
		if tc.Function.Name == "" {
			return invalid("%s.toolCalls[%d].function.name is required", at, j)
		}
	}
	if m.Content == nil {
		return nil
	}
	switch m.Content[0] {
	case '{':
		if m.Role != RoleActivity {
			return invalid("%s.content must be a string or an array of content parts", at)
		}
	case '"':
		if m.Role == RoleActivity {
			return invalid("%s.content must be an object for an activity message", at)
		}
	case '[':
		if m.Role == RoleActivity {
			return invalid("%s.content must be an object for an activity message", at)
		}
		var parts []ContentPart
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return invalid("%s.content must be a string or an array of content parts", at)
		}
		for k, p := range parts {
			if p.Type == "" {
				return invalid("%s.content[%d].type is required", at, k)
			}
		}
	default:
		return invalid("%s.content must be a string or an array of content parts", at)
	}
	return nil
}

// WriteInputError writes err as a JSON error body {"error": code, "message": msg} with the
// error's status. An error that is not an *InputError is written as a 500 without detail.
func WriteInputError(w http.ResponseWriter, err error) {
	ie, ok := errors.AsType[*InputError](err)
	if !ok || ie == nil {
		ie = &InputError{Status: http.StatusInternalServerError, Code: "INTERNAL_ERROR", Message: "internal error"}
	}
	status := ie.Status
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	body := append([]byte(`{"error":`), appendString(nil, ie.Code)...)
	body = append(body, `,"message":`...)
	body = appendString(body, ie.Message)
	body = append(body, '}', '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
