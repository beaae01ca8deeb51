package a2aserver

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/baton-dev/baton/agui"
)

// Question is one interrupt of a run as the task's caller sees it: the DataPart of an
// input-required status, {interruptId, reason, responseSchema}, with the question's text
// and, for a sign-in, the URL to open.
type Question struct {
	InterruptID      string         `json:"interruptId"`
	Reason           string         `json:"reason"`
	ResponseSchema   map[string]any `json:"responseSchema,omitempty"`
	Message          string         `json:"message,omitempty"`
	ExpiresAt        string         `json:"expiresAt,omitempty"`
	AuthorizationURL string         `json:"authorizationUrl,omitempty"`
	// Server is the downstream server an MCP sign-in is for.
	Server string `json:"server,omitempty"`
	// Agent is the A2A sub-agent a sign-in of Baton's own (a2a:auth_required with an
	// authorization URL: the agent's card declares an OAuth flow) is for.
	Agent string `json:"agent,omitempty"`
}

func questionFrom(in agui.Interrupt) Question {
	q := Question{InterruptID: in.ID, Reason: in.Reason, ResponseSchema: in.ResponseSchema, Message: in.Message, ExpiresAt: in.ExpiresAt}
	if u, ok := in.Metadata["authorizationUrl"].(string); ok {
		q.AuthorizationURL = u
	}
	switch in.Reason {
	case reasonMCPAuthorization:
		q.Server, _ = in.Metadata["server"].(string)
	case reasonA2AAuthRequired:
		if q.AuthorizationURL != "" {
			a2aMD, _ := in.Metadata["a2a"].(map[string]any)
			q.Agent, _ = a2aMD["agent"].(string)
		}
	}
	return q
}

// data is the question as a DataPart's (and the task metadata's) value.
func (q Question) data() map[string]any {
	var m map[string]any
	_ = remarshal(q, &m)
	return m
}

// text is the question for a reader.
func (q Question) text() string {
	t := q.Message
	if t == "" {
		t = "Baton needs an answer (" + q.Reason + ")."
	}
	if q.AuthorizationURL != "" {
		t += " Sign in at " + q.AuthorizationURL + ", then answer."
	}
	return t
}

// takesText reports whether a plain-text answer fits the question: its schema is an
// object whose one required property is the string "text".
func (q Question) takesText() bool {
	props, _ := q.ResponseSchema["properties"].(map[string]any)
	t, _ := props["text"].(map[string]any)
	return t != nil && t["type"] == "string"
}

// ask is the input-required status that puts questions to the caller: their text, one
// DataPart per question, and the questions in the task's metadata for the answer.
func ask(ec *a2asrv.ExecutorContext, threadID, runID string, qs []Question, why string) *a2a.TaskStatusUpdateEvent {
	return askIn(a2a.TaskStateInputRequired, ec, threadID, runID, qs, why)
}

// askIn is ask in state: input-required, or auth-required for questions that only wait
// for sign-ins (signin.go). A sign-in that needs a message to go on (no URL, or no
// SignIns to see it done) stays input-required: a2asrv keeps an auth-required execution
// open and refuses every message to the task meanwhile.
func askIn(state a2a.TaskState, ec *a2asrv.ExecutorContext, threadID, runID string, qs []Question, why string) *a2a.TaskStatusUpdateEvent {
	texts := make([]string, 0, len(qs)+1)
	if why != "" {
		texts = append(texts, why)
	}
	for _, q := range qs {
		texts = append(texts, q.text())
	}
	parts := []*a2a.Part{a2a.NewTextPart(strings.Join(texts, "\n"))}
	for _, q := range qs {
		parts = append(parts, a2a.NewDataPart(q.data()))
	}
	ev := a2a.NewStatusUpdateEvent(ec, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, parts...))
	ev.Metadata = taskMeta(threadID, runID, qs)
	return ev
}

// askAgain keeps a task waiting on the same questions, saying why the answer was refused.
func askAgain(ec *a2asrv.ExecutorContext, qs []Question, why string) *a2a.TaskStatusUpdateEvent {
	threadID, runID := ec.ContextID, ""
	if ec.StoredTask != nil {
		threadID, runID = runOf(ec.StoredTask)
	}
	return ask(ec, threadID, runID, qs, "The answer was not accepted: "+why)
}

// questionsOf returns the questions a task waits on (from its metadata).
func questionsOf(t *a2a.Task) []Question {
	// An auth-required task whose execution is gone (a restart) takes the answer as a
	// message, as an input-required one does.
	if t == nil || (t.Status.State != a2a.TaskStateInputRequired && t.Status.State != a2a.TaskStateAuthRequired) {
		return nil
	}
	m, _ := t.Metadata[metaKey].(map[string]any)
	var qs []Question
	if !remarshal(m[metaInterrupts], &qs) {
		return nil
	}
	return qs
}

// answer turns the caller's message into the resume of the open questions, or says why it
// cannot. A DataPart {interruptId, payload} (or {interruptId, status:"cancelled"})
// answers the question it names; with one open question, a DataPart without interruptId
// is its payload, and plain text answers a question that takes text. The payload is
// validated against the schema by the engine (a mismatch keeps the task waiting).
func answer(open []Question, m *a2a.Message) ([]agui.ResumeEntry, string) {
	byID := make(map[string]Question, len(open))
	for _, q := range open {
		byID[q.InterruptID] = q
	}
	var out []agui.ResumeEntry
	seen := map[string]bool{}
	var loose []map[string]any
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		d, ok := p.Data().(map[string]any)
		if !ok {
			continue
		}
		id, _ := d["interruptId"].(string)
		if id == "" {
			loose = append(loose, d)
			continue
		}
		if _, known := byID[id]; !known {
			return nil, fmt.Sprintf("no open question has interruptId %q", id)
		}
		if seen[id] {
			return nil, fmt.Sprintf("interruptId %q is answered twice", id)
		}
		seen[id] = true
		e := agui.ResumeEntry{InterruptID: id, Status: agui.ResumeResolved}
		if st, _ := d["status"].(string); st == agui.ResumeCancelled {
			e.Status = agui.ResumeCancelled
		} else {
			payload, ok := d["payload"]
			if !ok {
				return nil, fmt.Sprintf("the answer to %q has no payload", id)
			}
			b, err := json.Marshal(payload)
			if err != nil {
				return nil, fmt.Sprintf("the answer to %q is not JSON", id)
			}
			e.Payload = b
		}
		out = append(out, e)
	}
	if len(out) > 0 {
		if len(loose) > 0 {
			return nil, "every DataPart must name its interruptId when one does"
		}
		return out, ""
	}
	if len(open) != 1 {
		return nil, fmt.Sprintf("%d questions are open: answer each with a DataPart {interruptId, payload}", len(open))
	}
	q := open[0]
	switch {
	case len(loose) == 1:
		b, err := json.Marshal(loose[0])
		if err != nil {
			return nil, "the answer is not JSON"
		}
		return []agui.ResumeEntry{{InterruptID: q.InterruptID, Status: agui.ResumeResolved, Payload: b}}, ""
	case len(loose) > 1:
		return nil, "send one DataPart with the answer"
	}
	text := strings.TrimSpace(textOf(m))
	if text == "" {
		return nil, "the message has no answer: send a DataPart matching responseSchema, or text"
	}
	if !q.takesText() {
		return nil, "this question needs a DataPart matching its responseSchema"
	}
	b, _ := json.Marshal(map[string]string{"text": text})
	return []agui.ResumeEntry{{InterruptID: q.InterruptID, Status: agui.ResumeResolved, Payload: b}}, ""
}
