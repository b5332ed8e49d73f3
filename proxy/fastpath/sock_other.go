//go:build !linux

package fastpath

import "net"

// sock is Linux-only; elsewhere the connections' own Read and Write are used.
type sock struct{}

func newSock(net.Conn) *sock { return nil }

func (*sock) Read([]byte) (int, error)  { panic("fastpath: no raw sockets on this platform") }
func (*sock) Write([]byte) (int, error) { panic("fastpath: no raw sockets on this platform") }
func (*sock) WriteThenRead(_, _ []byte, _ bool) (bool, int, error) {
	panic("fastpath: no raw sockets on this platform")
}
