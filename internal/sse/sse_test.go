package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const maxEvent = 10 << 20

func collectSSE(body io.Reader, max int) ([]string, error) {
	var out []string
	for data, err := range Read(body, max) {
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
	return out, nil
}

func TestRead(t *testing.T) {
	big := strings.Repeat("x", 100_000) // many times the initial buffer
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one event", "data: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"no space after the colon", "data:{}\n\n", []string{`{}`}},
		{"data lines joined", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"id, event and comments ignored", ": ping\nid: 7\nevent: message\ndata: a\n\n", []string{"a"}},
		{"empty event not delivered", "data:\n\ndata: a\n\n", []string{"a"}},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}},
		{"a line larger than the buffer", "data: " + big + "\n\ndata: small\n\n", []string{big, "small"}},
		{"a large event of many lines", "data: " + big + "\ndata: " + big + "\n\n", []string{big + "\n" + big}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := collectSSE(strings.NewReader(tt.in), maxEvent)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			// The same stream delivered one byte at a time.
			got, err = collectSSE(iotest.OneByteReader(strings.NewReader(tt.in)), maxEvent)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadLimits(t *testing.T) {
	t.Run("a line over the limit", func(t *testing.T) {
		got, err := collectSSE(strings.NewReader("data: ok\n\ndata: "+strings.Repeat("x", 5000)+"\n\n"), 4096)
		require.ErrorIs(t, err, ErrEventTooLarge)
		assert.Equal(t, []string{"ok"}, got)
	})
	t.Run("an event of many lines over the limit", func(t *testing.T) {
		line := "data: " + strings.Repeat("x", 1000) + "\n"
		_, err := collectSSE(strings.NewReader(strings.Repeat(line, 5)+"\n"), 4096)
		require.ErrorIs(t, err, ErrEventTooLarge)
	})
	t.Run("a read error is reported, the partial event is not", func(t *testing.T) {
		boom := errors.New("boom")
		got, err := collectSSE(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), maxEvent)
		require.ErrorIs(t, err, boom)
		assert.Equal(t, []string{"a"}, got)
	})
}
