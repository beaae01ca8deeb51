package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/agui"
)

// elicitModes are the elicitation modes a calling client declared: for the session or, at
// 2026-07-28, in the request.
type elicitModes struct{ form, url bool }

// modesOf returns the elicitation modes of the client of req. A client that declared the
// capability without modes takes forms (the 2025-06-18 shape).
func modesOf(req *mcp.CallToolRequest) elicitModes {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return elicitModes{}
	}
	e := caps.Elicitation
	return elicitModes{form: e.Form != nil || e.URL == nil, url: e.URL != nil}
}

// Interrupt reasons (DESIGN §9) whose question is a sign-in or another page to open: their
// link is metadata.authorizationUrl, or metadata.mcp.url for a downstream URL elicitation.
const (
	reasonA2AAuth         = "a2a:auth_required"
	reasonMCPAuthorize    = "mcp:authorization"
	reasonMCPURLElicitate = "mcp:url_elicitation"
)

// signInLink returns the page a sign-in question sends the user to; ok is false for any
// other question, and for a link that is not an absolute http(s) URL.
func signInLink(q agui.Interrupt) (link string, ok bool) {
	switch q.Reason {
	case reasonA2AAuth, reasonMCPAuthorize:
		link, _ = q.Metadata["authorizationUrl"].(string)
	case reasonMCPURLElicitate:
		m, _ := q.Metadata["mcp"].(map[string]any)
		link, _ = m["url"].(string)
	default:
		return "", false
	}
	u, err := url.Parse(link)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	return link, true
}

// inputRequests is the result that asks the client the run's questions in go-sdk's
// multi round-trip style (SEP-2322): at 2026-07-28 the client answers by calling again with
// inputResponses and the requestState; go-sdk turns it into elicitation/create for an older
// session and calls the handler again with the answers. Nothing is held in memory between
// the two: the request state names the thread and its questions, and any replica resumes
// it from the store. A sign-in is asked in URL mode when the client takes it (the user
// opens the page, then accepts); any other question as a form. ok is false when a question
// cannot be asked in a mode the client takes.
func inputRequests(threadID string, questions []agui.Interrupt, modes elicitModes) (*mcp.CallToolResult, bool) {
	reqs := mcp.InputRequestMap{}
	state := requestState{ThreadID: threadID}
	for _, q := range questions {
		if link, ok := signInLink(q); ok && modes.url {
			reqs[q.ID] = &mcp.ElicitParams{Mode: "url", Message: questionText(q), URL: link, ElicitationID: q.ID}
			state.Interrupts = append(state.Interrupts, q.ID)
			if _, takesAction := schemaProperty(q.ResponseSchema, "action"); takesAction {
				state.Actions = append(state.Actions, q.ID)
			}
			continue
		}
		schema := formSchema(q.ResponseSchema)
		if schema == nil || !modes.form {
			return nil, false
		}
		reqs[q.ID] = &mcp.ElicitParams{Mode: "form", Message: questionText(q), RequestedSchema: schema}
		state.Interrupts = append(state.Interrupts, q.ID)
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: string(mustJSON(state))}, true
}

// schemaProperty returns the property name of an object schema.
func schemaProperty(schema map[string]any, name string) (any, bool) {
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[name]
	return p, ok
}

// requestState is what a multi round-trip question carries to its answer.
type requestState struct {
	ThreadID   string   `json:"threadId"`
	Interrupts []string `json:"interrupts"`
	// Actions are the questions asked in URL mode whose answer is {"action": "accept"}
	// (an MCP sign-in or URL elicitation downstream); the others' accept carries the
	// form's content ({} for a URL-mode A2A sign-in).
	Actions []string `json:"actions,omitempty"`
}

// answers is the resume of a call that answers questions asked with inputRequests: every
// question is answered (accepted, or cancelled for a decline, a cancel or no answer).
func answers(req *mcp.CallToolRequest) (*agui.RunAgentInput, error) {
	var st requestState
	if err := json.Unmarshal([]byte(req.Params.RequestState), &st); err != nil || !agui.ValidID(st.ThreadID) || len(st.Interrupts) == 0 {
		return nil, invalidParams("the requestState is not one this server gave")
	}
	return resumeInput(st, req.Params.InputResponses), nil
}

// resumeInput is the resume of st's thread with the client's responses to its questions.
func resumeInput(st requestState, responses mcp.InputResponseMap) *agui.RunAgentInput {
	in := &agui.RunAgentInput{ThreadID: st.ThreadID, RunID: newID("mcp-run-"), ProtocolVersion: agui.ProtocolVersion}
	for _, id := range st.Interrupts {
		entry := agui.ResumeEntry{InterruptID: id, Status: agui.ResumeCancelled}
		if res, ok := responses[id].(*mcp.ElicitResult); ok && res.Action == "accept" {
			content := res.Content
			if slices.Contains(st.Actions, id) {
				content = map[string]any{"action": "accept"}
			}
			if content == nil {
				content = map[string]any{}
			}
			entry.Status, entry.Payload = agui.ResumeResolved, mustJSON(content)
		}
		in.Resume = append(in.Resume, entry)
	}
	return in
}

// formSchema is the form an elicitation asks for: the question's responseSchema with the
// top-level properties a form can hold (strings, numbers, booleans, string enums); nil when
// none is left. An approval's optional editedArgs (an object) is left out: the client
// approves or declines the call as the model made it.
func formSchema(schema map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	kept := map[string]any{}
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		switch pm["type"] {
		case "string", "number", "integer", "boolean":
			kept[name] = pm
		}
	}
	if len(kept) == 0 {
		return nil
	}
	out := map[string]any{"type": "object", "properties": kept}
	var required []string
	switch req := schema["required"].(type) {
	case []string:
		required = req
	case []any:
		for _, r := range req {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	var keep []string
	for _, r := range required {
		if _, ok := kept[r]; ok {
			keep = append(keep, r)
		}
	}
	if len(keep) > 0 {
		out["required"] = keep
	}
	return out
}

// questionText is the question of an interrupt as the client shows it.
func questionText(q agui.Interrupt) string {
	if strings.TrimSpace(q.Message) != "" {
		return q.Message
	}
	return fmt.Sprintf("Baton needs an answer (%s).", q.Reason)
}

// askBack is the result of a call whose run waits for answers the client could not be
// asked for: the questions as text, and structuredContent naming the interrupt to answer
// with "resume" (DESIGN §9d).
func askBack(t tool, threadID string, questions []agui.Interrupt) *mcp.CallToolResult {
	var b strings.Builder
	var list []any
	for i, q := range questions {
		id := interruptID(threadID, q.ID)
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(questionText(q))
		example := map[string]any{"prompt": "", "resume": map[string]any{"interruptId": id, "payload": examplePayload(q.ResponseSchema)}}
		ex, _ := json.Marshal(example)
		fmt.Fprintf(&b, "\n\nTo answer, call the tool %q again with %s (the payload must match responseSchema).", t.name, ex)
		item := map[string]any{"interruptId": id, "reason": q.Reason, "message": questionText(q)}
		if q.ResponseSchema != nil {
			item["responseSchema"] = q.ResponseSchema
		}
		if q.ExpiresAt != "" {
			item["expiresAt"] = q.ExpiresAt
		}
		list = append(list, item)
	}
	first, _ := list[0].(map[string]any)
	structured := map[string]any{"status": "input_required", "interrupts": list}
	for k, v := range first {
		structured[k] = v
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}, StructuredContent: structured}
}

// examplePayload is an answer of the right shape for the text of askBack.
func examplePayload(schema map[string]any) any {
	props, _ := schema["properties"].(map[string]any)
	out := map[string]any{}
	for name, p := range props {
		pm, _ := p.(map[string]any)
		switch pm["type"] {
		case "boolean":
			out[name] = true
		case "number", "integer":
			out[name] = 0
		case "string":
			out[name] = "…"
		}
	}
	return out
}
