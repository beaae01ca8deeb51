package demoagent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Texts the agents send. Tests and the scripted demo model match on them.
const (
	travelQuestion    = "What dates would you like to travel? (e.g. 12–19 May)"
	researchFailed    = "Research failed: the source archive is offline."
	researchRejected  = "I only research technical topics."
	researchAuth      = "Please sign in to the research library."
	researchComplete  = "Research complete."
	shutdownCancelMsg = "cancelled: the agent is shutting down"
	slowSteps         = 20
)

// executor implements a2asrv.AgentExecutor for both demo kinds.
type executor struct {
	kind       string
	chunkDelay time.Duration
	slowStep   time.Duration
	rec        *Recorder
	logger     *slog.Logger

	// stop is closed by close(): running and parked executions end with a canceled
	// status, so that the SDK's goroutines and open streams finish.
	stop     chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	runs map[a2a.TaskID]*run
}

// run is the live part of an execution that Cancel and the resumer need to reach.
type run struct {
	mu        sync.Mutex
	step      int  // slow mode: the last step published
	cancelled bool // Cancel was called: publish no further step
	// resume is non-nil while the execution is parked in auth-required; the follow-up
	// message text is delivered on it (buffered, at most one send).
	resume chan string
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

func newExecutor(kind string, chunkDelay, slowStep time.Duration, rec *Recorder, logger *slog.Logger) *executor {
	return &executor{
		kind:       kind,
		chunkDelay: chunkDelay,
		slowStep:   slowStep,
		rec:        rec,
		logger:     logger,
		stop:       make(chan struct{}),
		runs:       make(map[a2a.TaskID]*run),
	}
}

// close ends every running or parked execution. It is idempotent.
func (e *executor) close() {
	e.stopOnce.Do(func() { close(e.stop) })
}

func (e *executor) register(id a2a.TaskID, parked bool) *run {
	r := &run{}
	if parked {
		r.resume = make(chan string, 1)
	}
	e.mu.Lock()
	e.runs[id] = r
	e.mu.Unlock()
	return r
}

func (e *executor) unregister(id a2a.TaskID, r *run) {
	e.mu.Lock()
	if e.runs[id] == r {
		delete(e.runs, id)
	}
	e.mu.Unlock()
}

func (e *executor) lookup(id a2a.TaskID) *run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id]
}

// isParked reports whether id names an execution waiting in auth-required.
func (e *executor) isParked(id a2a.TaskID) bool {
	r := e.lookup(id)
	return r != nil && r.resume != nil
}

// claimParked takes the resume channel of a parked execution; only one caller wins.
func (e *executor) claimParked(id a2a.TaskID) chan string {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs[id]
	if r == nil || r.resume == nil {
		return nil
	}
	ch := r.resume
	r.resume = nil
	return ch
}

// Execute implements a2asrv.AgentExecutor.
func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.logger.DebugContext(ctx, "demo agent execution", "agent", e.kind, "task_id", ec.TaskID, "continuation", ec.StoredTask != nil)
	if e.kind == kindTravel {
		return e.recorded(func(yield func(a2a.Event) bool) { e.travel(ec, yield) })
	}
	return e.recorded(func(yield func(a2a.Event) bool) { e.research(ctx, ec, yield) })
}

// Cancel implements a2asrv.AgentExecutor. For a running slow task the message names the
// step reached, and no further step is published after it.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	msg := "cancelled"
	if r := e.lookup(ec.TaskID); r != nil {
		r.mu.Lock()
		r.cancelled = true
		if r.step > 0 {
			msg = fmt.Sprintf("cancelled at step %d", r.step)
		}
		r.mu.Unlock()
	}
	return e.recorded(func(yield func(a2a.Event) bool) {
		yield(statusEvent(ec, a2a.TaskStateCanceled, msg))
	})
}

// recorded adapts a simple event producer to the SDK's iterator shape and reports every
// event to the Recorder.
func (e *executor) recorded(produce func(yield func(a2a.Event) bool)) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		produce(func(ev a2a.Event) bool {
			e.rec.recordEvent(ev)
			return yield(ev, nil)
		})
	}
}

func (e *executor) travel(ec *a2asrv.ExecutorContext, yield func(a2a.Event) bool) {
	prompt := messageText(ec.Message)
	if ec.StoredTask != nil {
		// The answer to the dates question. A continuation never emits a new Task.
		request := firstUserText(ec.StoredTask.History)
		if request == "" {
			request = "your trip"
		}
		e.book(ec, request, trimSentence(prompt), yield)
		return
	}
	if !yield(a2a.NewSubmittedTask(ec, ec.Message)) {
		return
	}
	if dates := findDates(prompt); dates != "" {
		e.book(ec, trimSentence(prompt), dates, yield)
		return
	}
	yield(statusEvent(ec, a2a.TaskStateInputRequired, travelQuestion))
}

func (e *executor) book(ec *a2asrv.ExecutorContext, request, dates string, yield func(a2a.Event) bool) {
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
		return
	}
	art := a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("Booked: %s for %s.", request, dates)))
	art.Artifact.Name = "Itinerary"
	art.LastChunk = true
	if !yield(art) {
		return
	}
	yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil))
}

// researchMode picks the behaviour from the prompt; the order settles prompts that hold
// several keywords.
func researchMode(prompt string) string {
	p := strings.ToLower(prompt)
	for _, k := range []string{"fail", "reject", "auth", "slow", "message"} {
		if strings.Contains(p, k) {
			return k
		}
	}
	return "report"
}

func (e *executor) research(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event) bool) {
	prompt := messageText(ec.Message)
	if ec.StoredTask != nil {
		// Only reachable when a parked auth-required execution was lost (server closed):
		// treat the follow-up as the sign-in and research the original request.
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
			return
		}
		e.report(ctx, ec, firstUserText(ec.StoredTask.History), yield)
		return
	}
	mode := researchMode(prompt)
	if mode == "message" {
		reply := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("echo: "+prompt))
		reply.ContextID = ec.ContextID
		yield(reply)
		return
	}
	if !yield(a2a.NewSubmittedTask(ec, ec.Message)) {
		return
	}
	switch mode {
	case "reject":
		yield(statusEvent(ec, a2a.TaskStateRejected, researchRejected))
	case "fail":
		if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
			yield(statusEvent(ec, a2a.TaskStateFailed, researchFailed))
		}
	case "auth":
		e.awaitSignIn(ctx, ec, prompt, yield)
	case "slow":
		e.slow(ctx, ec, yield)
	default:
		if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
			e.report(ctx, ec, prompt, yield)
		}
	}
}

// awaitSignIn parks the execution in auth-required until the resumer delivers a
// follow-up message, the task is cancelled, or the server closes.
func (e *executor) awaitSignIn(ctx context.Context, ec *a2asrv.ExecutorContext, prompt string, yield func(a2a.Event) bool) {
	r := e.register(ec.TaskID, true)
	defer e.unregister(ec.TaskID, r)
	resume := r.resume // claimParked clears the field under e.mu; keep our own copy
	if !yield(statusEvent(ec, a2a.TaskStateAuthRequired, researchAuth)) {
		return
	}
	select {
	case <-ctx.Done(): // CancelTask was applied
	case <-e.stop:
		yield(statusEvent(ec, a2a.TaskStateCanceled, shutdownCancelMsg))
	case <-resume:
		if yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
			e.report(ctx, ec, prompt, yield)
		}
	}
}

func (e *executor) slow(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event) bool) {
	r := e.register(ec.TaskID, false)
	defer e.unregister(ec.TaskID, r)
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil)) {
		return
	}
	var artifactID a2a.ArtifactID
	for i := 1; i <= slowSteps; i++ {
		r.mu.Lock()
		if r.cancelled {
			r.mu.Unlock()
			return // Cancel has published the canceled status
		}
		r.step = i
		r.mu.Unlock()

		ev := chunkEvent(ec, &artifactID, "Progress", fmt.Sprintf("step %d ", i), i == slowSteps)
		if !yield(ev) {
			return
		}
		switch wait(ctx, e.stop, e.slowStep) {
		case waitCancelled:
			return
		case waitStopped:
			yield(statusEvent(ec, a2a.TaskStateCanceled, fmt.Sprintf("cancelled at step %d", i)))
			return
		}
	}
	yield(statusEvent(ec, a2a.TaskStateCompleted, researchComplete))
}

// report streams the "Report" artifact in chunks and completes the task.
func (e *executor) report(ctx context.Context, ec *a2asrv.ExecutorContext, topic string, yield func(a2a.Event) bool) {
	topic = trimSentence(topic)
	if topic == "" {
		topic = "the requested topic"
	}
	chunks := []string{
		fmt.Sprintf("Report: %s\n", topic),
		fmt.Sprintf("Summary: %s is well covered by the sources consulted.\n", topic),
		"Finding 1: the core ideas are stable and widely documented.\n",
		"Finding 2: recent work refines them rather than replacing them.\n",
		"Conclusion: the evidence is consistent; no open contradictions were found.\n",
	}
	var artifactID a2a.ArtifactID
	for i, c := range chunks {
		if i > 0 {
			switch wait(ctx, e.stop, e.chunkDelay) {
			case waitCancelled:
				return
			case waitStopped:
				yield(statusEvent(ec, a2a.TaskStateCanceled, shutdownCancelMsg))
				return
			}
		}
		if !yield(chunkEvent(ec, &artifactID, "Report", c, i == len(chunks)-1)) {
			return
		}
	}
	yield(statusEvent(ec, a2a.TaskStateCompleted, researchComplete))
}

// chunkEvent builds one artifact chunk: the first creates the artifact, the others append.
func chunkEvent(ec *a2asrv.ExecutorContext, id *a2a.ArtifactID, name, text string, last bool) *a2a.TaskArtifactUpdateEvent {
	var ev *a2a.TaskArtifactUpdateEvent
	if *id == "" {
		ev = a2a.NewArtifactEvent(ec, a2a.NewTextPart(text))
		*id = ev.Artifact.ID
	} else {
		ev = a2a.NewArtifactUpdateEvent(ec, *id, a2a.NewTextPart(text))
	}
	ev.Artifact.Name = name
	ev.LastChunk = last
	return ev
}

type waitResult int

const (
	waitElapsed waitResult = iota
	waitCancelled
	waitStopped
)

func wait(ctx context.Context, stop <-chan struct{}, d time.Duration) waitResult {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return waitElapsed
	case <-ctx.Done():
		return waitCancelled
	case <-stop:
		return waitStopped
	}
}

func statusEvent(ec *a2asrv.ExecutorContext, state a2a.TaskState, text string) *a2a.TaskStatusUpdateEvent {
	return a2a.NewStatusUpdateEvent(ec, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text)))
}

// messageText joins the text parts of m.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if t := strings.TrimSpace(p.Text()); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// firstUserText returns the text of the first user message in a task's history: the
// original request.
func firstUserText(history []*a2a.Message) string {
	for _, m := range history {
		if m != nil && m.Role == a2a.MessageRoleUser {
			return trimSentence(messageText(m))
		}
	}
	return ""
}

// trimSentence drops surrounding space and final punctuation, so the text can be embedded
// in a sentence of ours.
func trimSentence(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), ".!?;, ")
}

var months = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}

// findDates returns the date phrase of s: from the first token holding a digit, extended
// over following digit tokens, month names and range words ("12–19 May", "3 to 9 June").
// It returns "" when s holds no digit.
func findDates(s string) string {
	tokens := strings.Fields(s)
	start := -1
	for i, t := range tokens {
		if strings.IndexFunc(t, unicode.IsDigit) >= 0 {
			start = i
			break
		}
	}
	if start < 0 {
		return ""
	}
	end := start + 1 // exclusive
	for j := start + 1; j < len(tokens); j++ {
		w := strings.ToLower(strings.Trim(tokens[j], ".,;!?()"))
		switch {
		case strings.IndexFunc(w, unicode.IsDigit) >= 0, isMonth(w):
			end = j + 1
		case w == "-" || w == "–" || w == "to" || w == "until" || w == "and":
			// a range word counts only when a date token follows it
		default:
			j = len(tokens)
		}
	}
	return strings.Trim(strings.Join(tokens[start:end], " "), ".,;!?()")
}

func isMonth(w string) bool {
	if len(w) < 3 {
		return false
	}
	for _, m := range months {
		if strings.HasPrefix(w, m) {
			return true
		}
	}
	return false
}
