//go:build linux || darwin || freebsd || netbsd || openbsd

package a2a

import (
	"errors"
	"net"
	"syscall"
)

// connAlive reports whether an idle connection can take a request: the peer has not
// closed it and sent nothing unasked. net/http learns this from the read goroutine every
// idle connection has; the direct path has none and peeks (non-blocking) instead. A
// connection that cannot be inspected is assumed alive.
func connAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, the connection is open. n == 0: the peer closed it;
		// n > 0: bytes nobody asked for; another error: broken.
		alive = n <= 0 && (errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK))
		return true
	})
	return err == nil && alive
}
