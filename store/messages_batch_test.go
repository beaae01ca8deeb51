package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMessagesBatch: a call with several messages appends the new ones in their order
// after the thread's last, updates known ones in place, takes the last of an id repeated
// in one call, and keeps the newest MaxMessagesPerThread. On every backend.
func TestMessagesBatch(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		msg := func(id, text string) Message {
			return Message{ID: id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q,"content":%q}`, id, text))}
		}
		ids := func(ms []Message) []string {
			var out []string
			for _, m := range ms {
				out = append(out, m.ID)
			}
			return out
		}
		require.NoError(t, s.SaveMessages(ctx, "b", []Message{msg("m1", "a"), msg("m2", "b"), msg("m3", "c")}))
		require.NoError(t, s.SaveMessages(ctx, "b", []Message{msg("m4", "d"), msg("m2", "b2"), msg("m5", "e")}))
		require.NoError(t, s.SaveMessages(ctx, "b", []Message{msg("m6", "f"), msg("m6", "f2")}))
		got, err := s.LoadMessages(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, []string{"m1", "m2", "m3", "m4", "m5", "m6"}, ids(got))
		assert.JSONEq(t, string(msg("m2", "b2").Data), string(got[1].Data))
		assert.JSONEq(t, string(msg("m6", "f2").Data), string(got[5].Data))

		many := make([]Message, MaxMessagesPerThread+5)
		for i := range many {
			many[i] = msg(fmt.Sprintf("x%05d", i), "x")
		}
		require.NoError(t, s.SaveMessages(ctx, "big", many))
		got, err = s.LoadMessages(ctx, "big")
		require.NoError(t, err)
		require.Len(t, got, MaxMessagesPerThread)
		assert.Equal(t, "x00005", got[0].ID, "the oldest go first")
		assert.Equal(t, many[len(many)-1].ID, got[len(got)-1].ID)
	})
}
