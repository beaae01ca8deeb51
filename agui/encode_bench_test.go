package agui

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The encoder benchmark compares the hand encoder (appendEvent, behind appendFrame's framing)
// with encoding/json on the same events through struct tags alone: each event's fields in a
// defined type without its MarshalJSON, with the wire "type" beside them, written by one
// json.Encoder (HTML escaping off, as the hand encoder) into a reused buffer. The mix is
// what a streaming run sends most: text and argument deltas, then tool results, a custom
// event and the run's ends.

type (
	plainTextMessageContent TextMessageContent
	plainToolCallArgs       ToolCallArgs
	plainToolCallResult     ToolCallResult
	plainCustom             Custom
	plainRunStarted         RunStarted
	plainRunFinished        RunFinished
)

// The wire "type" beside each event's own fields (embedded, so flattened as the hand
// encoder writes them).
type (
	taggedTextMessageContent struct {
		Type EventType `json:"type"`
		plainTextMessageContent
	}
	taggedToolCallArgs struct {
		Type EventType `json:"type"`
		plainToolCallArgs
	}
	taggedToolCallResult struct {
		Type EventType `json:"type"`
		plainToolCallResult
	}
	taggedCustom struct {
		Type EventType `json:"type"`
		plainCustom
	}
	taggedRunStarted struct {
		Type EventType `json:"type"`
		plainRunStarted
	}
	taggedRunFinished struct {
		Type EventType `json:"type"`
		plainRunFinished
	}
)

var benchMix = []Event{
	&TextMessageContent{Base: Base{Timestamp: 1764230400123}, MessageID: "msg_01HZX3J6M2Q8N4V7K9T5R0B1C2",
		Delta: "The research agent found three relevant sources; summarising them now."},
	&TextMessageContent{Base: Base{Timestamp: 1764230400124}, MessageID: "msg_01HZX3J6M2Q8N4V7K9T5R0B1C2",
		Delta: " Next, the \"travel\" agent.", SubagentRunID: "sa-2f6c"},
	&ToolCallArgs{Base: Base{Timestamp: 1764230400125}, ToolCallID: "call_8c1d", Delta: `{"query":"Go generics`},
	&ToolCallResult{Base: Base{Timestamp: 1764230400126}, MessageID: "res_8c1d", ToolCallID: "call_8c1d",
		Content: "[COMPLETED]\nThree sources: the Go blog, the spec, and a talk.", Role: "tool"},
	&Custom{Base: Base{Timestamp: 1764230400127}, Name: "baton.failure",
		Value: map[string]any{"kind": "tool_error", "action": "retry", "attempt": 1}},
	&RunStarted{Base: Base{Timestamp: 1764230400100}, ThreadID: "t1", RunID: "r1"},
	&RunFinished{Base: Base{Timestamp: 1764230400200}, ThreadID: "t1", RunID: "r1",
		Outcome: &Outcome{Type: OutcomeSuccess}},
}

// tagged converts ev to its struct-tag-only form.
func tagged(ev Event) any {
	switch v := ev.(type) {
	case *TextMessageContent:
		return &taggedTextMessageContent{ev.EventType(), plainTextMessageContent(*v)}
	case *ToolCallArgs:
		return &taggedToolCallArgs{ev.EventType(), plainToolCallArgs(*v)}
	case *ToolCallResult:
		return &taggedToolCallResult{ev.EventType(), plainToolCallResult(*v)}
	case *Custom:
		return &taggedCustom{ev.EventType(), plainCustom(*v)}
	case *RunStarted:
		return &taggedRunStarted{ev.EventType(), plainRunStarted(*v)}
	case *RunFinished:
		return &taggedRunFinished{ev.EventType(), plainRunFinished(*v)}
	}
	panic("tagged: no plain form for " + string(ev.EventType()))
}

// TestTaggedFormMatches keeps the benchmark honest: on the mix, encoding/json through the
// tags writes the same JSON values as the hand encoder.
func TestTaggedFormMatches(t *testing.T) {
	t.Parallel()
	for _, ev := range benchMix {
		hand, err := MarshalEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		viaTags, err := json.Marshal(tagged(ev))
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(hand, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(viaTags, &b); err != nil {
			t.Fatal(err)
		}
		if !jsonValuesEqual(a, b) {
			t.Errorf("%s: hand %s, tags %s", ev.EventType(), hand, viaTags)
		}
	}
}

func jsonValuesEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// BenchmarkEncodeEvent/hand is appendFrame, the hand encoder with its SSE framing;
// BenchmarkEncodeEvent/encoding_json is the same frame written by encoding/json through the
// struct tags. ns/op is per event of the mix.
func BenchmarkEncodeEvent(b *testing.B) {
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			var err error
			if buf, err = appendFrame(buf[:0], benchMix[i%len(benchMix)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		forms := make([]any, len(benchMix))
		for i, ev := range benchMix {
			forms[i] = tagged(ev)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf.Reset()
			buf.WriteString("data: ")
			if err := enc.Encode(forms[i%len(forms)]); err != nil { // Encode ends with "\n"
				b.Fatal(err)
			}
			buf.WriteByte('\n')
			i++
		}
	})
}
