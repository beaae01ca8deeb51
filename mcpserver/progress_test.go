package mcpserver

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProgressCoalescesToTenASecond feeds a progress message every millisecond for one
// (fake) second: at most ten notifications go out, each the latest message, and the last
// message is sent once its interval has passed.
func TestProgressCoalescesToTenASecond(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent []string
		p := &progress{every: 100 * time.Millisecond, send: func(_ context.Context, n float64, msg string) {
			assert.Equal(t, float64(len(sent)+1), n)
			sent = append(sent, msg)
		}}
		ctx := context.Background()
		start := time.Now()
		for i := 0; i < 1000; i++ {
			p.note(fmt.Sprintf("m%d", i))
			p.flush(ctx, time.Now())
			select {
			case <-p.due():
				p.fired()
				p.flush(ctx, time.Now())
			case <-time.After(time.Millisecond):
			}
		}
		assert.LessOrEqual(t, len(sent), 11, "at most ten a second (plus the first)")
		assert.GreaterOrEqual(t, len(sent), 9, "the progress is not starved")
		assert.Equal(t, "m0", sent[0], "the first goes at once")
		// The last message waits for its interval, then goes.
		if p.due() != nil {
			<-p.due()
			p.fired()
			p.flush(ctx, time.Now())
		}
		assert.Equal(t, "m999", sent[len(sent)-1])
		assert.Less(t, time.Since(start), 1200*time.Millisecond)
		p.stop()
	})
}

func TestProgressSilentWithoutToken(t *testing.T) {
	t.Parallel()
	p := &progress{every: time.Millisecond}
	p.note("x")
	p.flush(context.Background(), time.Now())
	assert.Nil(t, p.due())
	assert.Empty(t, p.pending)
}
