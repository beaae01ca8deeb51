package store

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroupWriterFirstEventBeforeBulk: a write marked WithFirstEvent, queued after more
// bulk writes than a batch holds, is run in the writer's next batch (queued as bulk, it
// would wait for a batch of them first), and is committed when its caller returns.
func TestGroupWriterFirstEventBeforeBulk(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	w := newGroupWriter(db)
	t.Cleanup(w.close)

	var mu sync.Mutex
	var order []string
	recorded := func(k string) writeFunc {
		return func(ctx context.Context, tx *sql.Tx) error {
			mu.Lock()
			order = append(order, k)
			mu.Unlock()
			return insertKV(k)(ctx, tx)
		}
	}

	// Hold the writer in a batch while the other jobs queue up.
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, w.do(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			close(entered)
			<-release
			return insertKV("hold")(ctx, tx)
		}))
	})
	<-entered

	const bulk = maxBatch + 8
	for i := range bulk {
		wg.Go(func() {
			assert.NoError(t, w.doBulk(context.Background(), recorded(fmt.Sprintf("bulk%02d", i))))
		})
	}
	queued := func() int { return len(w.queue) + len(w.starts) + len(w.first) }
	for queued() < bulk {
		runtime.Gosched()
	}
	firstDone := make(chan error, 1)
	go func() { firstDone <- w.doBulk(WithFirstEvent(context.Background()), recorded("first")) }()
	for queued() < bulk+1 {
		runtime.Gosched()
	}
	close(release)

	require.NoError(t, <-firstDone)
	assert.Contains(t, keys(t, db), "first", "committed when its caller returns")
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, bulk+1)
	at := slices.Index(order, "first")
	assert.Less(t, at, maxBatch, "the first event's write is in the next batch, not behind the queued bulk: %v", order)
}
