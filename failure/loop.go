package failure

import (
	"github.com/baton-dev/baton/internal/toolname"

	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/internal/config"
	"github.com/baton-dev/baton/llm"
)

// Loop detection.
//
// Design note: a loop is recognised on two stable signatures: (tool, canonical JSON of the
// arguments) for calls, and (tool, tag, code and detail of the error) for results. An error
// signature counts once per turn: several different calls in one turn that fail alike are
// one attempt, not a loop (DESIGN §6). Arguments are
// canonicalised (keys sorted, numbers normalised, whitespace dropped) and hashed, so that
// the model cannot dodge the detector by reordering keys, and the state stays small. A call
// signature is checked before the call is sent (Predict): the call that would reach the
// hard threshold is not sent at all. An error signature can only be seen after the result,
// and counts consecutive errors of a tool (a result that makes progress clears them).
// Counts live in State.Signatures so that they survive suspension.

// Default loop thresholds (config loop.soft_threshold, loop.hard_threshold,
// loop.stall_turns): internal/config's, the one place they are defined.
const (
	DefaultLoopSoft   = config.DefaultLoopSoft
	DefaultLoopHard   = config.DefaultLoopHard
	DefaultStallTurns = config.DefaultStallTurns
)

// LoopConfig sets the thresholds of the loop detector.
type LoopConfig struct {
	// SoftThreshold: the repetition that is logged (default 2: the first repeat).
	SoftThreshold int
	// HardThreshold: the repetition that is loop_detected (default 3). The call that
	// would reach it is not sent.
	HardThreshold int
	// StallTurns: consecutive tool rounds without progress that count as no_progress
	// (default 3; see TurnLimits.StallRounds). Not used by the detector itself.
	StallTurns int
}

func (c LoopConfig) thresholds() (soft, hard int) {
	soft, hard = c.SoftThreshold, c.HardThreshold
	if hard <= 0 {
		hard = DefaultLoopHard
	}
	if soft <= 0 || soft >= hard {
		soft = min(DefaultLoopSoft, hard-1)
	}
	return soft, hard
}

// LoopDetector counts repeated calls and errors. It shares its counts with the
// State it came from. Not safe for concurrent use.
type LoopDetector struct {
	soft, hard int
	counts     map[string]int
	// turn holds the error signatures seen in the current turn: several calls of one turn
	// that fail alike count once (they are one attempt of the model, not a loop). Made by
	// the first error.
	turn map[string]bool
}

// Loops returns a loop detector over st's signature counts.
func (st *State) Loops(cfg LoopConfig) *LoopDetector {
	st.init()
	soft, hard := cfg.thresholds()
	return &LoopDetector{soft: soft, hard: hard, counts: st.Signatures}
}

// NextTurn starts a new turn for ObserveResult.
func (d *LoopDetector) NextTurn() { clear(d.turn) }

// CallSignature is the stable signature of a call: its tool and the hash of its canonical
// arguments.
func CallSignature(tool, args string) string {
	sum := sha256.Sum256([]byte(CanonicalArgs(args)))
	return "call:" + tool + ":" + hex.EncodeToString(sum[:12])
}

// errorSignature is the stable signature of an error result of tool: the tag and retry
// code of its first line, and a hash of the error's detail (the rest of the result, less
// the attempts left), so that the same failure repeated is one signature and two different
// failures of a tool are two. ok is false when the result is not an error: only
// [RETRY:…], [ERROR], [FAILED], [REJECTED], [TIMEOUT…] and [UNREACHABLE] are.
func errorSignature(tool string, res ToolResult) (sig string, ok bool) {
	code, ok := errorCode(res)
	if !ok {
		return "", false
	}
	_, detail, _ := strings.Cut(res.Text, "]")
	detail = attemptsLeft.ReplaceAllString(detail, "")
	sum := sha256.Sum256([]byte(detail))
	return "error:" + tool + ":" + code + ":" + hex.EncodeToString(sum[:8]), true
}

// attemptsLeft matches the part of a retry signal that changes while the same error
// repeats.
var attemptsLeft = regexp.MustCompile(`"attempts_left":-?[0-9]+,?`)

// errorCode is the tag (with its retry code) of an error result.
func errorCode(res ToolResult) (string, bool) {
	if !isErrorTag(res.Tag) {
		return "", false
	}
	if res.Tag == bridge.TagRetry {
		return res.Tag + ":" + res.Code, true
	}
	return res.Tag, true
}

func isErrorTag(tag string) bool {
	switch tag {
	case bridge.TagRetry, bridge.TagError, bridge.TagFailed, bridge.TagRejected, bridge.TagTimeout, bridge.TagUnreachable:
		return true
	}
	return false
}

// CanonicalArgs renders JSON arguments canonically: objects with sorted keys, numbers as
// float64, no insignificant whitespace. Empty or null arguments are {}; text that is not
// JSON is kept trimmed.
func CanonicalArgs(args string) string {
	args = strings.TrimSpace(args)
	if args == "" || args == "null" {
		return "{}"
	}
	var v any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		return args
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return args
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Predict reports whether sending c would reach the hard threshold: the caller must not
// send it (it gets loopRefusal as its result and a loop_detected failure).
func (d *LoopDetector) Predict(c llm.ToolCall) bool {
	return d.counts[CallSignature(c.Name, c.Arguments)]+1 >= d.hard
}

// Observe records that c is being sent. It returns how many times the same call has now
// been sent and whether that reached the soft threshold (to be logged).
func (d *LoopDetector) Observe(c llm.ToolCall) (count int, soft bool) {
	sig := CallSignature(c.Name, c.Arguments)
	d.counts[sig]++
	n := d.counts[sig]
	return n, n >= d.soft
}

// ObserveResult records the result of c. An error result counts towards its (tool, error
// code and detail) signature, once per turn, and returns loop_detected when that reaches
// the hard threshold across turns; a result that makes progress clears the error counts of
// the tool.
func (d *LoopDetector) ObserveResult(c llm.ToolCall, result ToolResult) *Failure {
	sig, isErr := errorSignature(c.Name, result)
	if !isErr {
		if IsProgress(result) {
			prefix := "error:" + c.Name + ":"
			for k := range d.counts {
				if strings.HasPrefix(k, prefix) {
					delete(d.counts, k)
				}
			}
		}
		return nil
	}
	if d.turn[sig] {
		return nil
	}
	if d.turn == nil {
		d.turn = map[string]bool{}
	}
	d.turn[sig] = true
	d.counts[sig]++
	if n := d.counts[sig]; n >= d.hard {
		code, _ := errorCode(result)
		return &Failure{Kind: KindLoopDetected, Tool: c.Name, Code: code,
			Explanation: fmt.Sprintf("%s returned the same error %d times in a row.", capitalise(toolLabel(c.Name)), n)}
	}
	return nil
}

// PredictedLoop is the failure for a call that Predict refused.
func (d *LoopDetector) PredictedLoop(c llm.ToolCall) *Failure {
	n := d.counts[CallSignature(c.Name, c.Arguments)] + 1
	return &Failure{Kind: KindLoopDetected, Tool: c.Name, Code: "repeated_call",
		Explanation: fmt.Sprintf("The same call to %s with the same arguments was about to be made for the %s time.", toolLabel(c.Name), ordinal(n))}
}

// Reset forgets every signature (after the user chose to continue).
func (d *LoopDetector) Reset() { clear(d.counts) }

// loopRefusal is the tool result of a call that was not sent because it would repeat a
// loop: a [RETRY:loop_detected] signal (DESIGN §7) listing validNext.
func loopRefusal(c llm.ToolCall, validNext []string) string {
	return bridge.Retry(LoopSignal(c, validNext))
}

// LoopSignal is the signal loopRefusal renders.
func LoopSignal(c llm.ToolCall, validNext []string) bridge.Signal {
	return bridge.Signal{
		Code:      "loop_detected",
		Requested: toolname.Sanitize(c.Name),
		Message: "This call was not sent: it repeats an earlier identical call that did not get the work done. " +
			"Change the approach (other arguments, another tool) or tell the user what blocks you.",
		ValidNextActions: validNext,
	}
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "first"
	case 2:
		return "second"
	case 3:
		return "third"
	case 4:
		return "fourth"
	case 5:
		return "fifth"
	}
	return fmt.Sprintf("%dth", n)
}
