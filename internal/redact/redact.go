// Package redact keeps secrets out of logs. A Redactor replaces every configured secret
// value, and the userinfo of every URL, in text; Handler applies one to every record a
// slog handler writes, so that no log site (including error bodies echoed by a model
// provider or a peer) can leak a secret, whatever its format or level.
package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// minSecretLen is the shortest value treated as a secret: shorter ones would mask
// ordinary words, and cannot be meaningful credentials anyway.
const minSecretLen = 4

// userinfo matches the userinfo part of a URL: scheme://user:password@.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s@"'<>]+@`)

// URL removes the userinfo (user name and password) of every URL in s.
func URL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
}

// Redactor masks configured secret values and URL userinfo. Secrets may be added after
// the loggers are built (the configuration is read after the logger exists); it is safe
// for concurrent use.
type Redactor struct {
	mu      sync.Mutex
	secrets map[string]struct{}
	rep     atomic.Pointer[strings.Replacer]
}

// New returns a Redactor for the given secret values.
func New(secrets ...string) *Redactor {
	r := &Redactor{secrets: map[string]struct{}{}}
	r.Add(secrets...)
	return r
}

// Add registers more secret values. For a header value such as "Bearer abc", the part
// after the scheme is registered too, since error bodies often echo only the token.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if _, tok, ok := strings.Cut(s, " "); ok {
			r.addLocked(strings.TrimSpace(tok))
		}
		r.addLocked(s)
	}
	list := make([]string, 0, len(r.secrets))
	for s := range r.secrets {
		list = append(list, s)
	}
	// Longest first, so that a secret containing another is masked whole.
	sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, Mask)
	}
	r.rep.Store(strings.NewReplacer(pairs...))
}

func (r *Redactor) addLocked(s string) {
	if len(s) >= minSecretLen {
		r.secrets[s] = struct{}{}
	}
}

// String masks every secret value and every URL userinfo in s.
func (r *Redactor) String(s string) string {
	if r != nil {
		if rep := r.rep.Load(); rep != nil {
			s = rep.Replace(s)
		}
	}
	return URL(s)
}

// Handler returns a slog.Handler that masks secrets in the message and in every attribute
// (strings, errors, Stringers, LogValuers and any other value, inside groups too) before
// next sees the record.
func Handler(next slog.Handler, r *Redactor) slog.Handler {
	return &handler{next: next, r: r}
}

type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &handler{next: h.next.WithAttrs(clean), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), r: h.r}
}

// attr masks one attribute. Values whose text needs no masking keep their kind, so that
// numbers stay numbers in JSON logs.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case nil:
			return slog.Attr{Key: a.Key, Value: v}
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case []byte: // JSON would encode it as base64, hiding a secret from a plain search
			return slog.String(a.Key, h.r.String(string(x)))
		case json.RawMessage:
			return slog.String(a.Key, h.r.String(string(x)))
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if masked := h.r.String(text); masked != text {
			return slog.String(a.Key, masked)
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

// Writer returns a writer that masks secrets in each write before passing it to w. It is
// for plain messages printed outside the logger (start-up errors), each written whole by
// one call; a secret split across two writes is not caught.
func Writer(w io.Writer, r *Redactor) io.Writer { return &writer{w: w, r: r} }

type writer struct {
	w io.Writer
	r *Redactor
}

// Write reports len(p) on success: the masked text may be longer or shorter than p.
func (x *writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(x.w, x.r.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
