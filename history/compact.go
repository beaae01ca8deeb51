package history

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/bridge"
	"github.com/baton-dev/baton/llm"
)

// Options are the history section (DESIGN §4), with the model's context window resolved.
type Options struct {
	// Window is the model's context window in tokens (Window).
	Window int
	// CompactAt is the share of Window a request may take before older turns are
	// summarised.
	CompactAt float64
	// KeepRecentTurns are the latest turns never summarised.
	KeepRecentTurns int
	// MaxToolResultBytes bounds a tool result as the model reads it (Cut).
	MaxToolResultBytes int
}

// Defaults of Options (DESIGN §4).
const (
	DefaultCompactAt       = 0.8
	DefaultKeepRecentTurns = 4
)

// WithDefaults fills the zero fields: DefaultWindow, DefaultCompactAt,
// DefaultKeepRecentTurns (a negative KeepRecentTurns means none, and stays negative, so that
// WithDefaults may be applied again), DefaultMaxToolResultBytes.
func (o Options) WithDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.CompactAt <= 0 || o.CompactAt > 1 {
		o.CompactAt = DefaultCompactAt
	}
	if o.KeepRecentTurns == 0 {
		o.KeepRecentTurns = DefaultKeepRecentTurns
	}
	if o.MaxToolResultBytes <= 0 {
		o.MaxToolResultBytes = DefaultMaxToolResultBytes
	}
	return o
}

// Budget is how many tokens a request may take before it is compacted: CompactAt of
// Window.
func (o Options) Budget() int { return int(float64(o.Window) * o.CompactAt) }

// View is what the model is sent of msgs: every tool result cut (Cut).
func (o Options) View(msgs []llm.Message) []llm.Message {
	return CutToolResults(msgs, o.MaxToolResultBytes)
}

// SummaryPrefix starts the message that stands for the turns a compaction summarised.
const SummaryPrefix = "Summary of the earlier conversation (written by the coordinator when the conversation grew too long for the model; the thread keeps every message):"

// IsSummary reports whether m is a compaction's summary.
func IsSummary(m llm.Message) bool {
	return m.Role == llm.RoleUser && strings.HasPrefix(m.Content, SummaryPrefix)
}

// SummaryMessage is the message that replaces the summarised turns: SummaryPrefix, the
// model's summary (escaped as outside text: it retells tool results, and no line of it may
// pass for a tag), and openTasks, one line each, which compaction never drops (the tasks
// the model may still continue, rendered by the caller).
func SummaryMessage(summary string, openTasks []string) llm.Message {
	var b strings.Builder
	b.WriteString(SummaryPrefix)
	b.WriteString("\n")
	b.WriteString(bridge.UntrustedN(strings.TrimSpace(summary), 0))
	if len(openTasks) > 0 {
		b.WriteString("\n\nOpen tasks (still usable: continue one by calling its agent with its task_id):")
		for _, t := range openTasks {
			b.WriteString("\n- ")
			b.WriteString(t)
		}
	}
	return llm.Message{Role: llm.RoleUser, Content: b.String()}
}

// Split is a conversation cut for compaction.
type Split struct {
	// Older are the messages to summarise, in order.
	Older []llm.Message
	// OlderKeys are the keys (Keys) of Older: what the compaction replaces.
	OlderKeys []string
	// KeptKeys are the keys (Keys) of Pinned and Recent, in order: what it keeps.
	KeptKeys []string
	// Pinned are older messages kept verbatim (the user's last request, turns holding an
	// open task or interrupt), in order.
	Pinned []llm.Message
	// Recent are the last KeepRecentTurns turns, kept verbatim.
	Recent []llm.Message
}

// Compacted is the conversation after the compaction: summary, then the pinned messages,
// then the recent turns.
func (s Split) Compacted(summary llm.Message) []llm.Message {
	out := make([]llm.Message, 0, 1+len(s.Pinned)+len(s.Recent))
	out = append(out, summary)
	out = append(out, s.Pinned...)
	return append(out, s.Recent...)
}

// turns cuts conv into turns: an assistant message with its tool calls' results, or any
// other message alone. A turn is never split: a tool result is never sent without its call.
func turns(conv []llm.Message) [][2]int {
	var out [][2]int
	for i := 0; i < len(conv); {
		j := i + 1
		if conv[i].Role == llm.RoleAssistant && len(conv[i].ToolCalls) > 0 {
			for j < len(conv) && conv[j].Role == llm.RoleTool {
				j++
			}
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// Plan cuts conv (the conversation without the system prompt) for compaction: the last
// keepRecent turns are kept, and so are, verbatim and in order, the older turns that hold
// the user's last request or a message pin reports (an open task, an open interrupt's
// call). The rest is to be summarised; earlier summaries are folded into the new one. ok is
// false when nothing is left to summarise.
func Plan(conv []llm.Message, keepRecent int, pin func(llm.Message) bool) (s Split, ok bool) {
	ts := turns(conv)
	if keepRecent < 0 {
		keepRecent = 0
	}
	if len(ts) <= keepRecent {
		return Split{}, false
	}
	lastUser := -1
	for i := len(conv) - 1; i >= 0; i-- {
		if conv[i].Role == llm.RoleUser && !IsSummary(conv[i]) {
			lastUser = i
			break
		}
	}
	keys := Keys(conv)
	cut := len(ts) - keepRecent
	for _, t := range ts[:cut] {
		keep := false
		for i := t[0]; i < t[1] && !keep; i++ {
			keep = i == lastUser || (pin != nil && pin(conv[i]))
		}
		if keep {
			s.Pinned = append(s.Pinned, conv[t[0]:t[1]]...)
			s.KeptKeys = append(s.KeptKeys, keys[t[0]:t[1]]...)
			continue
		}
		s.Older = append(s.Older, conv[t[0]:t[1]]...)
		s.OlderKeys = append(s.OlderKeys, keys[t[0]:t[1]]...)
	}
	if cut < len(ts) {
		s.Recent = conv[ts[cut][0]:]
		s.KeptKeys = append(s.KeptKeys, keys[ts[cut][0]:]...)
	}
	// Summarising only an earlier summary would gain nothing.
	if len(s.Older) == 0 || (len(s.Older) == 1 && IsSummary(s.Older[0])) {
		return Split{}, false
	}
	return s, true
}

// Keys names each message of conv stably across runs, so that a compaction stored with the
// thread can be applied again to the messages a later run rebuilds from it (Apply): a tool
// result by its call id, an assistant message with calls by its first call's id, any other
// message by its role, a hash of its text and how many messages before it had the same.
func Keys(conv []llm.Message) []string {
	return numbered(conv, baseKeys(conv))
}

// baseKeys are the keys of conv's messages without their occurrence numbers (baseKey).
func baseKeys(conv []llm.Message) []string {
	out := make([]string, len(conv))
	for i, m := range conv {
		out[i] = baseKey(m)
	}
	return out
}

// baseKey is m's key without its occurrence number: the part that depends on m alone,
// and the only part that reads its text (a thread's messages may be megabytes each, so
// Apply computes it once per message, not once per compaction it replays).
func baseKey(m llm.Message) string {
	switch {
	case m.Role == llm.RoleTool:
		return "t:" + m.ToolCallID
	case len(m.ToolCalls) > 0:
		return "c:" + m.ToolCalls[0].ID
	}
	return string(m.Role) + ":" + textHash(m.Content)
}

// textHash is the start of text's SHA-256, in hex. The text goes through a small buffer:
// converting it to a byte slice whole would copy it.
func textHash(text string) string {
	h := sha256.New()
	var buf [4096]byte
	for len(text) > 0 {
		n := copy(buf[:], text)
		h.Write(buf[:n])
		text = text[n:]
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:12])
}

// numbered completes base, the base keys of conv, with the occurrence numbers of the
// messages keyed by their text.
func numbered(conv []llm.Message, base []string) []string {
	out := make([]string, len(conv))
	seen := map[string]int{}
	for i, m := range conv {
		if m.Role == llm.RoleTool || len(m.ToolCalls) > 0 {
			out[i] = base[i]
			continue
		}
		seen[base[i]]++
		out[i] = base[i] + "#" + strconv.Itoa(seen[base[i]])
	}
	return out
}

// Record is a compaction as the thread stores it (the content of its compaction activity
// message): the summary message's text and the keys (Keys) of the messages it replaces.
type Record struct {
	Summary  string   `json:"summary"`
	Replaces []string `json:"replaces"`
	// Keeps are the keys of the messages it kept verbatim (pinned and recent), and From
	// the id of the earliest of them that the thread held when it was made: a later run
	// reads the thread from From on (ApplyLatest), not whole. Both are absent from records
	// written before they were, and From when no kept message was stored yet.
	Keeps []string `json:"keeps,omitempty"`
	From  string   `json:"from,omitempty"`
}

// Activity is the activityType of the thread's message that stores a compaction (its
// content is a Record).
const Activity = "compaction"

// Apply replays the thread's compactions, oldest first, on conv (the thread's messages as
// the model would read them): each one's replaced messages are taken out and its summary
// put where the first of them was. A record none of whose messages is in conv changes
// nothing (the client sent another history).
func Apply(conv []llm.Message, recs []Record) []llm.Message {
	var base []string
	for _, rec := range recs {
		if rec.Summary == "" || len(rec.Replaces) == 0 {
			continue
		}
		if base == nil {
			base = baseKeys(conv)
		}
		drop := make(map[string]bool, len(rec.Replaces))
		for _, k := range rec.Replaces {
			drop[k] = true
		}
		keys := numbered(conv, base)
		out := make([]llm.Message, 0, len(conv))
		outBase := make([]string, 0, len(conv))
		placed := false
		for i, m := range conv {
			if !drop[keys[i]] {
				out = append(out, m)
				outBase = append(outBase, base[i])
				continue
			}
			if !placed {
				s := llm.Message{Role: llm.RoleUser, Content: rec.Summary}
				out = append(out, s)
				outBase = append(outBase, baseKey(s))
				placed = true
			}
		}
		conv, base = out, outBase
	}
	return conv
}

// ApplyLatest is Apply of the thread's latest compaction rec alone, on conv: the thread's
// messages as the model would read them from rec.From on (the earliest message rec kept),
// of which the first region messages keyed by their text (neither tool results nor calls)
// are those the thread held before rec. The summary goes first, as in the conversation
// the compaction made; then every message of conv rec did not replace. The messages
// before From, which rec replaced, are never read: the occurrence numbers of the keys are
// taken on from the record (each text key's numbers 1..n are its replaced and kept
// messages, those in conv being the last). ok is false when conv is not the thread rec
// was made from (a kept message missing, or an earlier number not replaced): the caller
// then replays every compaction on the whole thread (Apply).
func ApplyLatest(conv []llm.Message, rec Record, region int) (_ []llm.Message, ok bool) {
	if rec.Summary == "" || len(rec.Replaces) == 0 || rec.From == "" {
		return nil, false
	}
	drop := make(map[string]bool, len(rec.Replaces))
	total := map[string]int{}
	for _, k := range rec.Replaces {
		drop[k] = true
		if b, _, numbered := splitKey(k); numbered {
			total[b]++
		}
	}
	for _, k := range rec.Keeps {
		if b, _, numbered := splitKey(k); numbered {
			total[b]++
		}
	}
	base := baseKeys(conv)
	// How many of each text key's messages are in conv before the record: the last ones.
	inRegion := map[string]int{}
	n := 0
	for i, m := range conv {
		if m.Role == llm.RoleTool || len(m.ToolCalls) > 0 {
			continue
		}
		if n++; n > region {
			break
		}
		inRegion[base[i]]++
	}
	for b, k := range inRegion {
		if k > total[b] {
			return nil, false
		}
		for j := 1; j <= total[b]-k; j++ {
			if !drop[b+"#"+strconv.Itoa(j)] {
				return nil, false
			}
		}
	}
	seen := map[string]int{}
	found := map[string]bool{}
	out := make([]llm.Message, 0, len(conv)+1)
	out = append(out, llm.Message{Role: llm.RoleUser, Content: rec.Summary})
	for i, m := range conv {
		b, key := base[i], base[i]
		if m.Role != llm.RoleTool && len(m.ToolCalls) == 0 {
			seen[b]++
			key = b + "#" + strconv.Itoa(total[b]-inRegion[b]+seen[b])
		}
		if drop[key] {
			continue
		}
		found[key] = true
		out = append(out, m)
	}
	for _, k := range rec.Keeps {
		if !found[k] {
			return nil, false
		}
	}
	return out, true
}

// splitKey cuts a key (Keys) into its base key and occurrence number; numbered is false
// for the keys of tool results and calls, which have none.
func splitKey(k string) (base string, n int, numbered bool) {
	i := strings.LastIndexByte(k, '#')
	if strings.HasPrefix(k, "t:") || strings.HasPrefix(k, "c:") || i < 0 {
		return k, 0, false
	}
	n, err := strconv.Atoi(k[i+1:])
	if err != nil {
		return k, 0, false
	}
	return k[:i], n, true
}
