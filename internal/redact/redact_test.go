package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

const canary = "CANARY-s3cr3t-9f1b"

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://user:" + canary + "@host:1/p":               "http://[REDACTED]@host:1/p",
		"dial https://" + canary + "@a.example failed":      "dial https://[REDACTED]@a.example failed",
		`Post "http://u:` + canary + `@127.0.0.1:9/x": EOF`: `Post "http://[REDACTED]@127.0.0.1:9/x": EOF`,
		"mail me at a@b.example":                            "mail me at a@b.example",
		"http://host/path@x":                                "http://host/path@x",
		"no url":                                            "no url",
	} {
		assert.Equal(t, want, URL(in), in)
	}
}

func TestRedactorMasksSecretsAndTokens(t *testing.T) {
	t.Parallel()
	r := New("Bearer "+canary, "abc") // "abc" is too short to be a secret
	assert.Equal(t, "got [REDACTED] and [REDACTED]", r.String("got Bearer "+canary+" and "+canary))
	assert.Equal(t, "abc", r.String("abc"))
	r.Add("late-secret-value")
	assert.Equal(t, "[REDACTED]", r.String("late-secret-value"))
	var nilR *Redactor
	assert.Equal(t, "http://[REDACTED]@h", nilR.String("http://u:p@h"))
}

type stringer struct{}

func (stringer) String() string { return "key=" + canary }

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue(canary) }

// TestHandlerMasksEverywhere logs a canary through every kind of attribute, at debug, in
// text and JSON, and greps the output.
func TestHandlerMasksEverywhere(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var inner slog.Handler = slog.NewTextHandler(&buf, opts)
			if format == "json" {
				inner = slog.NewJSONHandler(&buf, opts)
			}
			log := slog.New(Handler(inner, New(canary)))
			u, _ := url.Parse("http://user:pw-" + canary + "@127.0.0.1:1/x")
			log = log.With("pre", canary).WithGroup("g").With("pre2", "Bearer "+canary)
			log.Debug("provider said: "+canary,
				"body", `{"error":"invalid key `+canary+`"}`,
				"err", fmt.Errorf("wrapped: %w", errors.New(canary)),
				"url", u,
				"raw", []byte(canary),
				"json", json.RawMessage(`"`+canary+`"`),
				"stringer", stringer{},
				"valuer", valuer{},
				"map", map[string]string{"Authorization": canary},
				"list", []string{canary},
				slog.Group("inner", "x", canary, "n", 3),
				"count", 7,
			)
			out := buf.String()
			assert.NotContains(t, out, canary)
			assert.NotContains(t, out, "pw-")
			assert.Contains(t, out, Mask)
			assert.Contains(t, out, "count", "other attributes are kept")
			if format == "json" {
				var m map[string]any
				assert.NoError(t, json.Unmarshal(buf.Bytes(), &m))
				assert.Equal(t, float64(7), m["g"].(map[string]any)["count"], "numbers stay numbers")
			}
		})
	}
}

func TestWriterMasks(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := Writer(&buf, New(canary))
	n, err := fmt.Fprintf(w, "coordinator: agents: a (http://u:%s@h): refused %s\n", "pw", canary)
	assert.NoError(t, err)
	assert.Positive(t, n)
	assert.Equal(t, "coordinator: agents: a (http://[REDACTED]@h): refused [REDACTED]\n", buf.String())
}
