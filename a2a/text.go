package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
)

// PartsText renders message or artifact parts as text: text parts as they are (adjacent
// text parts are concatenated, as streamed chunks are meant to be), data parts as compact
// JSON and file parts (raw bytes or URL) as "[file: name (mediaType)]", each non-text part
// on a line of its own.
func PartsText(parts []*sdk.Part) string {
	var b strings.Builder
	prevText := true
	for _, p := range parts {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(sdk.Text); ok {
			if !prevText && b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(string(t))
			prevText = true
			continue
		}
		s := partText(p)
		if s == "" {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
		prevText = false
	}
	return b.String()
}

// partText renders one non-text part.
func partText(p *sdk.Part) string {
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

// transcript tracks, per text source (an artifact, a message), the text already reported,
// and reports only what extends it. See the package doc.
type transcript struct {
	reported map[string]string
	emit     func(string)
	silent   bool
	// last is the source of the last report and endsLine whether everything reported so
	// far ends a line: reports of different sources are separated by a newline.
	last     string
	any      bool
	endsLine bool
}

func newTranscript(emit func(string)) *transcript {
	return &transcript{reported: map[string]string{}, emit: emit}
}

// set records that source key now reads full, reporting what was not reported yet.
//   - full extends what was reported: the rest is reported;
//   - full is a prefix of what was reported (a snapshot older than the stream): nothing;
//   - anything else (the source was replaced by different content): full is reported anew.
func (t *transcript) set(key, full string) {
	prev := t.reported[key]
	var delta string
	replaced := false
	switch {
	case strings.HasPrefix(full, prev):
		delta = full[len(prev):]
	case strings.HasPrefix(prev, full):
		return
	default:
		delta, replaced = full, true
	}
	t.reported[key] = full
	if delta == "" || t.silent || t.emit == nil {
		return
	}
	if t.any && !t.endsLine && (t.last != key || replaced) {
		delta = "\n" + delta
	}
	t.last, t.any = key, true
	t.endsLine = strings.HasSuffix(delta, "\n")
	t.emit(delta)
}
