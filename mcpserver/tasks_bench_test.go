package mcpserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-dev/baton/agui"
)

// BenchmarkTaskGet is what the surface does for one tasks/get (and for each task of a
// tasks/list page) once the engine has read the run's log: replay an agent tool's log of
// 40 events through the relay and write the answer. "question": a run that ends asking
// (the task also keeps the answer a client that cannot be asked gets); "completed": the
// agent's answer.
func BenchmarkTaskGet(b *testing.B) {
	progress := []agui.Event{
		&agui.RunStarted{ThreadID: "th", RunID: "r1"},
		&agui.ToolCallStart{ToolCallID: "c1", ToolCallName: "research"},
		&agui.SubagentStarted{SubagentRunID: "s1", Name: "research"},
	}
	for range 35 {
		progress = append(progress, &agui.TextMessageContent{MessageID: "sm", SubagentRunID: "s1", Delta: "a step of the agent's work "})
	}
	end := time.Now()
	completed := append(append([]agui.Event(nil), progress...),
		&agui.ToolCallResult{ToolCallID: "c1", Content: "[COMPLETED]\nthe agent's answer"},
		&agui.RunFinished{Base: agui.Base{Timestamp: end.UnixMilli()}, ThreadID: "th", RunID: "r1"})
	question := append(append([]agui.Event(nil), progress...),
		&agui.RunFinished{Base: agui.Base{Timestamp: end.UnixMilli()}, ThreadID: "th", RunID: "r1", Outcome: &agui.Outcome{
			Type: agui.OutcomeInterrupt, Interrupts: []agui.Interrupt{{ID: "int-1", Reason: "input_required", Message: "Which colour?",
				ResponseSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}}}}}})
	tl := tool{name: "research", agent: "research"}
	for _, c := range []struct {
		name string
		evs  []agui.Event
	}{{"completed", completed}, {"question", question}} {
		log := &RunLog{RunID: "r1", Events: c.evs}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tk, _ := taskOf("th", tl, log, time.Hour, end)
				if _, err := json.Marshal(&taskResult{ResultType: "complete", task: tk}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
