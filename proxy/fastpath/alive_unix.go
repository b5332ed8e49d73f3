//go:build linux || darwin || freebsd || netbsd || openbsd

package fastpath

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and has nothing unread: a
// non-blocking peek sees EOF if the application closed it, and data if it sent
// something unasked (such as a 408 before closing).
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		_ = n
		ok = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && ok
}
