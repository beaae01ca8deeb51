package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpendLedger(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		l, ok := s.(SpendLedger)
		require.True(t, ok, "every backend keeps the spend ledger")
		day, err := l.AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", ThreadID: "t1", Spend: Spend{InputTokens: 100, OutputTokens: 20, CostUSD: 0.25}})
		require.NoError(t, err)
		assert.Equal(t, Spend{InputTokens: 100, OutputTokens: 20, CostUSD: 0.25}, day)
		day, err = l.AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", ThreadID: "t2", Spend: Spend{InputTokens: 1, OutputTokens: 2, CostUSD: 0.5}})
		require.NoError(t, err)
		assert.Equal(t, Spend{InputTokens: 101, OutputTokens: 22, CostUSD: 0.75}, day, "the day's total after the increment")
		_, err = l.AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-08", ThreadID: "t1", Spend: Spend{InputTokens: 5}})
		require.NoError(t, err)

		got, err := l.DaySpend(ctx, "alice", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, Spend{InputTokens: 101, OutputTokens: 22, CostUSD: 0.75}, got)
		got, err = l.DaySpend(ctx, "bob", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, Spend{}, got, "another principal's day is its own")
		got, err = l.ThreadSpend(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, Spend{InputTokens: 105, OutputTokens: 20, CostUSD: 0.25}, got, "a thread adds up across days")

		_, err = l.AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", Spend: Spend{InputTokens: -1}})
		require.Error(t, err, "negative usage is refused")
		_, err = l.AddSpend(ctx, SpendAdd{Principal: "alice", Spend: Spend{InputTokens: 1}})
		require.Error(t, err, "a day is required")
		got, err = l.DaySpend(ctx, "alice", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, int64(101), got.InputTokens, "a refused add changes nothing")

		require.NoError(t, s.DeleteThread(ctx, "t1"))
		got, err = l.ThreadSpend(ctx, "t1")
		require.NoError(t, err)
		assert.Equal(t, Spend{}, got, "a deleted thread's usage goes with it")
		got, err = l.DaySpend(ctx, "alice", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, int64(101), got.InputTokens, "the day keeps what the thread spent")
	})
}

// TestSpendLedgerSurvivesRestart reopens a SQLite file: the day's spend is still there.
func TestSpendLedgerSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "baton.db")
	s, err := Open(ctx, dsn)
	require.NoError(t, err)
	_, err = s.(SpendLedger).AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", Spend: Spend{InputTokens: 7, CostUSD: 0.01}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(ctx, dsn)
	require.NoError(t, err)
	defer s.Close()
	got, err := s.(SpendLedger).DaySpend(ctx, "alice", "2026-12-07")
	require.NoError(t, err)
	assert.Equal(t, Spend{InputTokens: 7, CostUSD: 0.01}, got)
}

// TestSpendLedgerAcrossReplicas adds from two handles at once: no increment is lost, and
// each sees a distinct total (the increments are serialised).
func TestSpendLedgerAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	forEachShared(t, func(t *testing.T, hs [2]Store) {
		const adds = 40
		var wg sync.WaitGroup
		totals := make(chan int64, adds)
		for i := range adds {
			wg.Go(func() {
				day, err := hs[i%2].(SpendLedger).AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", ThreadID: "t", Spend: Spend{InputTokens: 1}})
				assert.NoError(t, err)
				totals <- day.InputTokens
			})
		}
		wg.Wait()
		close(totals)
		seen := map[int64]bool{}
		for v := range totals {
			assert.False(t, seen[v], "total %d seen twice", v)
			seen[v] = true
		}
		got, err := hs[1].(SpendLedger).DaySpend(ctx, "alice", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, int64(adds), got.InputTokens)
	})
}

// A thread swept by the retention sweep takes its usage with it on every backend (as
// DeleteThread does); the principal's day keeps what it spent.
func TestSweptThreadDropsItsUsage(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, s Store) {
		l := s.(SpendLedger)
		_, err := s.ClaimThread(ctx, "old", "alice", "")
		require.NoError(t, err)
		_, err = l.AddSpend(ctx, SpendAdd{Principal: "alice", Day: "2026-12-07", ThreadID: "old", Spend: Spend{InputTokens: 7, CostUSD: 0.1}})
		require.NoError(t, err)
		n, err := s.SweepThreads(ctx, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		got, err := l.ThreadSpend(ctx, "old")
		require.NoError(t, err)
		assert.Zero(t, got, "the swept thread's usage is gone")
		day, err := l.DaySpend(ctx, "alice", "2026-12-07")
		require.NoError(t, err)
		assert.Equal(t, Spend{InputTokens: 7, CostUSD: 0.1}, day, "the day keeps it")
	})
}
