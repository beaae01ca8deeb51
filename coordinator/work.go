package coordinator

import (
	"github.com/baton-dev/baton/durable"
)

// The store's write bounds, as the event log (package durable) applies them.
const (
	storeWriteTimeout  = durable.StoreWriteTimeout
	maxStoreRetry      = durable.MaxStoreRetry
	storeRetry         = durable.StoreRetry
	maxStoreRetryPause = durable.MaxStoreRetryPause
)
