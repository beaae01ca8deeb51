package coordinator

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/baton-dev/baton/bridge"
)

// BenchmarkRetrySignalBytes reports what a retry signal costs the model with 64 tools:
// "before" lists every tool in valid_next_actions (and in
// known_actions for unknown_action), as the engine did; "after" is what it sends now.
func BenchmarkRetrySignalBytes(b *testing.B) {
	var names []string
	for i := range 63 {
		names = append(names, fmt.Sprintf("server%02d__tool_with_a_usual_name_%02d", i/8, i))
	}
	names = append(names, askUserTool)
	r := &Run{}
	t := &toolset{backend: names}
	tool := names[10]
	left := 2
	errSig := func(valid []string) bridge.Signal {
		return bridge.Signal{Code: "tool_error", Requested: tool,
			Message:          "The tool reported an error. Fix the cause (arguments, order of calls) and call again, or use another way.",
			ValidNextActions: valid, ErrorMessage: "ENOENT: no such file or directory", AttemptsLeft: &left}
	}
	unknown := func(valid, known []string) bridge.Signal {
		return bridge.Signal{Code: "unknown_action", Requested: "server01__tool_with_a_usual_nam_10",
			Message: "There is no tool with this name. Call one of known_actions.", ValidNextActions: valid, KnownActions: known}
	}
	cases := []struct {
		name string
		sig  func() bridge.Signal
	}{
		{"tool_error/before", func() bridge.Signal { return errSig(names) }},
		{"tool_error/after", func() bridge.Signal { return errSig(nextActions(r.guard, t, tool)) }},
		{"unknown_action/before", func() bridge.Signal { return unknown(names, names) }},
		{"unknown_action/after", func() bridge.Signal {
			req := "server01__tool_with_a_usual_nam_10"
			return unknown(unknownNext(r.guard, t, req), knownActions(t, req))
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				s := c.sig()
				if c.name == "tool_error/before" || c.name == "unknown_action/before" {
					// The old rendering had no caps.
					n = len(renderUncapped(s))
				} else {
					n = len(bridge.Retry(s))
				}
			}
			b.ReportMetric(float64(n), "bytes/signal")
		})
	}
}

// renderUncapped renders s as bridge.Retry did before the lists were capped.
func renderUncapped(s bridge.Signal) string {
	raw, _ := compactSignal(s)
	return "[RETRY:" + s.Code + "] " + raw
}

func compactSignal(s bridge.Signal) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}
