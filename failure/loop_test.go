package failure

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func call(name, args string) llm.ToolCall { return llm.ToolCall{ID: "c", Name: name, Arguments: args} }

func TestCallSignatureIsStable(t *testing.T) {
	t.Parallel()
	base := CallSignature("demo__divide", `{"a":1,"b":0}`)
	same := []string{
		`{"b":0,"a":1}`,
		` { "a" : 1 , "b" : 0 } `,
		`{"a":1.0,"b":0e0}`,
	}
	for _, args := range same {
		assert.Equal(t, base, CallSignature("demo__divide", args), args)
	}
	different := []struct{ tool, args string }{
		{"demo__divide", `{"a":2,"b":0}`},
		{"demo__divide", `{"a":"1","b":0}`},
		{"demo__divide", `{"a":1,"b":0,"c":null}`},
		{"demo__multiply", `{"a":1,"b":0}`},
	}
	for _, d := range different {
		assert.NotEqual(t, base, CallSignature(d.tool, d.args), d)
	}
	assert.Equal(t, CallSignature("x", "{}"), CallSignature("x", ""), "empty arguments are {}")
	assert.Equal(t, CallSignature("x", "{}"), CallSignature("x", "null"))
	assert.Equal(t, CallSignature("x", "not json"), CallSignature("x", "  not json "))
	assert.True(t, strings.HasPrefix(base, "call:demo__divide:"))
	assert.Equal(t, `{"a":[1,{"x":"<&>","y":true}]}`, CanonicalArgs(`{"a":[1.0,{"y":true,"x":"<&>"}]}`))
}

func TestErrorSignature(t *testing.T) {
	t.Parallel()
	tests := []struct {
		result string
		sig    string
		ok     bool
	}{
		{`[RETRY:tool_error] {"error":"tool_error"}`, "error:t:RETRY:tool_error:", true},
		{`[RETRY:validation_failed] {}`, "error:t:RETRY:validation_failed:", true},
		{"[ERROR]\nboom", "error:t:ERROR:", true},
		{"[FAILED]\nno", "error:t:FAILED:", true},
		{"[REJECTED]\nno", "error:t:REJECTED:", true},
		{"[TIMEOUT:task_id=abc]\nslow", "error:t:TIMEOUT:", true},
		{"[UNREACHABLE]\ndown", "error:t:UNREACHABLE:", true},
		{"[OK]\nfine", "", false},
		{"[COMPLETED]\nfine", "", false},
		{"[CANCELED]\nx", "", false},
		{"no tag", "", false},
	}
	for _, tt := range tests {
		sig, ok := errorSignature("t", typed(tt.result))
		assert.Equal(t, tt.ok, ok, tt.result)
		if tt.ok {
			assert.True(t, strings.HasPrefix(sig, tt.sig), "%s: %s", tt.result, sig)
		} else {
			assert.Empty(t, sig)
		}
	}
	// The detail is part of the signature, the attempts left are not.
	a, _ := errorSignature("t", typed(`[RETRY:validation_failed] {"reason":"a is missing","attempts_left":2}`))
	b, _ := errorSignature("t", typed(`[RETRY:validation_failed] {"reason":"a is missing","attempts_left":1}`))
	c, _ := errorSignature("t", typed(`[RETRY:validation_failed] {"reason":"b is missing"}`))
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
}

// Three calls with different arguments that each fail validation in
// one turn are no loop; the same failure in three turns is.
func TestLoopNotWithinOneTurn(t *testing.T) {
	t.Parallel()
	var st State
	d := st.Loops(LoopConfig{})
	bad := bridge.Retry(bridge.Signal{Code: "validation_failed", Requested: "fs__read", Message: "m", Reason: "path: expected a string, got nothing"})
	for i := range 3 {
		assert.Nil(t, d.ObserveResult(call("fs__read", fmt.Sprintf(`{"x":%d}`, i)), typed(bad)), "call %d of one turn", i)
	}
	for turn := 2; turn <= 3; turn++ {
		d.NextTurn()
		f := d.ObserveResult(call("fs__read", `{"x":9}`), typed(bad))
		if turn < 3 {
			assert.Nil(t, f)
		} else {
			require.NotNil(t, f, "the same failure in three turns")
			assert.Equal(t, "RETRY:validation_failed", f.Code)
		}
	}
}

func TestLoopPredictBeforeTheCallRepeats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  LoopConfig
		// sends is how many identical calls are sent before Predict refuses one.
		sends int
		soft  int
	}{
		{"defaults", LoopConfig{}, 2, 2},
		{"2 and 3", LoopConfig{SoftThreshold: 2, HardThreshold: 3}, 2, 2},
		{"1 and 5", LoopConfig{SoftThreshold: 1, HardThreshold: 5}, 4, 1},
		{"soft not below hard falls back", LoopConfig{SoftThreshold: 4, HardThreshold: 4}, 3, 2},
		{"hard 2", LoopConfig{HardThreshold: 2}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			d := st.Loops(tt.cfg)
			c := call("research", `{"prompt":"again"}`)
			sent := 0
			for !d.Predict(c) {
				n, soft := d.Observe(c)
				sent++
				require.Equal(t, sent, n)
				assert.Equal(t, n >= tt.soft, soft, "soft threshold at send %d", n)
				require.Less(t, sent, 100)
			}
			assert.Equal(t, tt.sends, sent)
			assert.False(t, d.Predict(call("research", `{"prompt":"something else"}`)), "other arguments are another call")
			assert.False(t, d.Predict(call("travel", `{"prompt":"again"}`)), "another tool is another call")

			f := d.PredictedLoop(c)
			assert.Equal(t, KindLoopDetected, f.Kind)
			assert.Equal(t, "research", f.Tool)
			assert.Equal(t, "repeated_call", f.Code)
		})
	}
}

func TestPredictedLoopExplanation(t *testing.T) {
	t.Parallel()
	var st State
	d := st.Loops(LoopConfig{})
	c := call("research", `{}`)
	d.Observe(c)
	d.Observe(c)
	assert.Equal(t, `The same call to the tool "research" with the same arguments was about to be made for the third time.`, d.PredictedLoop(c).Explanation)
}

func TestLoopOnRepeatedError(t *testing.T) {
	t.Parallel()
	var st State
	d := st.Loops(LoopConfig{})
	divide := func(args string) llm.ToolCall { return call("demo__divide", args) }
	tool := bridge.Retry(bridge.Signal{Code: "tool_error", Requested: "demo__divide", Message: "m"})

	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{"a":1,"b":0}`), typed(tool)))
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{"a":2,"b":0}`), typed(tool)))
	d.NextTurn()
	f := d.ObserveResult(divide(`{"a":3,"b":0}`), typed(tool))
	require.NotNil(t, f, "the same error three times, whatever the arguments")
	assert.Equal(t, KindLoopDetected, f.Kind)
	assert.Equal(t, "RETRY:tool_error", f.Code)
	assert.Equal(t, `The tool "demo__divide" returned the same error 3 times in a row.`, f.Explanation)

	d.Reset()
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed(tool)))
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed(tool)))
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed("[OK]\n2")), "success clears the tool's errors")
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed(tool)))
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed(tool)))
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(call("other", `{}`), typed(tool)), "errors are counted per tool")
	d.NextTurn()
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed("[ERROR]\nx")), "another error is another signature")
	d.NextTurn()
	assert.NotNil(t, d.ObserveResult(divide(`{}`), typed(tool)))
	assert.Nil(t, d.ObserveResult(divide(`{}`), typed("[CANCELED]\nx")), "neither error nor progress")
}

func TestLoopCountsLiveInTheState(t *testing.T) {
	t.Parallel()
	var st State
	c := call("research", `{"prompt":"x"}`)
	st.Loops(LoopConfig{}).Observe(c)
	st.Loops(LoopConfig{}).Observe(c)
	raw, err := json.Marshal(&st)
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.True(t, back.Loops(LoopConfig{}).Predict(c), "counts survive suspension")
	back.Resume(KindLoopDetected)
	assert.False(t, back.Loops(LoopConfig{}).Predict(c), "the user chose to continue")
}

func TestLoopRefusal(t *testing.T) {
	t.Parallel()
	out := loopRefusal(call("research", `{}`), []string{"ask_user", "travel"})
	tag, code, ok := bridge.ParseTag(out)
	require.True(t, ok)
	assert.Equal(t, bridge.TagRetry, tag)
	assert.Equal(t, "loop_detected", code)
	_, raw, _ := strings.Cut(out, "] ")
	var sig map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &sig))
	assert.Equal(t, map[string]any{
		"error":     "loop_detected",
		"requested": "research",
		"message": "This call was not sent: it repeats an earlier identical call that did not get the work done. " +
			"Change the approach (other arguments, another tool) or tell the user what blocks you.",
		"valid_next_actions": []any{"ask_user", "travel"},
	}, sig)
	assert.NotContains(t, out, "\n")
	assert.Nil(t, DetectToolResult("research", typed(out)), "a loop refusal is not also a tool failure")
}
