package subagent

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"strings"
	"unicode/utf8"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// PartsText renders message or artifact parts as text: text parts as they are (adjacent
// text parts are concatenated, as streamed chunks are meant to be), data parts as compact
// JSON and file parts (raw bytes or URL) as "[file: name (mediaType)]", each non-text part
// on a line of its own.
func PartsText(parts []*sdk.Part) string {
	var b strings.Builder
	r := newRenderer()
	r.add(parts, func(s string) { b.WriteString(s) })
	return b.String()
}

// renderer renders parts as PartsText does, incrementally: parts appended later render
// exactly as if they had been there from the start, and nothing rendered is kept, so a
// long stream of chunks costs time linear in its size.
type renderer struct {
	prevText bool // the last rendered part was text (or nothing was rendered yet)
	any      bool // something was written
	endsNL   bool // what was written ends with a newline
}

func newRenderer() renderer { return renderer{prevText: true} }

// add renders parts, passing each piece of output to w.
func (r *renderer) add(parts []*sdk.Part, w func(string)) {
	for _, p := range parts {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(sdk.Text); ok {
			if !r.prevText && r.any {
				r.write("\n", w)
			}
			r.write(string(t), w)
			r.prevText = true
			continue
		}
		s := partText(p)
		if s == "" {
			continue
		}
		if r.any && !r.endsNL {
			r.write("\n", w)
		}
		r.write(s, w)
		r.prevText = false
	}
}

func (r *renderer) write(s string, w func(string)) {
	if s == "" {
		return
	}
	r.any = true
	r.endsNL = s[len(s)-1] == '\n'
	w(s)
}

// cappedText keeps the first max bytes written to it and counts the rest.
type cappedText struct {
	b       strings.Builder
	max     int
	omitted int64
}

func (c *cappedText) write(s string) {
	if c.omitted > 0 {
		c.omitted += int64(len(s)) // once cut, nothing more is kept: no gaps in the text
		return
	}
	room := c.max - c.b.Len()
	if room >= len(s) {
		c.b.WriteString(s)
		return
	}
	if room > 0 {
		cut := room
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		c.b.WriteString(s[:cut])
		room = cut
	} else {
		room = 0
	}
	c.omitted += int64(len(s) - room)
}

func (c *cappedText) String() string { return c.b.String() }

// partText renders one non-text part. ADK's long-running function call is the question
// it asks, and its pending function response says nothing to a reader (adk.go).
func partText(p *sdk.Part) string {
	if c, ok := adkCallOf(p); ok {
		return adkQuestionText(c)
	}
	if adkMeta(p) == adkFunctionResp {
		return ""
	}
	switch c := p.Content.(type) {
	case sdk.Data:
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c.Value); err != nil {
			return "[data]"
		}
		return strings.TrimSuffix(b.String(), "\n")
	case sdk.Raw:
		return fileText(p.Filename, p.MediaType)
	case sdk.URL:
		name := p.Filename
		if name == "" {
			name = string(c)
		}
		return fileText(name, p.MediaType)
	}
	return ""
}

func fileText(name, mediaType string) string {
	if name == "" {
		name = "unnamed"
	}
	if mediaType == "" {
		return fmt.Sprintf("[file: %s]", name)
	}
	return fmt.Sprintf("[file: %s (%s)]", name, mediaType)
}

// transcript tracks, per text source (an artifact, a message), how much text was already
// reported, and reports only what extends it. See the package doc. It keeps a length and a
// running hash per source, not the text, so its memory does not grow with the text.
type transcript struct {
	// few holds the sources while there are at most maxFewSources, reported once there
	// are more: a delegation streams one or two sources as a rule, and a map's first
	// group (about 200 bytes) would be held by every open delegation.
	few      []source
	reported map[string]*sourceState
	emit     func(string)
	// last is the source of the last report and endsLine whether everything reported so
	// far ends a line: reports of different sources are separated by a newline.
	last     string
	any      bool
	endsLine bool
	silent   bool
}

// sourceState is what was reported of one source: its length and the hash of those bytes.
type sourceState struct {
	n int
	h hash.Hash
}

// source is a source of transcript.few with what was reported of it.
type source struct {
	key string
	st  *sourceState
}

// maxFewSources is how many sources a transcript keeps in a slice before it keeps a map.
const maxFewSources = 8

func newTranscript(emit func(string)) *transcript {
	return &transcript{emit: emit}
}

func (t *transcript) state(key string) *sourceState {
	if t.reported != nil {
		st := t.reported[key]
		if st == nil {
			st = &sourceState{h: sha256.New()}
			t.reported[key] = st
		}
		return st
	}
	for _, s := range t.few {
		if s.key == key {
			return s.st
		}
	}
	st := &sourceState{h: sha256.New()}
	if len(t.few) < maxFewSources {
		t.few = append(t.few, source{key: key, st: st})
		return st
	}
	t.reported = make(map[string]*sourceState, 2*maxFewSources)
	for _, s := range t.few {
		t.reported[s.key] = s.st
	}
	t.few = nil
	t.reported[key] = st
	return st
}

// set records that source key now reads full, reporting what was not reported yet.
//   - full extends what was reported: the rest is reported;
//   - full is shorter than what was reported (a snapshot older than the stream): nothing;
//   - anything else (the source was replaced by different content): full is reported anew.
func (t *transcript) set(key, full string) {
	st := t.state(key)
	switch {
	case len(full) >= st.n && st.n == 0:
		t.extend(key, st, full, false)
	case len(full) >= st.n && sameHash(st, full[:st.n]):
		t.extend(key, st, full[st.n:], false)
	case len(full) < st.n:
		return
	default:
		st.n = 0
		st.h.Reset()
		t.extend(key, st, full, true)
	}
}

// add records that source key grew by delta (an appended chunk) and reports it.
func (t *transcript) add(key, delta string) {
	t.extend(key, t.state(key), delta, false)
}

func (t *transcript) extend(key string, st *sourceState, delta string, replaced bool) {
	if delta == "" {
		return
	}
	st.n += len(delta)
	st.h.Write([]byte(delta))
	if t.silent || t.emit == nil {
		return
	}
	if t.any && !t.endsLine && (t.last != key || replaced) {
		delta = "\n" + delta
	}
	t.last, t.any = key, true
	t.endsLine = strings.HasSuffix(delta, "\n")
	t.emit(delta)
}

// sameHash reports whether prefix hashes as the text reported for st.
func sameHash(st *sourceState, prefix string) bool {
	h := sha256.Sum256([]byte(prefix))
	return string(st.h.Sum(nil)) == string(h[:])
}
