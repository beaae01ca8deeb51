package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/cancel"
	"github.com/baton-dev/baton/failure"
	"github.com/baton-dev/baton/history"
	"github.com/baton-dev/baton/llm"
	"github.com/baton-dev/baton/store"
	"github.com/baton-dev/baton/subagent"
)

// What the model is sent of a long thread (design/history.md): package history decides
// (the cut, the window, where to cut the conversation); here the run asks the model for the
// summary, journals the step, shows it and keeps it.

// ActivityCompaction is the activityType of the ACTIVITY_SNAPSHOT that shows a compaction
// (DESIGN §7); the thread keeps it as an activity message whose content is a
// history.Record plus figures for people.
const ActivityCompaction = history.Activity

// errNothingToCompact: every older turn is kept (recent, or pinned as open work).
var errNothingToCompact = errors.New("nothing to compact: every turn is recent or holds open work")

// errEmptySummary: the model answered the summary request without text.
var errEmptySummary = errors.New("the model gave an empty summary")

// What a run sends the model of its history is bounded by the functions below, over the
// run: the model's copy of tool results (modelCopy, modelRequest), compaction
// (compactBefore, compactAtStart, compactHistory) and the recovery of context_overflow
// (recoverOverflow).

// maxSummaryBytes bounds the summary the model may write (it is asked for about 400
// words); a longer answer is cut.
const maxSummaryBytes = 16 << 10

// modelRequest is the request of a turn: the system prompt, conv as the model reads it
// (tool results cut to history.max_tool_result_bytes), the lessons addendum and the tools.
func modelRequest(r *Run, system, addendum string, tools *toolset, conv []llm.Message) *llm.Request {
	msgs := make([]llm.Message, 0, len(conv)+1)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	msgs = append(msgs, r.e.cfg.History.View(conv)...)
	return &llm.Request{Messages: failure.WithAddendum(msgs, addendum), Tools: tools.llm}
}

// modelCopy is a tool result as the run's history keeps it for the model: cut. The whole
// text is in the TOOL_CALL_RESULT event, the event log and the thread.
func modelCopy(r *Run, text string) string {
	return history.Cut(text, r.e.cfg.History.MaxToolResultBytes)
}

// compactBefore compacts conv when the request it makes would pass history.compact_at of
// the model's context window. A compaction that fails leaves conv as it was: the request
// is sent, and a refusal as too long is recovered as context_overflow.
func compactBefore(ctx context.Context, r *Run, req *llm.Request, conv []llm.Message) ([]llm.Message, bool) {
	opts := historyOptions(r)
	if history.RequestTokens(req) <= opts.Budget() {
		return conv, false
	}
	out, err := compactHistory(ctx, r, conv, "compact_at")
	if err != nil {
		if !errors.Is(err, errNothingToCompact) && !r.cancelling(ctx) {
			r.log.Warn("compaction failed; the request is sent as it is", append([]any{"err", err}, llm.LogAttrs(err)...)...)
		}
		return conv, false
	}
	return out, true
}

// compactAtStart compacts the history a run starts from (the thread's, rebuilt from the
// store, or a checkpoint's) when its first request would pass compact_at, before the run's
// first conversation checkpoint: that checkpoint then holds the compacted history, not a
// copy of the whole thread. A compaction that fails leaves conv as it is (the first turn
// tries again). compacted: the compaction took the checkpoint already.
func compactAtStart(ctx context.Context, r *Run, system string, tools *toolset, conv []llm.Message) (out []llm.Message, compacted bool) {
	return compactBefore(ctx, r, modelRequest(r, system, "", tools, conv), conv)
}

// recoverOverflow is the recovery of context_overflow (DESIGN §6) after a turn failed
// with err: when the policy retries, the history is compacted and the turn asked once more;
// a request still too long goes to the first fallback model with a larger window
// (largerWindow), which gets a compaction and a retry of its own; otherwise the policy's
// decision (handoff, with an explanation) ends the run as for any decided failure. Any
// other error is returned as it is.
func recoverOverflow(ctx context.Context, r *Run, err error, conv []llm.Message, build func([]llm.Message) *llm.Request) (turnResult, []llm.Message, error) {
	for {
		var de *decidedError
		if !errors.As(err, &de) || de.f.Kind != failure.KindContextOverflow {
			return turnResult{}, conv, err
		}
		if de.d.Action == failure.ActionRetry {
			out, cerr := compactHistory(ctx, r, conv, string(failure.KindContextOverflow))
			if cerr != nil {
				if r.cancelling(ctx) {
					return turnResult{}, conv, ctx.Err()
				}
				if !errors.Is(cerr, errNothingToCompact) {
					r.log.Warn("compaction after context_overflow failed", "err", cerr)
				}
				// Nothing shorter to send: the policy decides again (its budget is spent).
				d := r.decide(de.f)
				err = &decidedError{d: d, f: de.f, err: de.err}
			} else {
				conv = out
				turn, terr := r.modelTurn(ctx, build(conv))
				if terr == nil {
					return turn, conv, nil
				}
				err = terr
				if !errors.As(err, &de) || de.f.Kind != failure.KindContextOverflow {
					return turnResult{}, conv, err
				}
			}
		}
		if !largerWindow(ctx, r, de.f) {
			return turnResult{}, conv, err
		}
		turn, terr := r.modelTurn(ctx, build(conv))
		if terr == nil {
			return turn, conv, nil
		}
		err = terr
	}
}

// largerWindow switches the run to the first model of the fallback chain after the one it
// is on whose context window is larger (llm.fallback: "then only larger windows", DESIGN
// §4), after that model refused the request as too long even compacted. The switch is a
// model_fallback journal step, as for transient_provider, and the span's
// gen_ai.request.model; the run stays on the larger model, which gets a context_overflow
// retry of its own. It reports whether it switched: false without a chain or a larger
// window in it, and the run ends with the policy's handoff.
func largerWindow(ctx context.Context, r *Run, f failure.Failure) bool {
	c, ok := r.e.cfg.Model.(fallbackChain)
	if !ok {
		return false
	}
	cur := historyOptions(r).Window
	next := -1
	for i := r.sp.link + 1; i < c.Len(); i++ {
		if c.Link(i).Window > cur {
			next = i
			break
		}
	}
	if next < 0 {
		return false
	}
	from, to := c.Link(r.sp.link), c.Link(next)
	r.sp.link = next
	r.log.Warn("model fallback to a larger context window", "from", from.Name, "to", to.Name, "window", to.Window)
	detail, _ := json.Marshal(map[string]any{"from": from.Name, "to": to.Name, "provider": to.Provider,
		"failureKind": string(f.Kind), "fromWindow": cur, "toWindow": to.Window})
	r.dur.step(store.StepModelFallback, to.Name, "", store.StepEnd{Outcome: store.StepOK, FailureKind: string(f.Kind), Detail: string(detail)})
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("gen_ai.request.model", to.Name), attribute.String("gen_ai.provider.name", to.Provider),
		attribute.String("baton.fallback.from", from.Name))
	span.AddEvent("baton.model_fallback", trace.WithAttributes(attribute.String("from", from.Name), attribute.String("to", to.Name)))
	r.fs.Recovered(failure.KindContextOverflow, "")
	return true
}

// historyOptions are the history options of the model the run is on: the configured ones, with
// the window of the fallback model the run switched to, when that is known.
func historyOptions(r *Run) history.Options {
	o := r.e.cfg.History
	if c, ok := r.e.cfg.Model.(fallbackChain); ok && r.sp.link > 0 {
		if w := c.Link(r.sp.link).Window; w > 0 {
			o.Window = w
		}
	}
	return o
}

// openWork is what compaction never summarises away: the thread's open A2A tasks (the
// model may still continue them by id).
type openWork struct {
	taskIDs []string
	lines   []string
}

// openWorkOf lists the thread's tasks that are not finished.
func openWorkOf(r *Run) openWork {
	var w openWork
	for id, rec := range r.e.tasks.records(r.ThreadID) {
		if subagent.State(rec.State).Terminal() {
			continue
		}
		w.taskIDs = append(w.taskIDs, id)
		w.lines = append(w.lines, fmt.Sprintf("agent %s: %s (%s)", rec.Agent, bridge.TaskArg(id), rec.State))
	}
	return w
}

// pin reports whether m mentions an open task: its turn is kept verbatim.
func (w openWork) pin(m llm.Message) bool {
	for _, id := range w.taskIDs {
		if strings.Contains(m.Content, id) || strings.Contains(m.Content, bridge.TaskArg(id)) {
			return true
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Arguments, id) {
				return true
			}
		}
	}
	return false
}

// compactHistory summarises the older turns of conv (all but history.keep_recent_turns, and
// those holding the user's last request or an open task) into one message, and returns
// the compacted conversation. The step is journaled (intent, then what it replaced), shown
// as ACTIVITY_SNAPSHOT{activityType:"compaction"} (which the thread keeps, marked as a
// summary, beside every message it replaced), and the run's checkpoint takes the compacted
// history in one write: a replica that takes the run over, or a kill at any point, finds
// either the old history or the summary, never half.
func compactHistory(ctx context.Context, r *Run, conv []llm.Message, why string) ([]llm.Message, error) {
	opts := historyOptions(r)
	work := openWorkOf(r)
	split, ok := history.Plan(conv, opts.KeepRecentTurns, work.pin)
	if !ok {
		return conv, errNothingToCompact
	}
	before := history.MessagesTokens(opts.View(conv))
	step, _ := r.dur.intent(store.StepCompaction, "model", "", 1, fmt.Sprintf("%s: summarising %d of %d messages (~%d tokens)", why, len(split.Older), len(conv), before))
	summary, err := summarise(ctx, r, split.Older)
	if err != nil {
		outcome := store.StepError
		if r.cancelling(ctx) {
			outcome = "cancelled"
		}
		step.End(store.StepEnd{Outcome: outcome, Detail: errString(err)})
		return conv, err
	}
	msg := history.SummaryMessage(summary, work.lines)
	out := split.Compacted(msg)
	after := history.MessagesTokens(opts.View(out))
	r.emit(&agui.ActivitySnapshot{MessageID: newID("compaction"), ActivityType: ActivityCompaction, Content: map[string]any{
		"summary":          msg.Content,
		"replaces":         split.OlderKeys,
		"keeps":            split.KeptKeys,
		"from":             keptFrom(r, conv, split),
		"replacedMessages": len(split.Older),
		"keptMessages":     len(split.Pinned) + len(split.Recent),
		"tokensBefore":     before,
		"tokensAfter":      after,
		"reason":           why,
	}})
	r.dur.noteCheckpoint(out)
	step.End(store.StepEnd{Outcome: store.StepOK, Detail: replacedDetail(split, before, after)})
	return out, nil
}

// keptFrom is the id of the earliest message a compaction of conv keeps that the thread
// holds already (history.Record.From): a later run reads the thread from there on. "" when
// it keeps none (only the run's own messages, stored when it ends).
func keptFrom(r *Run, conv []llm.Message, s history.Split) string {
	kept := make(map[string]bool, len(s.KeptKeys))
	for _, k := range s.KeptKeys {
		kept[k] = true
	}
	keys := history.Keys(conv)
	return r.dur.stored.earliest(conv, func(i int) bool { return kept[keys[i]] })
}

// replacedDetail says in the journal what a compaction replaced.
func replacedDetail(s history.Split, before, after int) string {
	var users, assistants, results, summaries int
	for _, m := range s.Older {
		switch {
		case history.IsSummary(m):
			summaries++
		case m.Role == llm.RoleUser:
			users++
		case m.Role == llm.RoleTool:
			results++
		default:
			assistants++
		}
	}
	return fmt.Sprintf("replaced %d messages (%d user, %d assistant, %d tool results, %d earlier summaries) by one summary; kept %d verbatim; ~%d -> ~%d tokens",
		len(s.Older), users, assistants, results, summaries, len(s.Pinned)+len(s.Recent), before, after)
}

// summarise asks the model for the summary of older, in as many requests as the
// transcript needs to fit the window (each folding the summary so far).
func summarise(ctx context.Context, r *Run, older []llm.Message) (string, error) {
	opts := historyOptions(r)
	soFar := ""
	for _, part := range history.SummaryRequests(older, opts.Budget(), opts.MaxToolResultBytes) {
		text, err := summaryTurn(ctx, r, history.FoldRequest(soFar, part))
		if err != nil {
			return "", err
		}
		soFar = text
	}
	if strings.TrimSpace(soFar) == "" {
		return "", errEmptySummary
	}
	return soFar, nil
}

// summaryTurn makes one summary request: its text is collected (nothing is streamed to
// the client), it is cancelled with the run, and it goes through the run's spend meter
// like any model call: on the model the run is on, counted against the run's budget and
// the principal's day, exported, and journaled as a model_call step (target "summary")
// with its usage.
func summaryTurn(ctx context.Context, r *Run, req *llm.Request) (string, error) {
	if err := r.dur.mayAct(ctx); err != nil {
		return "", err
	}
	ctx, stop := r.withRunCancel(ctx)
	defer stop()
	item := r.scope.Track(cancel.KindLLM, "model")
	item.Arm("", func(context.Context, string) error { stop(); return nil })
	defer item.Release()
	step, _ := r.dur.intent(store.StepModelCall, "summary", "", 1, "")
	var b strings.Builder
	var completion *llm.Completion
	var err error
	for d, derr := range runModel(r).Stream(ctx, req) {
		if derr != nil {
			err = derr
			break
		}
		if b.Len() < maxSummaryBytes {
			b.WriteString(d.Text)
		}
		if d.Done != nil {
			completion = d.Done
		}
	}
	err = attemptErr(ctx, err, completion != nil)
	end := store.StepEnd{Outcome: store.StepOK}
	switch {
	case err != nil && r.cancelling(ctx):
		end.Outcome = "cancelled"
	case err != nil:
		end.Outcome = store.StepError
	}
	end.Detail = accountCall(ctx, r, completion)
	step.End(end)
	if err != nil {
		return "", err
	}
	return history.Cut(b.String(), maxSummaryBytes), nil
}

// compactionRecords are the compactions the thread's messages msgs store (its compaction
// activity messages), oldest first, and the index in msgs of the latest (-1: none).
func compactionRecords(msgs []agui.Message) (recs []history.Record, latest int) {
	latest = -1
	for i, m := range msgs {
		if m.Role != agui.RoleActivity || m.ActivityType != ActivityCompaction {
			continue
		}
		var rec history.Record
		if json.Unmarshal(m.Content, &rec) == nil && history.IsSummary(llm.Message{Role: llm.RoleUser, Content: rec.Summary}) {
			recs = append(recs, rec)
			latest = i
		}
	}
	return recs, latest
}

// threadView is the model's history at a run's start: the input's messages (the thread's,
// read from its latest compaction on, then the client's) as the model reads them, with
// the thread's compactions replayed: the latest alone when the messages start at the
// earliest it kept (history.ApplyLatest), else every one they hold (history.Apply). A
// history that turns out not to be the thread the latest compaction was made from is read
// again whole. The stored messages are noted (Run.dur.stored), and the history read from
// the store loses its text as it is converted.
func threadView(ctx context.Context, r *Run) []llm.Message {
	msgs := r.in.Messages
	recs, at := compactionRecords(msgs)
	conv, region := convertHistory(msgs, r.dur.prepended, &r.dur.stored, at)
	if len(recs) == 0 {
		return conv
	}
	if rec := recs[len(recs)-1]; rec.From != "" && msgs[0].ID == rec.From {
		if out, ok := history.ApplyLatest(conv, rec, region); ok {
			return out
		}
		if r.dur.prepended > 0 {
			whole, err := r.e.records.ThreadHistory(ctx, r.ThreadID)
			if err == nil {
				r.log.Info("the thread's history from its latest compaction is not the one it was made from; replaying every compaction on the whole thread")
				return wholeThreadView(r, whole)
			}
			r.log.Warn("store: load the whole thread; the history read from its latest compaction is used", "err", err)
		}
	}
	return history.Apply(conv, recs)
}

// wholeThreadView is threadView's history from the thread's whole history whole, then the
// input's own messages (those whole does not hold, which its start saved).
func wholeThreadView(r *Run, whole []agui.Message) []llm.Message {
	own := r.in.Messages[r.dur.prepended:]
	ids := make(map[string]bool, len(own))
	for _, m := range own {
		ids[m.ID] = true
	}
	all := make([]agui.Message, 0, len(whole)+len(own))
	for _, m := range whole {
		if m.ID == "" || !ids[m.ID] {
			all = append(all, m)
		}
	}
	n := len(all)
	all = append(all, own...)
	recs, _ := compactionRecords(all)
	conv, _ := convertHistory(all, n, &r.dur.stored, -1)
	return history.Apply(conv, recs)
}
