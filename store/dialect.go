package store

import (
	"regexp"
	"sync"
)

// dialect is what differs between the two SQL backends. The queries are written once, in
// PostgreSQL's placeholder style ($1, $2...); SQLite reads the same numbers as ?1, ?2.
type dialect struct {
	name string
	// nowNS is an SQL expression for the database's current time in Unix nanoseconds.
	// Leases are compared with the database's clock, never a replica's, so that replicas
	// with skewed clocks agree on which lease has lapsed.
	nowNS string
	// lockThread, when not empty, serialises writers of one thread inside a transaction
	// (PostgreSQL's transaction-scoped advisory lock; SQLite's immediate transactions
	// already serialise every writer).
	lockThread string
	// lockOwner, when not empty, serialises the creation of one owner's threads inside a
	// transaction, so that the count checked against server.max_threads_per_principal is
	// exact (PostgreSQL; SQLite's single writer already serialises them). Its keys are the
	// two-int4 form, a space apart from lockThread's.
	lockOwner string
	// trySweep, when not empty, takes the thread sweep's lock for the transaction or
	// answers false when another replica holds it (PostgreSQL).
	trySweep string

	// notifyStop, when not empty, announces a stop request to the listening replicas,
	// inside the transaction that records it (delivered at COMMIT).
	notifyStop string

	// skipLocked locks the rows a claim selects, skipping those another claimer holds
	// (PostgreSQL); SQLite's immediate transactions already serialise claimers.
	skipLocked string

	// forShare share-locks the run row a fenced write checks, until its transaction ends,
	// so that a takeover's UPDATE of the row waits for the write to commit or roll back
	// (PostgreSQL; a plain EXISTS lets the takeover commit between the check and the
	// write's COMMIT: design/fencing.md). SQLite's single writer already serialises them.
	forShare string

	rewrite func(string) string
	cache   sync.Map // query -> rewritten query
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

var sqliteDialect = &dialect{
	name:    "sqlite",
	nowNS:   `CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER)`,
	rewrite: func(q string) string { return placeholder.ReplaceAllString(q, "?$1") },
}

var postgresDialect = &dialect{
	name:       "postgres",
	nowNS:      `CAST(extract(epoch FROM clock_timestamp()) * 1000000000 AS BIGINT)`,
	lockThread: `SELECT pg_advisory_xact_lock(hashtext($1))`,
	lockOwner:  `SELECT pg_advisory_xact_lock(1, hashtext($1))`,
	trySweep:   `SELECT pg_try_advisory_xact_lock(2, 0)`,
	notifyStop: `SELECT pg_notify('` + stopChannel + `', $1)`,
	skipLocked: `FOR UPDATE SKIP LOCKED`,
	forShare:   ` FOR SHARE`,
}

// stopChannel is the NOTIFY channel of stop requests.
const stopChannel = "baton_stop"

// q returns query in this dialect.
func (d *dialect) q(query string) string {
	if d.rewrite == nil {
		return query
	}
	if v, ok := d.cache.Load(query); ok {
		return v.(string)
	}
	r := d.rewrite(query)
	d.cache.Store(query, r)
	return r
}

// rewriteNoCache is q for queries built at run time (their text varies with the batch size,
// so caching them would grow without bound).
func (d *dialect) rewriteNoCache(query string) string {
	if d.rewrite == nil {
		return query
	}
	return d.rewrite(query)
}
