package dispatch

import "sync"

// Each runs run(i) for every index in idx and returns when all have returned: the usual
// single call on the caller's goroutine, several calls concurrently, a goroutine each.
func Each(idx []int, run func(i int)) {
	if len(idx) == 1 {
		run(idx[0])
		return
	}
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Go(func() { run(i) })
	}
	wg.Wait()
}
