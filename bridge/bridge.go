// Package bridge translates protocol outcomes into what the LLM reads: tool results that
// start with one tag on their first line (a closed set, DESIGN §5), retry signals and
// refusals (DESIGN §7), and escaped, capped outside text.
//
// Design note: the first line of a tool result is the only place where a tag counts. Text
// from outside (sub-agents, MCP servers) always comes after it and goes through
// [Untrusted], which escapes every line that could pass for a tag, so that a sub-agent
// cannot forge "[COMPLETED]" or "[INPUT_REQUIRED:task_id=…]". Task ids, which also come
// from outside but must appear inside a tag, are percent-encoded outside a safe character
// set ([TaskArg], [TaskIDFromArg]). Error texts from the SDKs never reach the model: errors
// are rendered from what they mean, not from what they say.
package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/baton-dev/baton/subagent"
)

// Tags: the closed set a tool result can start with.
const (
	TagCompleted     = "COMPLETED"
	TagFailed        = "FAILED"
	TagRejected      = "REJECTED"
	TagCanceled      = "CANCELED"
	TagInputRequired = "INPUT_REQUIRED"
	TagAuthRequired  = "AUTH_REQUIRED"
	TagTimeout       = "TIMEOUT"
	TagUnreachable   = "UNREACHABLE"
	TagOK            = "OK"
	TagError         = "ERROR"
	TagRetry         = "RETRY"
	TagAnswered      = "ANSWERED"
	TagDeclined      = "DECLINED"
	// TagRefused: the call was not sent because of a limit of this coordinator
	// ("[REFUSED:max_depth]": nesting too deep, contract §9c).
	TagRefused = "REFUSED"
)

var knownTags = map[string]bool{
	TagCompleted: true, TagFailed: true, TagRejected: true, TagCanceled: true,
	TagInputRequired: true, TagAuthRequired: true, TagTimeout: true, TagUnreachable: true,
	TagOK: true, TagError: true, TagRetry: true, TagAnswered: true, TagDeclined: true, TagRefused: true,
}

// RefusedMaxDepth renders a sub-agent call that was not sent because the run it would
// start would be deeper than maxDepth: "[REFUSED:max_depth]\n…".
func RefusedMaxDepth(agent string, depth, maxDepth int) string {
	return fmt.Sprintf("[%s:max_depth]\nagent %s was not called: this conversation already runs %d levels deep (agents calling agents), "+
		"and a call would start level %d, beyond the %d allowed (server.max_depth). Answer with what you have, without calling sub-agents for it.",
		TagRefused, quote(agent), depth, depth+1, maxDepth)
}

// Tagged renders "[tag]\n" followed by untrusted body text.
func Tagged(tag, body string) string { return "[" + tag + "]\n" + Untrusted(body) }

// MaxToolResultText caps the outside text of one tool result (an MCP result's content, a
// sub-agent's answer and artifacts) as the thread keeps it and the AG-UI client receives it:
// a bound on memory, not on the model's view, which history.max_tool_result_bytes cuts
// much shorter (package history).
const MaxToolResultText = 8 << 20

// OK renders a successful MCP tool result: "[OK]\n<content>", the content capped at
// MaxToolResultText.
func OK(content string) string { return "[" + TagOK + "]\n" + UntrustedN(content, MaxToolResultText) }

// Error renders a tool error reported without a retry request: "[ERROR]\n<message>".
func Error(message string) string { return Tagged(TagError, message) }

// Answered renders the user's answer to ask_user: "[ANSWERED]\n<answer>".
func Answered(answer string) string { return Tagged(TagAnswered, answer) }

// Declined renders a declined ask_user: "[DECLINED]\n<reason>".
func Declined(reason string) string {
	if reason == "" {
		reason = "(the user declined to answer)"
	}
	return Tagged(TagDeclined, reason)
}

// FromA2A renders the outcome of a delegation: "[COMPLETED]\n<text>", "[FAILED]\n<msg>",
// "[REJECTED]\n…", "[CANCELED]\n…", "[INPUT_REQUIRED:task_id=<id>]\n<question>",
// "[AUTH_REQUIRED:task_id=<id>]\n<msg>". A direct message reply is [COMPLETED]. The agent's
// text goes through [Untrusted].
func FromA2A(res *subagent.Result) string {
	if res == nil {
		return "[" + TagFailed + "]\n(the delegation ended without a result)"
	}
	switch res.State {
	case subagent.StateCompleted, subagent.StateMessage:
		out := withBody(TagCompleted, res.Text, "(the agent returned no text)")
		if res.Omitted > 0 {
			// The client got every byte (streamed); the result keeps a bounded part.
			out += fmt.Sprintf("\n… (%d more bytes of artifacts were streamed to the user but not kept here)", res.Omitted)
		}
		return out
	case subagent.StateFailed:
		return withBody(TagFailed, res.Text, "(the agent gave no reason)")
	case subagent.StateRejected:
		return withBody(TagRejected, res.Text, "(the agent gave no reason)")
	case subagent.StateCanceled:
		return withBody(TagCanceled, res.Text, "(the task was canceled)")
	case subagent.StateInputRequired:
		return withBody(TagInputRequired+":"+TaskArg(res.TaskID), res.Text, "(the agent needs more input but did not say what)")
	case subagent.StateAuthRequired:
		return withBody(TagAuthRequired+":"+TaskArg(res.TaskID), res.Text, "(the agent requires authentication)")
	}
	return fmt.Sprintf("[%s]\nthe agent stopped while the task was still %q.", TagFailed, string(res.State))
}

// A2ATag is the tag FromA2A gives a task in state (without its task_id argument).
func A2ATag(state subagent.State) string {
	switch state {
	case subagent.StateCompleted, subagent.StateMessage:
		return TagCompleted
	case subagent.StateRejected:
		return TagRejected
	case subagent.StateCanceled:
		return TagCanceled
	case subagent.StateInputRequired:
		return TagInputRequired
	case subagent.StateAuthRequired:
		return TagAuthRequired
	}
	return TagFailed
}

// A2AErrorTag is the tag (and retry code) FromA2AError gives err.
func A2AErrorTag(err error) (tag, code string) {
	switch {
	case err == nil:
		return TagFailed, ""
	case errors.Is(err, subagent.ErrInvalidTransition):
		return TagRetry, "invalid_transition"
	case errors.Is(err, subagent.ErrAuth):
		return TagAuthRequired, ""
	case errors.Is(err, subagent.ErrCapabilityGap):
		return TagFailed, ""
	case errors.Is(err, subagent.ErrUnreachable):
		return TagUnreachable, ""
	case errors.Is(err, context.DeadlineExceeded):
		return TagTimeout, ""
	case errors.Is(err, context.Canceled):
		return TagCanceled, ""
	}
	return TagFailed, ""
}

func withBody(tag, text, empty string) string {
	if strings.TrimSpace(text) == "" {
		return "[" + tag + "]\n" + empty
	}
	return "[" + tag + "]\n" + UntrustedN(text, MaxToolResultText)
}

// FromA2AError renders an error of subagent.Agent.Send for the model, from what the error means
// (its sentinel), never from its text:
//   - subagent.ErrUnreachable: "[UNREACHABLE]\n…";
//   - subagent.ErrInvalidTransition: [RETRY:invalid_transition] (start a new task instead);
//   - subagent.ErrAuth: "[AUTH_REQUIRED:task_id=<id or none>]\n…";
//   - subagent.ErrCapabilityGap: "[FAILED]\n…" saying it is a capability gap;
//   - context.DeadlineExceeded: [TIMEOUT]; context.Canceled: [CANCELED];
//   - anything else: "[FAILED]\n…" (a protocol error).
//
// validNext lists the tool names the model may call now (for the retry signal).
func FromA2AError(agent string, req subagent.Request, err error, validNext []string) string {
	name := quote(agent)
	taskID := subagent.TaskIDOf(err)
	if taskID == "" {
		taskID = req.TaskID
	}
	switch {
	case err == nil:
		return "[" + TagFailed + "]\n(the delegation ended without a result)"
	case errors.Is(err, subagent.ErrInvalidTransition):
		return Retry(Signal{
			Code:      "invalid_transition",
			Requested: agent,
			Message: fmt.Sprintf("task %q of agent %s cannot be continued: it is finished or unknown. "+
				"To go on, call %s without task_id to start a new task.", req.TaskID, name, name),
			Reason:           "task_not_continuable",
			ValidNextActions: validNext,
		})
	case errors.Is(err, subagent.ErrAuth):
		// A call that was not sent because the user's credentials could not be obtained
		// (token exchange) says why, in Baton's own words.
		var r interface{ Reason() string }
		if errors.As(err, &r) {
			return fmt.Sprintf("[%s:%s]\nagent %s was not called: %s", TagAuthRequired, TaskArg(taskID), name, r.Reason())
		}
		return fmt.Sprintf("[%s:%s]\nagent %s refused the request: it requires authentication or a permission the coordinator does not have.",
			TagAuthRequired, TaskArg(taskID), name)
	case errors.Is(err, subagent.ErrCapabilityGap):
		return fmt.Sprintf("[%s]\nagent %s cannot handle this request (capability gap: it does not support the operation or the content type). Use another agent or tool.",
			TagFailed, name)
	case errors.Is(err, subagent.ErrUnreachable):
		return Unreachable("agent " + name)
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout(taskID, 0)
	case errors.Is(err, context.Canceled):
		return fmt.Sprintf("[%s]\nthe coordinator stopped the delegation to agent %s before it finished.", TagCanceled, name)
	}
	return fmt.Sprintf("[%s]\nthe delegation to agent %s failed: the agent answered with a protocol error. Try again once, or use another agent.",
		TagFailed, name)
}

// Timeout renders "[TIMEOUT:task_id=<id>]\n…": the coordinator's timeout fired and it
// cancelled the task. after <= 0 leaves the duration out.
func Timeout(taskID string, after time.Duration) string {
	within := "in time"
	if after > 0 {
		within = "within " + roundDuration(after).String()
	}
	return fmt.Sprintf("[%s:%s]\nthe agent did not finish %s; the coordinator cancelled it. "+
		"Do not continue this task: start a new one with a narrower request, or try another agent.",
		TagTimeout, TaskArg(taskID), within)
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Unreachable renders "[UNREACHABLE]\n<what> could not be reached…"; what names the peer,
// for example `agent "weather"` or `MCP server "files"`.
func Unreachable(what string) string {
	return fmt.Sprintf("[%s]\n%s could not be reached after the retry budget (network error, rate limit or server error). "+
		"Try again later, or use another agent or tool.", TagUnreachable, oneLine(what))
}

// Caps of the name lists in a retry signal (DESIGN §7).
const (
	MaxValidNextActions = 8
	MaxKnownActions     = 10
)

// Signal is the JSON object of a retry signal or refusal (DESIGN §7). Code, Requested,
// Message and ValidNextActions are always present; the rest depends on the code.
type Signal struct {
	Code             string   `json:"error"`
	Requested        string   `json:"requested"`
	Message          string   `json:"message"`
	ValidNextActions []string `json:"valid_next_actions"`

	KnownActions   []string    `json:"known_actions,omitempty"`
	Reason         string      `json:"reason,omitempty"`
	Details        *Details    `json:"details,omitempty"`
	TimeoutSeconds float64     `json:"timeout_seconds,omitempty"`
	ErrorMessage   string      `json:"error_message,omitempty"`
	AttemptsLeft   *int        `json:"attempts_left,omitempty"`
	Resolution     *Resolution `json:"resolution,omitempty"`
}

// Details names the argument that failed validation.
type Details struct {
	Field string `json:"field"`
	Got   any    `json:"got"`
}

// Resolution tells how a policy refusal can be resolved.
type Resolution struct {
	Type              string  `json:"type"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	ResetsAt          string  `json:"resets_at,omitempty"`
	// Raise names the config key an operator can raise (a spent run budget).
	Raise string `json:"raise,omitempty"`
}

// Retry renders "[RETRY:<code>] {json}" on one line (JSON strings cannot hold a raw line
// break, so nothing inside can start a line). valid_next_actions is [] when empty, never
// null.
func Retry(s Signal) string {
	if s.ValidNextActions == nil {
		s.ValidNextActions = []string{}
	}
	// The model already has the whole tool list: a signal names only what is useful now
	// (DESIGN §7), whatever the caller passed.
	if len(s.ValidNextActions) > MaxValidNextActions {
		s.ValidNextActions = s.ValidNextActions[:MaxValidNextActions]
	}
	if len(s.KnownActions) > MaxKnownActions {
		s.KnownActions = s.KnownActions[:MaxKnownActions]
	}
	raw, err := compactJSON(s)
	if err != nil && s.Details != nil {
		// An argument value that does not encode: show it as text.
		d := *s.Details
		d.Got = fmt.Sprintf("%v", d.Got)
		s.Details = &d
		raw, err = compactJSON(s)
	}
	if err != nil {
		s.Details = nil
		raw, _ = compactJSON(s)
	}
	return "[" + TagRetry + ":" + code(s.Code) + "] " + raw
}

func compactJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// code keeps a retry code to the characters a tag argument may hold.
func code(c string) string {
	var b strings.Builder
	for _, r := range c {
		if isArgSafe(r) && r != ':' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// ParseTag returns the tag of a tool result's first line ("COMPLETED", "INPUT_REQUIRED",
// "RETRY"…), its argument (e.g. "task_id=abc" or the retry code) and whether the line
// starts with a known tag.
func ParseTag(result string) (tag, arg string, ok bool) {
	line, _, _ := strings.Cut(result, "\n")
	if !strings.HasPrefix(line, "[") {
		return "", "", false
	}
	end := strings.IndexByte(line, ']')
	if end < 0 {
		return "", "", false
	}
	tag, arg, _ = strings.Cut(line[1:end], ":")
	if !knownTags[tag] {
		return "", "", false
	}
	return tag, arg, true
}

// TaskArg renders the argument of an INPUT_REQUIRED, AUTH_REQUIRED or TIMEOUT tag:
// "task_id=<id>", "task_id=none" without an id. Characters outside [A-Za-z0-9._~@+=/-]
// are percent-encoded, so that an id from outside cannot close the tag or break the line.
func TaskArg(taskID string) string {
	if taskID == "" {
		return "task_id=none"
	}
	var b strings.Builder
	for i := 0; i < len(taskID); i++ {
		c := taskID[i]
		if c < 0x80 && isArgSafe(rune(c)) && c != ':' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return "task_id=" + b.String()
}

// TaskIDFromArg reverses [TaskArg]: it returns the task id of a tag argument, and false
// when the argument names none.
func TaskIDFromArg(arg string) (string, bool) {
	v, ok := strings.CutPrefix(arg, "task_id=")
	if !ok || v == "" || v == "none" {
		return "", false
	}
	id, err := url.PathUnescape(v)
	if err != nil {
		return "", false
	}
	return id, true
}

func isArgSafe(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' ||
		strings.ContainsRune("._~@+=/-", r)
}

// quote renders a name for a message: quoted, on one line, capped.
func quote(name string) string { return fmt.Sprintf("%q", capRunes(name, 100)) }

// oneLine renders a short outside string on one line.
func oneLine(s string) string {
	return strings.ReplaceAll(normalise(capRunes(s, 200)), "\n", " ")
}

func capRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
