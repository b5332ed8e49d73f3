//go:build darwin || freebsd || netbsd || openbsd

package fastpath

import "syscall"

// alive reports whether an idle connection is still open and has nothing unread: a
// non-blocking peek sees EOF if the application closed it, and data if it sent
// something unasked (such as a 408 before closing). On Linux, the connection's sock
// peeks (sock_linux.go).
func alive(c *upConn) bool {
	sc, ok := c.nc.(syscall.Conn)
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
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && ok
}
