package agui

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sentinel errors of the Sequencer.
var (
	// ErrOrdering marks an event refused because the official client would reject the stream.
	ErrOrdering = errors.New("agui: event out of order")
	// ErrTerminated is returned once the run has ended (or its sink has failed).
	ErrTerminated = errors.New("agui: run already terminated")
)

// Legacy downgrade of the cancelled outcome, which 0.0.59 clients cannot parse.
const (
	legacyCancelledCode    = "CANCELLED"
	legacyCancelledMessage = "The run was cancelled."
)

// Closing of subagents still open when the run ends.
const (
	subagentCancelledCode    = "cancelled"
	subagentCancelledMessage = "The sub-agent was stopped because the run ended."
)

// SequencerOptions configures a Sequencer.
type SequencerOptions struct {
	// Legacy downgrades the stream for a pre-1.0 client (RunAgentInput.Legacy).
	Legacy bool
	// Now stamps timestamps; nil means time.Now.
	Now func() time.Time
}

// Sequencer enforces, on the producer side, the ordering rules that the official
// @ag-ui/client 1.0 applies to a stream (verifyEvents), stamps integer millisecond timestamps
// and applies the legacy downgrade. It guards exactly one run. It is safe for concurrent use,
// and the sink is called under its lock, so events reach the sink in the order they were
// accepted.
type Sequencer struct {
	mu     sync.Mutex
	sink   func(Event) error
	legacy bool
	now    func() time.Time

	state           runState
	threadID, runID string

	// What is open, each kind in opening order (closed in a deterministic order).
	messages  openSet[string]
	toolCalls openSet[string]
	steps     openSet[stepKey]
	subagents openSet[string] // owner is the parent subagent
	// usedSubagents are the subagent ids this run has started (an id is never reused).
	usedSubagents []string
}

type runState uint8

const (
	stateIdle runState = iota
	stateRunning
	stateDone
)

type openItem struct {
	owner string // subagentRunId of the opener; "" when not attributed
}

type stepKey struct{ owner, name string }

// NewSequencer returns a Sequencer that forwards accepted events to sink. A sink error ends the
// run: the stream is considered broken and every later Emit returns ErrTerminated.
func NewSequencer(sink func(Event) error, opts SequencerOptions) *Sequencer {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Sequencer{
		sink:   sink,
		legacy: opts.Legacy,
		now:    now,
	}
}

// Emit validates ev against the state machine and forwards it to the sink. A violation returns
// an error wrapping ErrOrdering and sends nothing; after the terminal event Emit returns
// ErrTerminated. Emit stamps ev.Timestamp when it is zero. RUN_FINISHED is refused while
// anything is open: use Finish, which closes it all first.
func (s *Sequencer) Emit(ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emitLocked(ev)
}

// Finish closes everything still open (text messages, tool calls, steps, then subagents with
// SUBAGENT_ERROR{code:"cancelled"}) and emits RUN_FINISHED. Empty threadID or runID are taken
// from RUN_STARTED. For a legacy client a cancelled outcome becomes
// RUN_ERROR{code:"CANCELLED"}, PendingToolCallIDs is dropped and a success outcome is omitted.
func (s *Sequencer) Finish(threadID, runID string, outcome *Outcome, result any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateDone {
		return ErrTerminated
	}
	if s.state == stateIdle {
		return fmt.Errorf("%w: cannot finish a run that was never started", ErrOrdering)
	}
	// Refuse a bad outcome before closing anything, so the stream is not left half-closed.
	if err := checkOutcome(outcome); err != nil {
		return fmt.Errorf("%w: cannot send %s: %w", ErrOrdering, EventRunFinished, err)
	}
	if err := s.closeAllLocked(); err != nil {
		return err
	}
	return s.emitLocked(&RunFinished{ThreadID: threadID, RunID: runID, Outcome: outcome, Result: result})
}

// Fail closes everything still open and emits RUN_ERROR{code, message}. The message is shown to
// the user. Fail before RUN_STARTED sends the RUN_ERROR alone, which the client accepts.
func (s *Sequencer) Fail(code, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateDone {
		return ErrTerminated
	}
	if s.state == stateRunning {
		if err := s.closeAllLocked(); err != nil {
			return err
		}
	}
	if message == "" {
		message = "The run failed."
	}
	return s.emitLocked(&RunError{Message: message, Code: code})
}

// Terminated reports whether the terminal event has been sent (or the sink has failed).
func (s *Sequencer) Terminated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateDone
}

// Legacy reports whether the Sequencer downgrades for a pre-1.0 client.
func (s *Sequencer) Legacy() bool { return s.legacy }

// OpenItems lists what a run still has open, each kind in opening order.
type OpenItems struct {
	Messages  []string
	ToolCalls []string
	Steps     []string // "name", or "subagentRunId/name" when attributed
	Subagents []string
}

// Empty reports whether nothing is open.
func (o OpenItems) Empty() bool {
	return len(o.Messages)+len(o.ToolCalls)+len(o.Steps)+len(o.Subagents) == 0
}

// Open reports what is still open, for tests and diagnostics.
func (s *Sequencer) Open() OpenItems {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openLocked()
}

func (s *Sequencer) openLocked() OpenItems {
	steps := s.steps.keys()
	names := make([]string, len(steps))
	for i, k := range steps {
		names[i] = k.name
		if k.owner != "" {
			names[i] = k.owner + "/" + k.name
		}
	}
	return OpenItems{
		Messages:  s.messages.keys(),
		ToolCalls: s.toolCalls.keys(),
		Steps:     names,
		Subagents: s.subagents.keys(),
	}
}

// closeAllLocked closes what is open: messages and tool calls in opening order, then steps and
// subagents innermost first (reverse opening order), so nested subagents close before parents.
func (s *Sequencer) closeAllLocked() error {
	for _, m := range slices.Clone(s.messages) {
		if err := s.emitLocked(&TextMessageEnd{MessageID: m.key, SubagentRunID: m.owner}); err != nil {
			return err
		}
	}
	for _, c := range slices.Clone(s.toolCalls) {
		if err := s.emitLocked(&ToolCallEnd{ToolCallID: c.key, SubagentRunID: c.owner}); err != nil {
			return err
		}
	}
	steps := s.steps.keys()
	slices.Reverse(steps)
	for _, k := range steps {
		if err := s.emitLocked(&StepFinished{StepName: k.name, SubagentRunID: k.owner}); err != nil {
			return err
		}
	}
	subs := s.subagents.keys()
	slices.Reverse(subs)
	for _, id := range subs {
		ev := &SubagentError{SubagentRunID: id, Code: subagentCancelledCode, Message: subagentCancelledMessage}
		if err := s.emitLocked(ev); err != nil {
			return err
		}
	}
	return nil
}

func (s *Sequencer) emitLocked(ev Event) error {
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrOrdering)
	}
	if v := reflect.ValueOf(ev); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: nil %T event", ErrOrdering, ev)
	}
	t := ev.EventType()
	if s.state == stateDone {
		return fmt.Errorf("%w: cannot send %s", ErrTerminated, t)
	}
	if s.legacy && !knownTypes[t] {
		return fmt.Errorf("%w: cannot send %s: pre-1.0 clients reject unknown event types", ErrOrdering, t)
	}
	if err := s.apply(ev); err != nil {
		return fmt.Errorf("%w: cannot send %s: %w", ErrOrdering, t, err)
	}
	out := s.downgrade(ev)
	if b, ok := out.(baser); ok {
		if base := b.base(); base.Timestamp == 0 {
			base.Timestamp = s.now().UnixMilli()
		}
	}
	if err := s.sink(out); err != nil {
		s.state = stateDone
		return fmt.Errorf("agui: send %s: %w", out.EventType(), err)
	}
	return nil
}

// apply checks ev against the state machine and, when it is acceptable, records its effect.
// The rules mirror verifyEvents of @ag-ui/client 1.0 (reference §5.1).
func (s *Sequencer) apply(ev Event) error {
	switch v := ev.(type) {
	case *RunStarted:
		if s.state == stateRunning {
			return fmt.Errorf("run %q is still active", s.runID)
		}
		if v.ThreadID == "" || v.RunID == "" {
			return errors.New("threadId and runId are required")
		}
		s.state, s.threadID, s.runID = stateRunning, v.ThreadID, v.RunID
		return nil
	case *RunError:
		s.state = stateDone
		return nil
	}
	if s.state != stateRunning {
		return errors.New("the first event must be RUN_STARTED (or RUN_ERROR)")
	}
	switch v := ev.(type) {
	case *RunFinished:
		if open := s.openLocked(); !open.Empty() {
			return fmt.Errorf("still open: %s", describeOpen(open))
		}
		if err := checkOutcome(v.Outcome); err != nil {
			return err
		}
		s.state = stateDone
	case *TextMessageStart:
		switch v.Role {
		case "", RoleDeveloper, RoleSystem, RoleAssistant, RoleUser:
		default:
			return fmt.Errorf("role %q is not developer, system, assistant or user", v.Role)
		}
		return s.open(&s.messages, "text message", v.MessageID, v.SubagentRunID)
	case *TextMessageContent:
		return continueItem(&s.messages, "text message", v.MessageID, v.SubagentRunID, false)
	case *TextMessageEnd:
		return continueItem(&s.messages, "text message", v.MessageID, v.SubagentRunID, true)
	case *ToolCallStart:
		if v.ToolCallName == "" {
			return errors.New("toolCallName is required")
		}
		return s.open(&s.toolCalls, "tool call", v.ToolCallID, v.SubagentRunID)
	case *ToolCallArgs:
		return continueItem(&s.toolCalls, "tool call", v.ToolCallID, v.SubagentRunID, false)
	case *ToolCallEnd:
		return continueItem(&s.toolCalls, "tool call", v.ToolCallID, v.SubagentRunID, true)
	case *ToolCallResult:
		if v.MessageID == "" || v.ToolCallID == "" {
			return errors.New("messageId and toolCallId are required")
		}
		if v.Role != "" && v.Role != RoleTool {
			return fmt.Errorf("role %q is not %q", v.Role, RoleTool)
		}
	case *StepStarted:
		return s.startStep(v)
	case *StepFinished:
		return s.finishStep(v)
	case *SubagentStarted:
		return s.startSubagent(v)
	case *SubagentFinished:
		if v.Outcome != nil {
			switch v.Outcome.Type {
			case SubagentOutcomeSuccess:
				if len(v.Outcome.InterruptIDs) > 0 {
					return errors.New("a success outcome carries no interruptIds")
				}
			case SubagentOutcomeSuspended:
			default:
				return fmt.Errorf("subagent outcome %q is not %q or %q", v.Outcome.Type, SubagentOutcomeSuccess, SubagentOutcomeSuspended)
			}
		}
		return continueItem(&s.subagents, "subagent", v.SubagentRunID, "", true)
	case *SubagentError:
		return continueItem(&s.subagents, "subagent", v.SubagentRunID, "", true)
	case *ActivitySnapshot:
		if v.MessageID == "" || v.ActivityType == "" {
			return errors.New("messageId and activityType are required")
		}
	case *Custom:
		if v.Name == "" {
			return errors.New("name is required")
		}
	}
	return nil
}

func (s *Sequencer) open(m *openSet[string], kind, id, owner string) error {
	if id == "" {
		return fmt.Errorf("a %s needs an id", kind)
	}
	if _, ok := m.get(id); ok {
		return fmt.Errorf("a %s with id %q is already in progress", kind, id)
	}
	m.add(id, openItem{owner: owner})
	return nil
}

// continueItem checks that id is open and that the continuation's attribution, when present,
// matches the opener's; end closes the item.
func continueItem(m *openSet[string], kind, id, owner string, end bool) error {
	it, ok := m.get(id)
	if !ok {
		return fmt.Errorf("no active %s with id %q", kind, id)
	}
	if owner != "" && owner != it.owner {
		return fmt.Errorf("%s %q was opened with subagentRunId %q, not %q", kind, id, it.owner, owner)
	}
	if end {
		m.remove(id)
	}
	return nil
}

func (s *Sequencer) startStep(v *StepStarted) error {
	if v.StepName == "" {
		return errors.New("stepName is required")
	}
	k := stepKey{owner: v.SubagentRunID, name: v.StepName}
	if _, ok := s.steps.get(k); ok {
		return fmt.Errorf("step %q is already active", v.StepName)
	}
	s.steps.add(k, openItem{owner: k.owner})
	return nil
}

func (s *Sequencer) finishStep(v *StepFinished) error {
	k := stepKey{owner: v.SubagentRunID, name: v.StepName}
	if _, ok := s.steps.get(k); ok {
		s.steps.remove(k)
		return nil
	}
	if v.SubagentRunID == "" {
		// An unattributed finish may close the one attributed step of that name.
		var found []stepKey
		for _, st := range s.steps {
			if st.key.name == v.StepName {
				found = append(found, st.key)
			}
		}
		if len(found) == 1 {
			s.steps.remove(found[0])
			return nil
		}
		if len(found) > 1 {
			return fmt.Errorf("step %q is active for several subagents; set subagentRunId", v.StepName)
		}
	}
	return fmt.Errorf("step %q was not started", v.StepName)
}

func (s *Sequencer) startSubagent(v *SubagentStarted) error {
	if v.SubagentRunID == "" || v.Name == "" {
		return errors.New("subagentRunId and name are required")
	}
	if _, ok := s.subagents.get(v.SubagentRunID); ok {
		return fmt.Errorf("subagent %q is already active", v.SubagentRunID)
	}
	if slices.Contains(s.usedSubagents, v.SubagentRunID) {
		return fmt.Errorf("subagent id %q was already used in this run", v.SubagentRunID)
	}
	if p := v.ParentSubagentRunID; p != "" {
		if _, ok := s.subagents.get(p); !ok {
			return fmt.Errorf("parent subagent %q is not active", p)
		}
	}
	s.subagents.add(v.SubagentRunID, openItem{owner: v.ParentSubagentRunID})
	s.usedSubagents = append(s.usedSubagents, v.SubagentRunID)
	return nil
}

func describeOpen(o OpenItems) string {
	var parts []string
	add := func(kind string, ids []string) {
		if len(ids) > 0 {
			parts = append(parts, kind+" "+strings.Join(ids, ", "))
		}
	}
	add("steps", o.Steps)
	add("text messages", o.Messages)
	add("tool calls", o.ToolCalls)
	add("subagents", o.Subagents)
	return strings.Join(parts, "; ")
}

// checkOutcome accepts exactly the shapes of the 1.0 RunFinishedOutcome union; anything else
// would be stripped with a client warning or fail the run.
func checkOutcome(o *Outcome) error {
	if o == nil {
		return nil
	}
	switch o.Type {
	case OutcomeSuccess:
		if len(o.Interrupts) > 0 {
			return errors.New("a success outcome carries no interrupts")
		}
	case OutcomeInterrupt:
		if len(o.PendingToolCallIDs) > 0 {
			return errors.New("an interrupt outcome carries no pendingToolCallIds")
		}
		if len(o.Interrupts) == 0 {
			return errors.New("an interrupt outcome needs at least one interrupt")
		}
		seen := make(map[string]bool, len(o.Interrupts))
		for i, in := range o.Interrupts {
			if in.ID == "" || in.Reason == "" {
				return fmt.Errorf("interrupt %d needs an id and a reason", i)
			}
			if seen[in.ID] {
				return fmt.Errorf("interrupt id %q is repeated", in.ID)
			}
			seen[in.ID] = true
		}
	case OutcomeCancelled:
		if len(o.Interrupts) > 0 || len(o.PendingToolCallIDs) > 0 {
			return errors.New("a cancelled outcome carries no interrupts or pendingToolCallIds")
		}
	default:
		return fmt.Errorf("outcome type %q is not success, interrupt or cancelled", o.Type)
	}
	return nil
}

// downgrade returns the event to send for ev: RUN_STARTED gets its protocolVersion (announced
// to 1.0 clients, hidden from legacy ones), RUN_FINISHED gets its ids and, for legacy clients,
// an outcome they can parse. The caller's event is copied, never changed, in those cases.
func (s *Sequencer) downgrade(ev Event) Event {
	switch v := ev.(type) {
	case *RunStarted:
		want := v.ProtocolVersion
		if s.legacy {
			want = ""
		} else if want == "" {
			want = ProtocolVersion
		}
		if want != v.ProtocolVersion {
			c := *v
			c.ProtocolVersion = want
			return &c
		}
	case *RunFinished:
		c := *v
		if c.ThreadID == "" {
			c.ThreadID = s.threadID
		}
		if c.RunID == "" {
			c.RunID = s.runID
		}
		if s.legacy && c.Outcome != nil {
			switch c.Outcome.Type {
			case OutcomeCancelled:
				return &RunError{Base: c.Base, Code: legacyCancelledCode, Message: legacyCancelledMessage}
			case OutcomeSuccess:
				// pendingToolCallIds is fatal to 0.0.59, and a bare success is the default.
				c.Outcome = nil
			default:
				o := *c.Outcome
				o.PendingToolCallIDs = nil
				c.Outcome = &o
			}
		}
		return &c
	}
	return ev
}

// Restore applies ev to the state machine without sending it: a run continued by another
// process (a replica taking it over) rebuilds what its stream has open from the events it
// already sent, then goes on from there. Timestamps are not stamped.
func (s *Sequencer) Restore(ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev == nil {
		return fmt.Errorf("%w: nil event", ErrOrdering)
	}
	if s.state == stateDone {
		return fmt.Errorf("%w: cannot restore %s", ErrTerminated, ev.EventType())
	}
	if err := s.apply(ev); err != nil {
		return fmt.Errorf("%w: cannot restore %s: %w", ErrOrdering, ev.EventType(), err)
	}
	return nil
}

// CloseOpen closes what is open without ending the run, as Finish would: text messages,
// tool calls and steps, then the subagents for which keep returns false (with
// SUBAGENT_ERROR{code:"cancelled"}). A subagent that is kept stays open, and so does its
// parent.
func (s *Sequencer) CloseOpen(keep func(subagentRunID string) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range slices.Clone(s.messages) {
		if err := s.emitLocked(&TextMessageEnd{MessageID: m.key, SubagentRunID: m.owner}); err != nil {
			return err
		}
	}
	for _, c := range slices.Clone(s.toolCalls) {
		if err := s.emitLocked(&ToolCallEnd{ToolCallID: c.key, SubagentRunID: c.owner}); err != nil {
			return err
		}
	}
	steps := s.steps.keys()
	slices.Reverse(steps)
	for _, k := range steps {
		if err := s.emitLocked(&StepFinished{StepName: k.name, SubagentRunID: k.owner}); err != nil {
			return err
		}
	}
	kept := map[string]bool{}
	for _, sub := range s.subagents {
		if keep != nil && keep(sub.key) {
			for p := sub.key; p != ""; {
				kept[p] = true
				it, _ := s.subagents.get(p)
				p = it.owner
			}
		}
	}
	subs := s.subagents.keys()
	slices.Reverse(subs)
	for _, id := range subs {
		if kept[id] {
			continue
		}
		if err := s.emitLocked(&SubagentError{SubagentRunID: id, Code: subagentCancelledCode, Message: subagentCancelledMessage}); err != nil {
			return err
		}
	}
	return nil
}
