package subagent

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPartsText(t *testing.T) {
	raw := sdk.NewRawPart([]byte{1, 2})
	raw.Filename, raw.MediaType = "a.bin", "application/octet-stream"
	anon := sdk.NewRawPart([]byte{1})
	for _, tc := range []struct {
		name  string
		parts []*sdk.Part
		want  string
	}{
		{"empty", nil, ""},
		{"text chunks are concatenated", []*sdk.Part{sdk.NewTextPart("a "), sdk.NewTextPart("b")}, "a b"},
		{"data as compact JSON", []*sdk.Part{sdk.NewDataPart(map[string]any{"k": []int{1, 2}, "h": "<&>"})}, `{"h":"<&>","k":[1,2]}`},
		{"raw file", []*sdk.Part{raw}, "[file: a.bin (application/octet-stream)]"},
		{"unnamed file without type", []*sdk.Part{anon}, "[file: unnamed]"},
		{"url names the file when no filename", []*sdk.Part{sdk.NewFileURLPart("https://x/y.png", "image/png")}, "[file: https://x/y.png (image/png)]"},
		{"non-text parts on their own lines", []*sdk.Part{sdk.NewTextPart("see"), raw, sdk.NewTextPart("after"), sdk.NewTextPart(" more")},
			"see\n[file: a.bin (application/octet-stream)]\nafter more"},
		{"no doubled newline", []*sdk.Part{sdk.NewTextPart("line\n"), sdk.NewDataPart(1)}, "line\n1"},
		{"nil parts are skipped", []*sdk.Part{nil, sdk.NewTextPart("x")}, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PartsText(tc.parts))
		})
	}
}

func TestTranscript(t *testing.T) {
	type step struct{ key, full string }
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
	}{
		{"extension reports the rest", []step{{"a", "he"}, {"a", "hello"}}, []string{"he", "llo"}},
		{"repeat reports nothing", []step{{"a", "hello"}, {"a", "hello"}}, []string{"hello"}},
		{"older snapshot reports nothing", []step{{"a", "hello"}, {"a", "hel"}, {"a", "hello!"}}, []string{"hello", "!"}},
		{"replacement is reported anew on its own line", []step{{"a", "draft"}, {"a", "final"}}, []string{"draft", "\nfinal"}},
		{"sources are separated by a newline", []step{{"a", "one"}, {"b", "two"}, {"a", "one more"}}, []string{"one", "\ntwo", "\n more"}},
		{"no separator after a line end", []step{{"a", "one\n"}, {"b", "two"}}, []string{"one\n", "two"}},
		{"empty text reports nothing", []step{{"a", ""}, {"b", "x"}}, []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			tr := newTranscript(func(s string) { got = append(got, s) })
			for _, s := range tc.steps {
				tr.set(s.key, s.full)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("past the few sources each is still extended", func(t *testing.T) {
		var got []string
		tr := newTranscript(func(s string) { got = append(got, strings.TrimPrefix(s, "\n")) })
		n := 3 * maxFewSources
		for i := range n {
			tr.set(fmt.Sprint(i), fmt.Sprintf("s%d", i))
		}
		for i := range n {
			tr.set(fmt.Sprint(i), fmt.Sprintf("s%d+", i))
		}
		require.Len(t, got, 2*n)
		for i := range n {
			assert.Equal(t, fmt.Sprintf("s%d", i), got[i])
			assert.Equal(t, "+", got[n+i], "source %d: only its extension", i)
		}
	})
	t.Run("silent updates count as reported", func(t *testing.T) {
		var got []string
		tr := newTranscript(func(s string) { got = append(got, s) })
		tr.silent = true
		tr.set("a", "old")
		tr.silent = false
		tr.set("a", "old new")
		assert.Equal(t, []string{" new"}, got)
	})
}

func TestSameStatus(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := ts.Add(time.Second)
	q := &sdk.Message{ID: "q1"}
	for _, tc := range []struct {
		name string
		a, b sdk.TaskStatus
		want bool
	}{
		{"same message", sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: q}, sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: &sdk.Message{ID: "q1"}}, true},
		{"other message", sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: q}, sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: &sdk.Message{ID: "q2"}}, false},
		{"other state", sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: q}, sdk.TaskStatus{State: sdk.TaskStateAuthRequired, Message: q}, false},
		{"messages without id", sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: &sdk.Message{}}, sdk.TaskStatus{State: sdk.TaskStateInputRequired, Message: &sdk.Message{}}, false},
		{"no message, same time", sdk.TaskStatus{State: sdk.TaskStateAuthRequired, Timestamp: &ts}, sdk.TaskStatus{State: sdk.TaskStateAuthRequired, Timestamp: &ts}, true},
		{"no message, other time", sdk.TaskStatus{State: sdk.TaskStateAuthRequired, Timestamp: &ts}, sdk.TaskStatus{State: sdk.TaskStateAuthRequired, Timestamp: &later}, false},
		{"nothing to compare", sdk.TaskStatus{State: sdk.TaskStateAuthRequired}, sdk.TaskStatus{State: sdk.TaskStateAuthRequired}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sameStatus(tc.a, tc.b))
		})
	}
}

func TestClassify(t *testing.T) {
	rpc := func(sentinel error) error { return sdk.NewError(sentinel, "remote says no") }
	status := func(code int) *httpStatus { s := &httpStatus{}; s.set(code, 0); return s }
	for _, tc := range []struct {
		name         string
		err          error
		rec          *httpStatus
		continuation bool
		want         error // nil: none of the package sentinels
	}{
		{"unauthenticated", rpc(sdk.ErrUnauthenticated), nil, false, ErrAuth},
		{"unauthorized", rpc(sdk.ErrUnauthorized), nil, false, ErrAuth},
		{"unsupported operation", rpc(sdk.ErrUnsupportedOperation), nil, false, ErrCapabilityGap},
		{"unsupported content type", rpc(sdk.ErrUnsupportedContentType), nil, false, ErrCapabilityGap},
		{"task not found on a continuation", rpc(sdk.ErrTaskNotFound), nil, true, ErrInvalidTransition},
		{"invalid params on a continuation", rpc(sdk.ErrInvalidParams), nil, true, ErrInvalidTransition},
		{"invalid params on a new task is a protocol error", rpc(sdk.ErrInvalidParams), nil, false, ErrUnreachable},
		{"503", errors.New("unexpected HTTP status: 503"), status(503), false, ErrUnreachable},
		{"429", errors.New("unexpected HTTP status: 429"), status(429), false, ErrUnreachable},
		{"404 is a protocol error", errors.New("unexpected HTTP status: 404"), status(404), false, ErrUnreachable},
		{"network", fmt.Errorf("send: %w", &url.Error{Op: "Post", URL: "http://x", Err: errors.New("connection refused")}), nil, false, ErrUnreachable},
		{"cut body", fmt.Errorf("SSE stream error: %w", io.ErrUnexpectedEOF), nil, false, ErrUnreachable},
		{"internal error is a protocol error", rpc(sdk.ErrInternalError), nil, false, ErrUnreachable},
		{"invalid agent response", fmt.Errorf("decode: %w", sdk.ErrInvalidAgentResponse), nil, false, ErrUnreachable},
		{"parse error", rpc(sdk.ErrParseError), nil, false, ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify("peer", tc.err, tc.rec, tc.continuation)
			assert.ErrorIs(t, err, tc.err, "the cause stays reachable")
			for _, sentinel := range []error{ErrUnreachable, ErrInvalidTransition, ErrAuth, ErrCapabilityGap} {
				assert.Equal(t, sentinel == tc.want, errors.Is(err, sentinel), sentinel)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-3", 0},
		{"2", 2 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
	} {
		assert.Equal(t, tc.want, parseRetryAfter(tc.header, now), tc.header)
	}

	base := 100 * time.Millisecond
	d, ok := retryDelay(base, 1, &httpStatus{})
	assert.True(t, ok)
	assert.Equal(t, base, d)
	d, ok = retryDelay(base, 3, &httpStatus{})
	assert.True(t, ok)
	assert.Equal(t, 4*base, d, "the delay doubles per attempt")
	d, ok = retryDelay(time.Minute, 3, nil)
	assert.True(t, ok)
	assert.Equal(t, maxRetryWait, d, "capped")

	rec := &httpStatus{}
	rec.set(503, 7*time.Second)
	d, ok = retryDelay(base, 1, rec)
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, d, "Retry-After is honoured exactly")
	rec.set(503, time.Hour)
	_, ok = retryDelay(base, 1, rec)
	assert.False(t, ok, "a wait beyond the cap is reported, not slept")
}

func TestMajorVersion(t *testing.T) {
	for v, want := range map[string]string{"1.0": "1", "v1.0.1": "1", "": "1", "0.3": "0", "0.3.0": "0", "2": "2"} {
		assert.Equal(t, want, majorVersion(v), v)
	}
}
