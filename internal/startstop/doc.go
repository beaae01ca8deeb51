// Package startstop is the start/stop helper of Baton's background services (a heartbeat,
// a sweep, a takeover scan, a model probe), as river's startstop: a named piece of work that
// runs on its own goroutine from Start until Stop, which waits for it to return.
package startstop
