package agui

import "slices"

// openSet is what a run has open of one kind (text messages, tool calls, steps, subagents),
// in opening order. A run has a handful open at a time, so a slice scanned linearly is both
// smaller and faster than a map: a run held open for minutes keeps only these few entries
// (BenchmarkParkedRuns counts the bytes an open run retains).
type openSet[K comparable] []openEntry[K]

type openEntry[K comparable] struct {
	key K
	openItem
}

// get returns k's entry, if k is open.
func (o openSet[K]) get(k K) (openItem, bool) {
	for i := range o {
		if o[i].key == k {
			return o[i].openItem, true
		}
	}
	return openItem{}, false
}

// add opens k (the caller has checked that it is not open yet), after those open before.
func (o *openSet[K]) add(k K, it openItem) { *o = append(*o, openEntry[K]{key: k, openItem: it}) }

// remove closes k, keeping the others in opening order.
func (o *openSet[K]) remove(k K) {
	*o = slices.DeleteFunc(*o, func(e openEntry[K]) bool { return e.key == k })
	if len(*o) == 0 {
		// Nothing open: the backing array is let go, so that a run parked with nothing
		// of this kind open retains none.
		*o = nil
	}
}

// keys returns the open keys in opening order.
func (o openSet[K]) keys() []K {
	keys := make([]K, len(o))
	for i := range o {
		keys[i] = o[i].key
	}
	return keys
}
