//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package a2a

import "net"

// connAlive cannot inspect a connection on this platform: a dead pooled connection shows
// when its write fails (then the request is retried on a new one) or when the response
// does not come.
func connAlive(net.Conn) bool { return true }
