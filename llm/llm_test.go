package llm

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestKindFromStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   ErrorKind
	}{
		{429, ErrRateLimited},
		{500, ErrServer},
		{502, ErrServer},
		{503, ErrServer},
		{408, ErrServer},
		{401, ErrAuth},
		{403, ErrAuth},
		{400, ErrBadRequest},
		{404, ErrBadRequest},
		{422, ErrBadRequest},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, kindFromStatus(tt.status), "status %d", tt.status)
	}
}

func TestTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind ErrorKind
		want bool
	}{
		{ErrRateLimited, true},
		{ErrServer, true},
		{ErrNetwork, true},
		{ErrBadRequest, false},
		{ErrAuth, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, (&Error{Kind: tt.kind}).Transient(), string(tt.kind))
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"absent", http.Header{}, 0},
		{"nil", nil, 0},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0},
		{"http date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"milliseconds win", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"x"}}, 2 * time.Second},
		{"huge", http.Header{"Retry-After": {"1e300"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseRetryAfter(tt.header, now))
		})
	}
}

func TestNewHTTPError(t *testing.T) {
	t.Parallel()
	cause := errors.New("sdk error")
	e := NewHTTPError(429, http.Header{"Retry-After": {"3"}}, "slow down", cause)
	assert.Equal(t, ErrRateLimited, e.Kind)
	assert.Equal(t, 429, e.Status)
	assert.Equal(t, 3*time.Second, e.RetryAfter)
	assert.Contains(t, e.Message, "slow down")
	assert.ErrorIs(t, e, cause)
	assert.Equal(t, "llm: rate_limited (HTTP 429): "+e.Message, e.Error())

	auth := NewHTTPError(401, nil, "Incorrect API key provided: sk-abc", cause)
	assert.Equal(t, ErrAuth, auth.Kind)
	assert.NotContains(t, auth.Message, "sk-abc")
	assert.NotContains(t, auth.Error(), "sk-abc")
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "llm: network: unreachable", (&Error{Kind: ErrNetwork, Message: "unreachable"}).Error())
	assert.Equal(t, "llm: server (HTTP 502)", (&Error{Kind: ErrServer, Status: 502}).Error())
}
