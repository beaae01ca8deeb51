package followers

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCaps(t *testing.T) {
	t.Parallel()
	c := New(3)
	a1, err := c.Join("alice", "r1", 2)
	require.NoError(t, err)
	_, err = c.Join("alice", "r1", 2)
	require.NoError(t, err)
	_, err = c.Join("bob", "r1", 2)
	assert.ErrorIs(t, err, ErrRunFull)
	_, err = c.Join("alice", "r2", 2)
	require.NoError(t, err)
	_, err = c.Join("alice", "r3", 2)
	assert.ErrorIs(t, err, ErrPrincipalFull, "alice's fourth stream, on another run")
	_, err = c.Join("bob", "r3", 2)
	assert.NoError(t, err, "bob has his own cap")
	a1()
	a1() // leaving twice counts once
	_, err = c.Join("alice", "r3", 2)
	assert.NoError(t, err)
	_, err = c.Join("alice", "r4", 2)
	assert.ErrorIs(t, err, ErrPrincipalFull)
	assert.Len(t, New(-1).perPrincipal, 0)
	u := New(-1)
	for range 1000 {
		_, err := u.Join("alice", "r", 0)
		require.NoError(t, err, "no cap")
	}
}

// Joins racing each other never pass the cap.
func TestCapIsAtomic(t *testing.T) {
	t.Parallel()
	c := New(5)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 100 {
		wg.Go(func() {
			if _, err := c.Join("alice", string(rune('a'+i%26)), 0); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 5, ok)
}
