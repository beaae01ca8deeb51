package web

// Tests of the chat page in headless Chromium against a fake AG-UI endpoint that plays
// scripted streams: what the page shows for each kind of event, and what it sends back
// (history, resume answers typed from the interrupt's responseSchema, aborts).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/baton-dev/baton/web/browsertest"
)

// ev is one AG-UI event of a fake stream.
type ev map[string]any

// fakeAGUI answers POST /agui with a stream chosen by the last user message, or with the
// resume script when the input carries resume answers.
type fakeAGUI struct {
	mu       sync.Mutex
	inputs   []map[string]any
	busyOnce map[string]bool
	gone     chan string // the user text of a held stream whose client went away
}

func newFakeAGUI() *fakeAGUI {
	return &fakeAGUI{busyOnce: map[string]bool{}, gone: make(chan string, 4)}
}

func (f *fakeAGUI) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.inputs...)
}

func (f *fakeAGUI) last(t *testing.T) map[string]any {
	t.Helper()
	all := f.requests()
	require.NotEmpty(t, all)
	return all[len(all)-1]
}

func lastUserText(in map[string]any) string {
	msgs, _ := in["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

func (f *fakeAGUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	f.mu.Unlock()
	text := lastUserText(in)
	thread, _ := in["threadId"].(string)
	run, _ := in["runId"].(string)
	writeJSON := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	_, resume := in["resume"]
	switch {
	case !resume && text == "refuse":
		writeJSON(http.StatusBadRequest, map[string]string{"error": "INVALID_INPUT", "message": "The request was refused."})
		return
	case !resume && text == "auth":
		writeJSON(http.StatusUnauthorized, map[string]string{"error": "UNAUTHORIZED", "message": "A valid bearer token is required."})
		return
	case !resume && text == "busy":
		f.mu.Lock()
		first := !f.busyOnce[run]
		f.busyOnce[run] = true
		f.mu.Unlock()
		if first {
			writeJSON(http.StatusConflict, map[string]string{"error": "THREAD_BUSY", "message": "This thread already has an active run."})
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(e ev) {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	send(ev{"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.0"})
	finish := func(outcome any) {
		e := ev{"type": "RUN_FINISHED", "threadId": thread, "runId": run}
		if outcome != nil {
			e["outcome"] = outcome
		}
		send(e)
	}
	if resume && resumes(in, "int-trip-q") {
		// The travel agent's task continues: its card's sub-agent finishes and the call's
		// result folds the card, as the demo's A2A question does.
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_t", "name": "travel", "parentToolCallId": "call_t"})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "sa-mt2", "role": "assistant", "subagentRunId": "sa-call_t"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "sa-mt2", "delta": "Booked: Lisbon for 12-19 May.", "subagentRunId": "sa-call_t"})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "sa-mt2", "subagentRunId": "sa-call_t"})
		send(ev{"type": "SUBAGENT_FINISHED", "subagentRunId": "sa-call_t", "outcome": map[string]any{"type": "success"}})
		send(ev{"type": "TOOL_CALL_RESULT", "messageId": "tr-t", "toolCallId": "call_t", "role": "tool", "content": "[COMPLETED]\nBooked: Lisbon for 12-19 May."})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "m-trip-done", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-trip-done", "delta": "travel finished: Booked: Lisbon for 12-19 May."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "m-trip-done"})
		finish(map[string]any{"type": "success"})
		return
	}
	if resume {
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "m-resumed-" + run, "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-resumed-" + run, "delta": "Thanks, continuing."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "m-resumed-" + run})
		finish(map[string]any{"type": "success"})
		return
	}
	switch text {
	case "delegate":
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Asking "})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "research."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "m1"})
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_1", "toolCallName": "research", "parentMessageId": "m1"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": `{"prompt":`})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": `"Go generics"}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_1"})
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_1", "name": "research", "parentToolCallId": "call_1"})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "sa-m1", "role": "assistant", "subagentRunId": "sa-call_1"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "sa-m1", "delta": "Reading sources…", "subagentRunId": "sa-call_1"})
		send(ev{"type": "ACTIVITY_SNAPSHOT", "messageId": "progress-call_1", "activityType": "progress", "content": map[string]any{"toolCallId": "call_1", "progress": 2, "total": 5, "message": "chunk"}})
		send(ev{"type": "ACTIVITY_SNAPSHOT", "messageId": "progress-call_1", "activityType": "progress", "content": map[string]any{"toolCallId": "call_1", "progress": 4, "total": 5, "message": "chunk"}})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "sa-m1", "subagentRunId": "sa-call_1"})
		send(ev{"type": "SUBAGENT_FINISHED", "subagentRunId": "sa-call_1", "outcome": map[string]any{"type": "success"}})
		send(ev{"type": "TOOL_CALL_RESULT", "messageId": "tr1", "toolCallId": "call_1", "content": "[COMPLETED]\nGenerics arrived in Go 1.18.", "role": "tool"})
		send(ev{"type": "CUSTOM", "name": "baton.failure", "value": map[string]any{"kind": "transient_provider", "action": "retry", "explanation": "The model is busy; retrying.", "attempt": 1}})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "research answered: Go 1.18."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "m2"})
		finish(map[string]any{"type": "success"})
	case "form":
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_f", "toolCallName": "travel"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_f", "delta": `{"prompt":"trip"}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_f"})
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_f", "name": "travel", "parentToolCallId": "call_f"})
		send(ev{"type": "SUBAGENT_FINISHED", "subagentRunId": "sa-call_f", "outcome": map[string]any{"type": "suspended", "interruptIds": []string{"int-trip"}}})
		finish(map[string]any{"type": "interrupt", "interrupts": []any{
			map[string]any{
				"id": "int-trip", "reason": "input_required", "message": "Tell me about the trip.", "subagentRunId": "sa-call_f",
				"toolCallId": "call_f", "expiresAt": time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339),
				"responseSchema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"city":   map[string]any{"type": "string", "title": "City"},
						"nights": map[string]any{"type": "integer", "minimum": 1, "default": 3},
						"budget": map[string]any{"type": "number", "description": "in euros"},
						"class":  map[string]any{"type": "string", "enum": []string{"economy", "business"}, "default": "economy"},
						"window": map[string]any{"type": "boolean", "default": true},
						"extras": map[string]any{"type": "array", "items": map[string]any{"enum": []string{"wifi", "meal"}}},
						"notes":  map[string]any{"type": "string"},
					},
					"required": []string{"city", "nights"},
				},
				"metadata": map[string]any{"a2a": map[string]any{"agent": "travel", "taskId": "t-1"}},
			},
			map[string]any{
				"id": "int-deploy", "reason": "input_required", "message": "Which environment?",
				"responseSchema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"action": map[string]any{"type": "string", "enum": []string{"accept", "decline", "cancel"}},
						"content": map[string]any{"type": "object",
							"properties": map[string]any{"env": map[string]any{"type": "string", "oneOf": []any{
								map[string]any{"const": "staging", "title": "Staging"},
								map[string]any{"const": "prod", "title": "Production"},
							}}},
							"required": []string{"env"}},
					},
					"required": []string{"action"},
				},
				"metadata": map[string]any{"mcp": map[string]any{"server": "demo", "tool": "deploy", "mode": "form"}},
			},
		}})
	case "approval", "in doubt":
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_a", "toolCallName": "demo__delete_release"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_a", "delta": `{"release":"v1"}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_a"})
		md := map[string]any{"tool": "demo__delete_release", "arguments": map[string]any{"release": "v1"}}
		if text == "in doubt" {
			md["inDoubt"] = true
		}
		finish(map[string]any{"type": "interrupt", "interrupts": []any{
			map[string]any{"id": "int-ap", "reason": "tool_call", "toolCallId": "call_a",
				"message": "Approve the call to demo__delete_release?\nWhat it does: <b>Delete</b> a release.\nArguments: {\"release\":\"v1\"}",
				"responseSchema": map[string]any{"type": "object", "required": []string{"approved"}, "properties": map[string]any{
					"approved": map[string]any{"type": "boolean"},
					"reason":   map[string]any{"type": "string"},
					"editedArgs": map[string]any{"type": "object", "required": []string{"release"}, "properties": map[string]any{
						"release": map[string]any{"type": "string", "minLength": 1},
						"service": map[string]any{"type": "string"},
					}},
				}},
				"metadata": map[string]any{"baton": md},
			},
		}})
	case "trip":
		// The demo's A2A question: a delegation whose sub-agent asks and waits for a
		// free-text answer.
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_t", "toolCallName": "travel"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_t", "delta": `{"prompt":"plan a trip to Lisbon"}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_t"})
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_t", "name": "travel", "parentToolCallId": "call_t"})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "sa-mt", "role": "assistant", "subagentRunId": "sa-call_t"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "sa-mt", "delta": "Looking at flights.", "subagentRunId": "sa-call_t"})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "sa-mt", "subagentRunId": "sa-call_t"})
		send(ev{"type": "SUBAGENT_FINISHED", "subagentRunId": "sa-call_t", "outcome": map[string]any{"type": "suspended", "interruptIds": []string{"int-trip-q"}}})
		send(ev{"type": "CUSTOM", "name": "baton.failure", "value": map[string]any{"kind": "ambiguous_input", "action": "ask_user", "attempt": 1,
			"explanation": `The tool "travel" needs more detail from the user. Your decision is needed to go on.`}})
		finish(map[string]any{"type": "interrupt", "interrupts": []any{
			map[string]any{"id": "int-trip-q", "reason": "input_required", "message": "What dates would you like to travel?", "subagentRunId": "sa-call_t", "toolCallId": "call_t",
				"responseSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}},
				"metadata":       map[string]any{"a2a": map[string]any{"agent": "travel", "taskId": "t-2"}}},
		}})
	case "divide":
		// A tool's error as the demo's divide tool gives it: a retry signal for the model.
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_d", "toolCallName": "demo__divide"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_d", "delta": `{"a":10,"b":0}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_d"})
		send(ev{"type": "TOOL_CALL_RESULT", "messageId": "tr-d", "toolCallId": "call_d", "role": "tool",
			"content": `[RETRY:tool_error] {"error":"tool_error","requested":"demo__divide","message":"The tool reported an error. Fix the cause (arguments, order of calls) and call again, or use another way.","valid_next_actions":["demo__divide","ask_user"],"error_message":"division by zero","attempts_left":2}`})
		send(ev{"type": "CUSTOM", "name": "baton.failure", "value": map[string]any{"kind": "tool_error", "action": "retry", "attempt": 1,
			"explanation": `The tool "demo__divide" reported an error. The model may correct the call (retry 1 of 2).`}})
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_v", "toolCallName": "demo__divide"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_v", "delta": `{"a":"ten","b":2}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_v"})
		send(ev{"type": "TOOL_CALL_RESULT", "messageId": "tr-v", "toolCallId": "call_v", "role": "tool",
			"content": `[RETRY:validation_failed] {"error":"validation_failed","requested":"demo__divide","message":"The arguments do not match the tool's schema.","valid_next_actions":["demo__divide"],"details":{"field":"a","got":"ten"},"attempts_left":0}`})
		finish(map[string]any{"type": "success"})
	case "question":
		finish(map[string]any{"type": "interrupt", "interrupts": []any{
			map[string]any{"id": "int-q", "reason": "input_required", "message": "Which dates?",
				"responseSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}},
		}})
	case "slow":
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_s", "toolCallName": "research"})
		send(ev{"type": "TOOL_CALL_ARGS", "toolCallId": "call_s", "delta": `{"prompt":"slow"}`})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_s"})
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_s", "name": "research", "parentToolCallId": "call_s"})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "sa-ms", "role": "assistant", "subagentRunId": "sa-call_s"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "sa-ms", "delta": "step 1 of 20", "subagentRunId": "sa-call_s"})
		<-r.Context().Done() // held until the page aborts
		f.gone <- text
		return
	case "error":
		send(ev{"type": "RUN_ERROR", "code": "MODEL_UNAVAILABLE", "message": "The language model is unavailable right now."})
	case "handoff":
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "mh", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "mh", "delta": "I cannot finish this."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "mh"})
		send(ev{"type": "CUSTOM", "name": "baton.handoff", "value": map[string]any{"rationale": "No agent can book hotels.", "blockers": []string{"no hotel agent"}, "next_steps": []string{"book it yourself"}}})
		send(ev{"type": "RUN_FINISHED", "threadId": thread, "runId": run, "outcome": map[string]any{"type": "success"}, "result": map[string]any{"handoff": true}})
	case "handed back":
		// Baton's own handoff: no outcome (AG-UI has none for it), the result says why.
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "mhb", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "mhb", "delta": "No agent or tool can do this."})
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "mhb"})
		send(ev{"type": "CUSTOM", "name": "baton.handoff", "value": map[string]any{"rationale": "No agent or tool can do this.", "blockers": []string{}, "next_steps": []string{}}})
		send(ev{"type": "RUN_FINISHED", "threadId": thread, "runId": run, "result": map[string]any{"stopped": "capability_gap", "action": "handoff"}})
	case "cancelled":
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_c", "toolCallName": "research"})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_c"})
		finish(map[string]any{"type": "cancelled"})
	case "wording":
		send(ev{"type": "CUSTOM", "name": "baton.failure", "value": map[string]any{"kind": "ambiguous_input", "action": "narrow_scope", "attempt": 1}})
		send(ev{"type": "CUSTOM", "name": "baton.failure", "value": map[string]any{"kind": "tool_error", "action": "retry", "explanation": "Research reported an error.", "attempt": 2}})
		send(ev{"type": "TOOL_CALL_START", "toolCallId": "call_w", "toolCallName": "travel"})
		send(ev{"type": "TOOL_CALL_END", "toolCallId": "call_w"})
		send(ev{"type": "SUBAGENT_STARTED", "subagentRunId": "sa-call_w", "name": "travel", "parentToolCallId": "call_w"})
		send(ev{"type": "SUBAGENT_ERROR", "subagentRunId": "sa-call_w", "code": "A2A_UNREACHABLE", "message": "The travel agent could not be reached."})
		send(ev{"type": "TOOL_CALL_RESULT", "messageId": "tr-w", "toolCallId": "call_w", "role": "tool",
			"content": "[COMPLETED]\nBooked for 12-19 May.\n\n(continuation of task 3f1c2a9e-0b7d-4c55-9a51-6d2f1e0c8b44: the agent asked \"Which dates?\"; the user answered \"12-19 May\")"})
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "mw", "role": "assistant"})
		for _, d := range []string{"[COMPL", "ETED]\nBooked for 12-19 May.\n", "\n(continuation of task 3f1c2a9e-0b7d-4c55-9a51-6d2f1e0c8b44: ", "the agent asked \"Which dates?\"; the user answered \"12-19 May\")"} {
			send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "mw", "delta": d})
		}
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": "mw"})
		finish(map[string]any{"type": "interrupt", "interrupts": []any{
			map[string]any{"id": "int-odd", "reason": "some_future_reason", "message": "Go on?",
				"responseSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		}})
	case "truncated":
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": "mt", "role": "assistant"})
		send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": "mt", "delta": "half an ans"})
	default:
		id := "m-" + run
		send(ev{"type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant"})
		for _, d := range []string{"You said: ", text, "."} {
			send(ev{"type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": d})
		}
		send(ev{"type": "TEXT_MESSAGE_END", "messageId": id})
		finish(nil)
	}
}

// resumes reports whether the input answers the interrupt id.
func resumes(in map[string]any, id string) bool {
	list, _ := in["resume"].([]any)
	for _, r := range list {
		if m, _ := r.(map[string]any); m["interruptId"] == id {
			return true
		}
	}
	return false
}

// page drives the chat page in one browser tab.
type page struct {
	t    *testing.T
	b    *browsertest.Browser
	url  string
	fake *fakeAGUI
}

// pageSuggestions are the example prompts the test deployment offers.
var pageSuggestions = []string{"plan a trip to Lisbon", "count slowly to 60"}

func startPage(t *testing.T, opts browsertest.Options) *page {
	t.Helper()
	b := browsertest.Start(t, opts)
	fake := newFakeAGUI()
	mux := http.NewServeMux()
	mux.Handle("POST /agui", fake)
	mux.Handle("/", New(Options{Suggestions: func() []string { return pageSuggestions }}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &page{t: t, b: b, url: srv.URL + "/", fake: fake}
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.b.Ctx, actions...))
}

func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.b.Ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(p.t, err, expr)
	return v
}

// load opens a fresh page (a new thread).
func (p *page) load() {
	p.t.Helper()
	p.do(chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS("#input")))
	p.waitIdle(0)
}

// runsEnded is how many runs the page has finished.
func (p *page) runsEnded() int {
	p.t.Helper()
	return eval[int](p, `Number(document.querySelector('#status').dataset.runs)`)
}

// waitIdle waits until the page has ended n runs and none is running.
func (p *page) waitIdle(n int) {
	p.t.Helper()
	_, err := chromedp.Run(p.b.Ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(
		`(() => { const s = document.querySelector('#status'); return s && Number(s.dataset.runs) >= %d && s.dataset.state !== 'running' && s.dataset.state !== 'loading'; })()`, n),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(p.t, err, "page did not become idle after %d runs", n)
}

// send types text into the composer and presses Send, then waits for the run to end.
func (p *page) send(text string) {
	p.t.Helper()
	n := p.runsEnded()
	p.do(chromedp.SendKeys(chromedp.CSS("#input"), text), chromedp.Click(chromedp.CSS("#send")))
	p.waitIdle(n + 1)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : "<missing>"; })()`, sel))
}

func (p *page) attr(sel, name string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? (e.getAttribute(%q) ?? "<none>") : "<missing>"; })()`, sel, name))
}

func (p *page) count(sel string) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	p.b.Screenshot(p.t, filepath.Join(p.t.ArtifactDir(), name+".png"))
}

func TestPage(t *testing.T) {
	p := startPage(t, browsertest.Options{})

	t.Run("the welcome offers the deployment's suggestions", func(t *testing.T) {
		p.t = t
		p.load()
		got := eval[[]string](p, `new Promise((resolve) => {
			const poll = () => {
				const b = [...document.querySelectorAll('.welcome .example')];
				if (b.length) resolve(b.map((x) => x.textContent)); else setTimeout(poll, 20);
			};
			poll();
		})`)
		assert.Equal(t, pageSuggestions, got)
	})

	t.Run("settings open over the header, examples go once the chat starts, the newest message is in view", func(t *testing.T) {
		p.t = t
		p.load()
		waitExamples := `new Promise((resolve) => {
			const poll = () => document.querySelectorAll('.welcome .example').length ? resolve(true) : setTimeout(poll, 20);
			poll();
		})`
		require.True(t, eval[bool](p, waitExamples))
		layout := `JSON.stringify({h: document.querySelector('header.top').getBoundingClientRect().height,
			status: document.querySelector('#status').getBoundingClientRect().toJSON(),
			chats: document.querySelector('#threads').getBoundingClientRect().toJSON(),
			main: document.querySelector('#transcript').getBoundingClientRect().top})`
		before := eval[string](p, layout)
		p.do(chromedp.Click(chromedp.CSS("#settings summary")))
		require.True(t, eval[bool](p, `document.querySelector('#settings').open`))
		assert.True(t, eval[bool](p, `(() => { const r = document.querySelector('#token').getBoundingClientRect(); return r.width > 0 && r.height > 0; })()`), "the token field shows")
		assert.Equal(t, before, eval[string](p, layout), "opening Settings does not move the header or the transcript")
		p.screenshot("settings-open")
		p.do(chromedp.Click(chromedp.CSS("#settings summary")))

		// A long conversation scrolled to its top: the message sent is brought into view.
		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const d = document.createElement('div'); d.className = 'filler'; d.style.height = '4000px'; document.querySelector('#transcript').appendChild(d); window.scrollTo(0, 0); })()`))
		p.send("hello")
		assert.Equal(t, 0, p.count(".welcome"), "the examples are gone once the chat has started")
		inView := `(() => { const all = document.querySelectorAll('#transcript .msg'); const r = all[all.length - 1].getBoundingClientRect(); return r.bottom <= window.innerHeight + 1 && r.top >= 0; })()`
		assert.True(t, eval[bool](p, inView), "the newest message is scrolled into view")
		assert.Equal(t, "You said: hello.", p.text(".msg.assistant .msg-text"))
		p.screenshot("newest-in-view")
	})

	t.Run("streams text and sends the history", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("hello")
		assert.Equal(t, "You said: hello.", p.text(".msg.assistant .msg-text"))
		p.send("again")
		in := p.fake.last(t)
		assert.Equal(t, "1.0", in["protocolVersion"])
		msgs, _ := in["messages"].([]any)
		require.Len(t, msgs, 3)
		roles := []any{}
		for _, m := range msgs {
			roles = append(roles, m.(map[string]any)["role"])
		}
		assert.Equal(t, []any{"user", "assistant", "user"}, roles)
		assert.Equal(t, "You said: hello.", msgs[1].(map[string]any)["content"])
		assert.Equal(t, p.fake.requests()[len(p.fake.requests())-2]["threadId"], in["threadId"], "one thread")
		assert.NotEqual(t, p.fake.requests()[len(p.fake.requests())-2]["runId"], in["runId"], "a run id per run")
	})

	t.Run("tool calls, sub-agents, progress and failures", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("delegate")
		card := `.tool[data-tool-call-id="call_1"]`
		assert.Equal(t, "research", p.attr(card, "data-name"))
		assert.Equal(t, "COMPLETED", p.text(card+" .badge"))
		assert.Equal(t, "<none>", p.attr(card, "open"), "a completed call folds away")
		assert.Contains(t, p.text(card+" .args"), `"prompt": "Go generics"`)
		assert.Equal(t, "[COMPLETED]\nGenerics arrived in Go 1.18.", p.text(card+" .result-text"))
		sub := card + ` .subagent[data-subagent-run-id="sa-call_1"]`
		assert.Equal(t, "research", p.text(sub+" .who"), "sub-agent activity is attributed to the sub-agent")
		assert.Equal(t, "Reading sources…", p.text(sub+" .sub-msg"))
		assert.Equal(t, "finished", p.attr(sub, "data-state"))
		assert.Equal(t, "4", p.attr(card+" .activity progress", "value"))
		assert.Equal(t, "5", p.attr(card+" .activity progress", "max"))
		assert.Equal(t, 1, p.count(card+" .activity"), "a snapshot replaces the previous one")
		assert.Equal(t, "The model is busy; retrying. Trying again.", p.text(".notice.failure"))
		assert.Equal(t, "transient_provider", p.attr(".notice.failure", "data-kind"))
		assert.Equal(t, "Asking research.", p.text(`.msg.assistant[data-message-id="m1"]`))
		assert.Equal(t, 2, p.count(".msg.assistant"), "sub-agent text is not an assistant bubble")

		p.send("hello")
		msgs, _ := p.fake.last(t)["messages"].([]any)
		require.Len(t, msgs, 5, "user, assistant with the tool call, tool result, assistant, user")
		asst := msgs[1].(map[string]any)
		assert.Equal(t, "Asking research.", asst["content"])
		calls, _ := asst["toolCalls"].([]any)
		require.Len(t, calls, 1)
		call := calls[0].(map[string]any)
		assert.Equal(t, "call_1", call["id"])
		assert.Equal(t, map[string]any{"name": "research", "arguments": `{"prompt":"Go generics"}`}, call["function"])
		tool := msgs[2].(map[string]any)
		assert.Equal(t, map[string]any{"id": "tr1", "role": "tool", "toolCallId": "call_1", "content": "[COMPLETED]\nGenerics arrived in Go 1.18."}, tool)
		assert.Equal(t, "research answered: Go 1.18.", msgs[3].(map[string]any)["content"])
		p.screenshot("delegation")
	})

	t.Run("interrupt forms are generated from the schema and answered with resume", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("form")
		trip := `.interrupt[data-interrupt-id="int-trip"]`
		deploy := `.interrupt[data-interrupt-id="int-deploy"]`
		assert.Equal(t, "input", p.attr("#status", "data-state"))
		assert.Equal(t, "travel", p.text(trip+" .who"), "the question is attributed to the sub-agent")
		assert.Equal(t, "MCP server demo", p.text(deploy+" .who"), "an MCP question names its server")
		assert.Equal(t, "Tell me about the trip.", p.text(trip+" .question"))
		assert.Equal(t, "waiting for input", p.text(`.subagent[data-subagent-run-id="sa-call_f"] .sub-state`))
		assert.Equal(t, "waiting", p.attr(`.tool[data-tool-call-id="call_f"]`, "data-state"))
		assert.Equal(t, "waiting for you", p.text(`.tool[data-tool-call-id="call_f"] .badge`))
		assert.True(t, eval[bool](p, `document.querySelector('#input').disabled`), "the composer waits for the answers")
		// Defaults are filled in.
		assert.Equal(t, "3", eval[string](p, `document.querySelector('`+trip+` [data-path="nights"] input').value`))
		assert.True(t, eval[bool](p, `document.querySelector('`+trip+` [data-path="window"] input').checked`))
		assert.Equal(t, "economy", eval[string](p, `document.querySelector('`+trip+` [data-path="class"] select').selectedOptions[0].textContent`))
		assert.Equal(t, "City *", p.text(trip+` [data-path="city"] label`), "required fields are marked")
		p.screenshot("interrupt-forms")

		// A required field left empty is refused without sending anything.
		before := len(p.fake.requests())
		p.do(chromedp.Click(chromedp.CSS(trip + " button.primary")))
		assert.Equal(t, "City: a value is required", p.text(trip+" .form-error"))
		assert.Equal(t, "open", p.attr(trip, "data-state"))

		p.do(
			chromedp.SendKeys(chromedp.CSS(trip+` [data-path="city"] input`), "Lisbon"),
			chromedp.SetValue(chromedp.CSS(trip+` [data-path="nights"] input`), "5"),
			chromedp.SendKeys(chromedp.CSS(trip+` [data-path="budget"] input`), "1250.5"),
			chromedp.SetValue(chromedp.CSS(trip+` [data-path="class"] select`), "1"),
			chromedp.Click(chromedp.CSS(trip+` [data-path="window"] input`)),
			chromedp.Click(chromedp.CSS(trip+` [data-path="extras"] input[value="1"]`)),
			chromedp.Click(chromedp.CSS(trip+" button.primary")),
		)
		assert.Equal(t, "answered", p.attr(trip, "data-state"))
		assert.Len(t, p.fake.requests(), before, "nothing is sent until every interrupt is answered")

		// The elicitation-shaped schema gets Accept/Decline buttons; Accept validates content.
		p.do(chromedp.Click(chromedp.CSS(deploy + ` button[data-action="accept"]`)))
		assert.Equal(t, "Env: choose a value", p.text(deploy+" .form-error"))
		n := p.runsEnded()
		p.do(
			chromedp.SetValue(chromedp.CSS(deploy+` [data-path="content.env"] select`), "1"),
			chromedp.Click(chromedp.CSS(deploy+` button[data-action="accept"]`)),
		)
		p.waitIdle(n + 1)
		in := p.fake.last(t)
		assert.Equal(t, []any{
			map[string]any{"interruptId": "int-trip", "status": "resolved", "payload": map[string]any{
				"city": "Lisbon", "nights": float64(5), "budget": 1250.5, "class": "business", "window": false, "extras": []any{"meal"},
			}},
			map[string]any{"interruptId": "int-deploy", "status": "resolved", "payload": map[string]any{
				"action": "accept", "content": map[string]any{"env": "prod"},
			}},
		}, in["resume"])
		assert.NotContains(t, in["resume"].([]any)[0].(map[string]any)["payload"], "notes", "empty optional fields are left out")
		assert.Equal(t, []string{
			`city: Lisbon, nights: 5, budget: 1250.5, class: business, extras: ["meal"], window: false`,
			"Accepted — env: prod",
		}, eval[[]string](p, `[...document.querySelectorAll('.msg.answer')].map(e => e.textContent)`), "the answers are shown as given")
		assert.Equal(t, "Thanks, continuing.", p.text(`.msg.assistant[data-message-id^="m-resumed"]`))
		assert.Equal(t, "idle", p.attr("#status", "data-state"))
		assert.False(t, eval[bool](p, `document.querySelector('#input').disabled`))
	})

	t.Run("an interrupt can be cancelled", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("question")
		n := p.runsEnded()
		p.do(chromedp.Click(chromedp.CSS(`.interrupt[data-interrupt-id="int-q"] button.cancel`)))
		p.waitIdle(n + 1)
		assert.Equal(t, []any{map[string]any{"interruptId": "int-q", "status": "cancelled"}}, p.fake.last(t)["resume"])
		assert.Equal(t, "(cancelled)", p.text(".msg.answer"))
	})

	t.Run("approval card: edit an argument and approve", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("approval")
		card := `.interrupt.approval[data-interrupt-id="int-ap"]`
		assert.Equal(t, "demo__delete_release", p.text(card+" .approval-tool"))
		assert.Contains(t, p.text(card+" .question"), "<b>Delete</b>", "the message is shown as text")
		assert.Equal(t, "v1", eval[string](p, `document.querySelector('`+card+` [name="editedArgs.release"]').value`), "the form holds the model's arguments")
		p.screenshot("approval-card")
		n := p.runsEnded()
		eval[bool](p, `(() => { document.querySelector('`+card+` [name="editedArgs.release"]').value = ""; return true })()`)
		p.do(
			chromedp.SendKeys(chromedp.CSS(card+` [name="editedArgs.release"]`), "v2"),
			chromedp.Click(chromedp.CSS(card+` button[data-action="approve"]`)),
		)
		p.waitIdle(n + 1)
		assert.Equal(t, []any{map[string]any{"interruptId": "int-ap", "status": "resolved",
			"payload": map[string]any{"approved": true, "editedArgs": map[string]any{"release": "v2"}}}}, p.fake.last(t)["resume"])
	})

	t.Run("approval card: approve unchanged sends no edits", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("approval")
		n := p.runsEnded()
		p.do(chromedp.Click(chromedp.CSS(`.interrupt.approval button[data-action="approve"]`)))
		p.waitIdle(n + 1)
		assert.Equal(t, []any{map[string]any{"interruptId": "int-ap", "status": "resolved", "payload": map[string]any{"approved": true}}}, p.fake.last(t)["resume"])
	})

	t.Run("approval card: deny with a reason", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("approval")
		n := p.runsEnded()
		p.do(
			chromedp.SendKeys(chromedp.CSS(`.interrupt.approval input[name="reason"]`), "still live"),
			chromedp.Click(chromedp.CSS(`.interrupt.approval button[data-action="deny"]`)),
		)
		p.waitIdle(n + 1)
		assert.Equal(t, []any{map[string]any{"interruptId": "int-ap", "status": "resolved",
			"payload": map[string]any{"approved": false, "reason": "still live"}}}, p.fake.last(t)["resume"])
	})

	t.Run("approval card: the in-doubt question", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("in doubt")
		assert.Equal(t, "true", p.attr(`.interrupt.approval`, "data-in-doubt"))
		assert.Equal(t, "Run it again", p.text(`.interrupt.approval button[data-action="approve"]`))
		assert.Equal(t, "Don't run it", p.text(`.interrupt.approval button[data-action="deny"]`))
	})

	t.Run("a typed answer to a text question", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("question")
		n := p.runsEnded()
		p.do(
			chromedp.SendKeys(chromedp.CSS(`.interrupt[data-interrupt-id="int-q"] textarea`), "12-19 May"),
			chromedp.Click(chromedp.CSS(`.interrupt[data-interrupt-id="int-q"] button.primary`)),
		)
		p.waitIdle(n + 1)
		assert.Equal(t, []any{map[string]any{"interruptId": "int-q", "status": "resolved", "payload": map[string]any{"text": "12-19 May"}}}, p.fake.last(t)["resume"])
	})

	t.Run("stop aborts the request", func(t *testing.T) {
		p.t = t
		p.load()
		n := p.runsEnded()
		p.do(chromedp.SendKeys(chromedp.CSS("#input"), "slow"), chromedp.Click(chromedp.CSS("#send")))
		p.do(chromedp.WaitVisible(chromedp.CSS(`.subagent[data-subagent-run-id="sa-call_s"] .sub-msg`)))
		assert.Equal(t, "running", p.attr("#status", "data-state"))
		assert.Equal(t, "step 1 of 20", p.text(".sub-msg"))
		p.do(chromedp.Click(chromedp.CSS("#stop")))
		select {
		case got := <-p.fake.gone:
			assert.Equal(t, "slow", got)
		case <-time.After(20 * time.Second):
			t.Fatal("the server never saw the request end after Stop")
		}
		p.waitIdle(n + 1)
		assert.Contains(t, p.text(".notice.stopped"), "Stopped.")
		assert.Equal(t, "stopped", p.attr(`.tool[data-tool-call-id="call_s"]`, "data-state"))
		assert.Equal(t, "stopped", p.attr(`.subagent[data-subagent-run-id="sa-call_s"]`, "data-state"))
		p.screenshot("stopped")
	})

	t.Run("errors, handoffs, cancellations and truncation are shown plainly", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("error")
		assert.Equal(t, "MODEL_UNAVAILABLE", p.attr(".notice.error", "data-code"))
		assert.Contains(t, p.text(".notice.error"), "The language model is unavailable right now.")
		p.send("handoff")
		assert.Equal(t, "No agent can book hotels.", p.text(`.handoff[data-name="baton.handoff"] p`))
		assert.Equal(t, "no hotel agent", p.text(`.handoff li`))
		assert.Contains(t, p.text(".notice.result"), `{"handoff":true}`)
		p.send("cancelled")
		assert.Equal(t, "The run was cancelled.", p.text(".notice.stopped"))
		assert.Equal(t, "cancelled", p.attr(`.tool[data-tool-call-id="call_c"]`, "data-state"))
		p.send("truncated")
		assert.Contains(t, eval[string](p, `[...document.querySelectorAll('.notice.error')].pop().textContent`), "ended before the run finished")
	})

	t.Run("refused runs leave no trace in the history; a busy thread is retried", func(t *testing.T) {
		p.t = t
		p.load()
		p.send("refuse")
		assert.Equal(t, "INVALID_INPUT", p.text(".notice.error code"))
		assert.Equal(t, 1, p.count(".msg.user.undelivered"))
		assert.False(t, eval[bool](p, `document.querySelector('#settings').open`))
		p.send("auth")
		assert.True(t, eval[bool](p, `document.querySelector('#settings').open`), "a 401 opens the token field")
		assert.Equal(t, "token", eval[string](p, `document.activeElement.id`))
		p.send("busy")
		all := p.fake.requests()
		require.GreaterOrEqual(t, len(all), 2)
		assert.Equal(t, all[len(all)-2]["runId"], all[len(all)-1]["runId"], "the refused attempt is retried")
		assert.Equal(t, "You said: busy.", p.text(".msg.assistant .msg-text"))
		msgs, _ := all[len(all)-1]["messages"].([]any)
		require.Len(t, msgs, 1, "the refused messages are not in the history")
		assert.Equal(t, "busy", msgs[0].(map[string]any)["content"])
	})

	t.Run("the page ran cleanly and loaded nothing from elsewhere", func(t *testing.T) {
		p.t = t
		assert.Empty(t, p.b.Problems())
		foreign := eval[[]string](p, `performance.getEntriesByType('resource').map(e => e.name).filter(u => !u.startsWith(location.origin))`)
		assert.Empty(t, foreign)
	})
}

func TestPagePhoneWidth(t *testing.T) {
	p := startPage(t, browsertest.Options{Width: 390, Height: 844})
	p.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(2)))
	p.load()
	p.send("delegate")
	p.send("form")
	overflow := eval[int](p, `document.documentElement.scrollWidth - window.innerWidth`)
	assert.LessOrEqual(t, overflow, 0, "no horizontal scrolling at phone width")
	visible := eval[bool](p, `(() => { const r = document.querySelector('#send').getBoundingClientRect(); return r.right <= window.innerWidth && r.width > 0; })()`)
	assert.False(t, visible && eval[bool](p, `document.querySelector('#send').hidden`))
	assert.True(t, visible, "the Send button fits on the screen")
	p.screenshot("phone")
	assert.Empty(t, p.b.Problems())
}

// TestPageModules checks the pure functions of the page's modules in the browser.
func TestPageModules(t *testing.T) {
	p := startPage(t, browsertest.Options{})
	p.load()
	tests := []struct {
		name string
		expr string // JS evaluated with a = agui.js and f = forms.js in scope
		want string // JSON
	}{
		{"framer joins chunks", `(() => { const s = new a.SSEFramer(); return [...s.push('data: {"a"'), ...s.push(':1}\n'), ...s.push('\ndata: 2\n\n')]; })()`, `["{\"a\":1}","2"]`},
		{"framer ignores comments and fields", `new a.SSEFramer().push(': ping\n\nevent: x\nid: 3\ndata: {"b":2}\n\n')`, `["{\"b\":2}"]`},
		{"framer joins data lines and accepts CRLF", `new a.SSEFramer().push('data: one\r\ndata:two\r\n\r\n')`, `["one\ntwo"]`},
		{"framer flushes a last frame", `(() => { const s = new a.SSEFramer(); s.push('data: x'); return s.flush(); })()`, `["x"]`},
		{"tag with argument", `a.parseTag('[INPUT_REQUIRED:task_id=t-1]\nWhat dates?')`, `{"tag":"INPUT_REQUIRED","arg":"task_id=t-1","body":"What dates?"}`},
		{"retry tag", `a.parseTag('[RETRY:validation_failed] {"x":1}')`, `{"tag":"RETRY","arg":"validation_failed","body":"{\"x\":1}"}`},
		{"no tag", `a.parseTag('plain')`, `{"tag":"","arg":"","body":"plain"}`},
		{"content parts", `a.contentText([{type:"text",text:"a"},{type:"image"},{type:"text",text:"b"}])`, `"a[image]b"`},
		{"patch", `a.applyPatch({a:{b:1},l:[1]}, [{op:"replace",path:"/a/b",value:2},{op:"add",path:"/l/-",value:3},{op:"remove",path:"/l/0"},{op:"add",path:"/c~1d",value:true}])`, `{"a":{"b":2},"l":[3],"c/d":true}`},
		{"patch leaves the input alone", `(() => { const d = {x:1}; a.applyPatch(d, [{op:"replace",path:"/x",value:2}]); return d; })()`, `{"x":1}`},
		{"bad patch throws", `(() => { try { a.applyPatch({}, [{op:"replace",path:"/nope",value:1}]); return "no error"; } catch (e) { return "error"; } })()`, `"error"`},
		{"uids differ", `a.uid("r") !== a.uid("r") && /^r-[0-9a-f]{24}$/.test(a.uid("r"))`, `true`},
		{"field kinds", `f.buildFields({type:"object",required:["s"],properties:{n:{type:"number"},s:{type:"string"},i:{type:"integer"},b:{type:"boolean"},e:{enum:["x","y"]},m:{type:"array",items:{enum:["p"]}},o:{type:"object",properties:{z:{type:"string"}}},u:{type:"string",format:"uri"},j:{}}}).map(x => [x.name, x.kind, x.required])`,
			`[["s","text",true],["n","number",false],["i","integer",false],["b","boolean",false],["e","select",false],["m","multiselect",false],["o","object",false],["u","text",false],["j","json",false]]`},
		{"enum titles", `f.enumOptions({oneOf:[{const:"a",title:"A"},{const:"b"}]})`, `[{"value":"a","label":"A"},{"value":"b","label":"b"}]`},
		{"enumNames", `f.enumOptions({enum:[1,2],enumNames:["one","two"]})`, `[{"value":1,"label":"one"},{"value":2,"label":"two"}]`},
		{"elicitation shape", `[f.isElicitation({properties:{action:{enum:["accept","decline"]},content:{type:"object"}}}), f.isElicitation({properties:{text:{type:"string"}}})]`, `[true,false]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.t = t
			got := eval[any](p, `(async () => { const a = await import('./agui.js'); const f = await import('./forms.js'); return `+tt.expr+`; })()`)
			var want any
			require.NoError(t, json.Unmarshal([]byte(tt.want), &want))
			assert.Equal(t, want, got)
		})
	}
	// A form drawn from a schema reads back typed values, with bounds checked.
	p.t = t
	errs := eval[[]string](p, `(async () => {
		const f = await import('./forms.js');
		const schema = {type:"object", properties:{n:{type:"integer", minimum:1, maximum:3}, s:{type:"string", pattern:"^[a-z]+$"}}};
		const out = [];
		for (const [n, s] of [["2","abc"],["2.5","abc"],["9","abc"],["1","ABC"]]) {
			const box = document.createElement("div");
			const fields = f.buildFields(schema);
			f.renderFields(document, box, fields);
			box.querySelector('[data-path="n"] input').value = n;
			box.querySelector('[data-path="s"] input').value = s;
			try { out.push(JSON.stringify(f.readPayload(box, fields))); } catch (e) { out.push(e.message); }
		}
		return out;
	})()`)
	assert.Equal(t, []string{`{"n":2,"s":"abc"}`, "N: must be a whole number", "N: must be at most 3", "S: does not have the expected format"}, errs)
	assert.Empty(t, p.b.Problems())
}
