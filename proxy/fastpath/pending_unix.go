//go:build unix

package fastpath

import (
	"net"
	"syscall"
)

// Pending reports whether the connection nc has bytes or an end of stream waiting to
// be read, without reading them and without waiting. It takes no read lock, so it may
// run while another goroutine is blocked reading nc (as net/http's Transport always
// is on an idle connection).
func Pending(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	pending := false
	err = rc.Control(func(fd uintptr) {
		var buf [1]byte
		for {
			_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if rerr == syscall.EINTR {
				continue
			}
			pending = rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK
			return
		}
	})
	return err != nil || pending
}
