package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"

	"github.com/baton-dev/baton/agui"
	"github.com/baton-dev/baton/durable"
	"github.com/baton-dev/baton/llm"
)

// A run's checkpoint names the messages of its history that the thread keeps instead of
// copying them (design/history.md): the user's requests, the turns of earlier runs, each
// a megabyte perhaps, are in the thread already, and a checkpoint is replaced many times
// per run (PostgreSQL keeps every replaced version until a vacuum). Inline are only the
// run's own messages (stored when it ends) and the summaries.

// storedMessages are the thread's stored messages a run's history holds, by a hash of
// each as the model reads it: a message of the history whose hash is here is that stored
// message, converted (fromAGUI) the same way. Messages of the same text (every "ok") share
// a hash: each hash keeps its messages' ids in the thread's order.
type storedMessages struct {
	// few holds the hashes while there are at most maxFewStored of them, ids once there
	// are more: most threads are short, and a map's first group (a third of a kilobyte)
	// would be held by every open run of one.
	few []storedHash
	ids map[storedKey][]storedID
	n   int
}

// storedSeed seeds the hashes of storedMessages: one per process, not one per run, which
// would make every open run's Run a size class larger.
var storedSeed = maphash.MakeSeed()

// maxFewStored is how many hashes storedMessages keeps in a slice before it keeps a map.
const maxFewStored = 8

// storedHash is one hash of storedMessages.few with its messages' ids.
type storedHash struct {
	key storedKey
	ids []storedID
}

// storedID is a stored message's id and its place among those noted (the thread's order).
type storedID struct {
	id string
	at int
}

// storedKey is a message's hash with its text's length (a collision of both, with a
// per-process random seed, is not a practical concern).
type storedKey struct {
	hash uint64
	n    int
}

// key hashes everything of m the model reads.
func (s *storedMessages) key(m llm.Message) storedKey {
	var h maphash.Hash
	h.SetSeed(storedSeed)
	h.WriteString(string(m.Role))
	h.WriteByte(0)
	h.WriteString(m.ToolCallID)
	h.WriteByte(0)
	for _, c := range m.ToolCalls {
		h.WriteString(c.ID)
		h.WriteByte(0)
		h.WriteString(c.Name)
		h.WriteByte(0)
		h.WriteString(c.Arguments)
		h.WriteByte(0)
	}
	h.WriteString(strconv.Itoa(len(m.ToolCalls)))
	h.WriteByte(0)
	h.WriteString(m.Content)
	return storedKey{hash: h.Sum64(), n: len(m.Content)}
}

// note records that m is the thread's stored message id, after those noted before.
func (s *storedMessages) note(m llm.Message, id string) {
	if id == "" {
		return
	}
	k := s.key(m)
	for _, sid := range s.lookup(k) {
		if sid.id == id {
			return
		}
	}
	s.n++
	sid := storedID{id: id, at: s.n}
	if s.ids != nil {
		s.ids[k] = append(s.ids[k], sid)
		return
	}
	for i := range s.few {
		if s.few[i].key == k {
			s.few[i].ids = append(s.few[i].ids, sid)
			return
		}
	}
	if len(s.few) < maxFewStored {
		s.few = append(s.few, storedHash{key: k, ids: []storedID{sid}})
		return
	}
	s.ids = make(map[storedKey][]storedID, 2*maxFewStored)
	for _, h := range s.few {
		s.ids[h.key] = h.ids
	}
	s.few = nil
	s.ids[k] = []storedID{sid}
}

// lookup is the ids of the stored messages whose hash is k, in the thread's order.
func (s *storedMessages) lookup(k storedKey) []storedID {
	if s.ids != nil {
		return s.ids[k]
	}
	for _, h := range s.few {
		if h.key == k {
			return h.ids
		}
	}
	return nil
}

// id is the id of a stored message m is (of the same text, any is), or "".
func (s *storedMessages) id(m llm.Message) string {
	if s.n == 0 {
		return "" // nothing noted
	}
	if ids := s.lookup(s.key(m)); len(ids) > 0 {
		return ids[len(ids)-1].id
	}
	return ""
}

// earliest is the id of the earliest stored message among conv's messages i that pick
// reports, or "". conv holds the last of the thread's messages of each text (its
// occurrences of a text are matched to that text's last stored ids, in order): a message
// repeated before them and not in conv is not taken for one of them.
func (s *storedMessages) earliest(conv []llm.Message, pick func(i int) bool) string {
	if s.n == 0 {
		return ""
	}
	keys := make([]storedKey, len(conv))
	count := map[storedKey]int{}
	for i, m := range conv {
		keys[i] = s.key(m)
		if len(s.lookup(keys[i])) > 0 {
			count[keys[i]]++
		}
	}
	seen := map[storedKey]int{}
	best := storedID{}
	for i := range conv {
		ids := s.lookup(keys[i])
		if len(ids) == 0 {
			continue
		}
		seen[keys[i]]++
		j := len(ids) - count[keys[i]] + seen[keys[i]] - 1
		if j < 0 || !pick(i) {
			continue
		}
		if best.id == "" || ids[j].at < best.at {
			best = ids[j]
		}
	}
	return best.id
}

// convEntry is one message of a checkpoint's history (durable.Checkpoint.Conv): the
// message itself, as version 1 held every one, or, from version 2, the id of the thread's
// message it is ({"ref": id}).
type convEntry struct {
	Ref string `json:"ref,omitempty"`
	llm.Message
}

// convRef is a message of a checkpoint's history that the thread keeps.
type convRef struct {
	Ref string `json:"ref"`
}

// convDoc encodes conv for a checkpoint: the messages the thread keeps by their ids.
func convDoc(conv []llm.Message, stored *storedMessages) json.RawMessage {
	entries := make([]any, len(conv))
	for i, m := range conv {
		if id := stored.id(m); id != "" {
			entries[i] = convRef{Ref: id}
			continue
		}
		entries[i] = m
	}
	return mustJSON(entries)
}

// errConvRef: a checkpoint names a message its thread no longer has.
var errConvRef = errors.New("a message the checkpoint names is not in the thread")

// decodeConv reads a checkpoint's history, reading the messages it names with load (only
// when it names some), and notes them in stored.
func decodeConv(ctx context.Context, doc json.RawMessage, stored *storedMessages,
	load func(ctx context.Context, ids []string) (map[string]agui.Message, error)) ([]llm.Message, error) {
	var entries []convEntry
	if err := json.Unmarshal(doc, &entries); err != nil || entries == nil {
		return nil, fmt.Errorf("%w: its history", durable.ErrCheckpoint)
	}
	var ids []string
	for _, e := range entries {
		if e.Ref != "" {
			ids = append(ids, e.Ref)
		}
	}
	var named map[string]agui.Message
	if len(ids) > 0 {
		var err error
		if named, err = load(ctx, ids); err != nil {
			return nil, err
		}
	}
	conv := make([]llm.Message, 0, len(entries))
	for _, e := range entries {
		if e.Ref == "" {
			conv = append(conv, e.Message)
			continue
		}
		sm, found := named[e.Ref]
		m, ok := toLLM(sm)
		if !found || !ok {
			return nil, fmt.Errorf("%w: %s", errConvRef, e.Ref)
		}
		stored.note(m, e.Ref)
		conv = append(conv, m)
	}
	return conv, nil
}
