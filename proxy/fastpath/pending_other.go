//go:build !unix

package fastpath

import "net"

// Pending cannot look at the socket here: it reports nothing waiting.
func Pending(net.Conn) bool { return false }
