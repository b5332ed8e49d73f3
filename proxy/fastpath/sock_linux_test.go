//go:build linux

package fastpath

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSockReadWrite(t *testing.T) {
	c, s := tcpPair(t)
	cs := newSock(c)
	require.NotNil(t, cs)

	n, err := cs.Write([]byte("ping"))
	require.NoError(t, err)
	require.Equal(t, 4, n)
	buf := make([]byte, 4)
	_, err = io.ReadFull(s, buf)
	require.NoError(t, err)
	require.Equal(t, "ping", string(buf))

	_, err = s.Write([]byte("pong"))
	require.NoError(t, err)
	got := make([]byte, 16)
	n, err = cs.Read(got)
	require.NoError(t, err)
	require.Equal(t, "pong", string(got[:n]))

	n, err = cs.Read(nil)
	require.NoError(t, err, "an empty read returns at once")
	require.Zero(t, n)

	require.NoError(t, s.Close())
	_, err = cs.Read(got)
	require.ErrorIs(t, err, io.EOF)
}

func TestSockReadHonoursDeadline(t *testing.T) {
	c, _ := tcpPair(t)
	cs := newSock(c)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := cs.Read(make([]byte, 8))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

func TestSockWriteToClosedPeerFails(t *testing.T) {
	c, s := tcpPair(t)
	cs := newSock(c)
	require.NoError(t, s.SetLinger(0))
	require.NoError(t, s.Close()) // RST
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = cs.Write([]byte("x"))
		time.Sleep(time.Millisecond)
	}
	require.Error(t, err, "writing to a reset connection fails (and raises no SIGPIPE)")
	var errno syscall.Errno
	require.True(t, errors.As(err, &errno), "the error carries the errno: %v", err)
}

func TestSockWriteThenRead(t *testing.T) {
	t.Run("reply after the request", func(t *testing.T) {
		c, s := tcpPair(t)
		cs := newSock(c)
		go func() {
			buf := make([]byte, 7)
			if _, err := io.ReadFull(s, buf); err == nil && string(buf) == "request" {
				_, _ = s.Write([]byte("reply"))
			}
		}()
		buf := make([]byte, 64)
		wrote, n, err := cs.WriteThenRead([]byte("request"), buf, false)
		require.NoError(t, err)
		require.True(t, wrote)
		require.Equal(t, "reply", string(buf[:n]))
	})
	t.Run("peer closes instead of replying", func(t *testing.T) {
		c, s := tcpPair(t)
		cs := newSock(c)
		go func() {
			buf := make([]byte, 7)
			_, _ = io.ReadFull(s, buf)
			s.Close()
		}()
		wrote, _, err := cs.WriteThenRead([]byte("request"), make([]byte, 64), false)
		require.True(t, wrote)
		require.ErrorIs(t, err, io.EOF)
	})
	t.Run("request larger than the socket takes at once", func(t *testing.T) {
		c, s := tcpPair(t)
		// Small fixed buffers (no autotuning), so that 1 MiB cannot go at once.
		require.NoError(t, c.SetWriteBuffer(16<<10))
		require.NoError(t, s.SetReadBuffer(64<<10))
		cs := newSock(c)
		req := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: the send must wait
		done := make(chan []byte, 1)
		go func() {
			time.Sleep(50 * time.Millisecond) // let the sender fill the socket first
			got := make([]byte, len(req))
			if _, err := io.ReadFull(s, got); err != nil {
				done <- nil
				return
			}
			_, _ = s.Write([]byte("done"))
			done <- got
		}()
		buf := make([]byte, 64)
		wrote, n, err := cs.WriteThenRead(req, buf, false)
		require.NoError(t, err)
		require.True(t, wrote)
		require.Equal(t, "done", string(buf[:n]))
		require.Equal(t, req, <-done, "the peer received the whole request, in order")
	})
	t.Run("reset connection", func(t *testing.T) {
		c, s := tcpPair(t)
		cs := newSock(c)
		require.NoError(t, s.SetLinger(0))
		require.NoError(t, s.Close())
		time.Sleep(10 * time.Millisecond)
		_, _, err := cs.WriteThenRead([]byte("request"), make([]byte, 64), false)
		require.Error(t, err)
	})
}

// TestSockWriteThenReadChecksFirst: with check, WriteThenRead sends nothing on a
// connection the peer has sent on or closed since its last reply (errStale), and the
// peer receives nothing; on a quiet connection it sends and reads the reply as
// without check.
func TestSockWriteThenReadChecksFirst(t *testing.T) {
	tests := []struct {
		name  string
		peer  func(t *testing.T, s *net.TCPConn) // what the peer does before the request
		stale bool
	}{
		{name: "quiet", peer: func(*testing.T, *net.TCPConn) {}},
		{name: "bytes waiting", peer: func(t *testing.T, s *net.TCPConn) {
			_, err := s.Write([]byte("HTTP/1.1 408 Request Timeout\r\n\r\n"))
			require.NoError(t, err)
		}, stale: true},
		{name: "one byte waiting", peer: func(t *testing.T, s *net.TCPConn) {
			_, err := s.Write([]byte("x"))
			require.NoError(t, err)
		}, stale: true},
		{name: "end of stream", peer: func(t *testing.T, s *net.TCPConn) {
			require.NoError(t, s.CloseWrite())
		}, stale: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, s := tcpPair(t)
			cs := newSock(c)
			tt.peer(t, s)
			// A write on loopback is in the receiver's queue when it returns; the
			// peek must see it. Waiting until it shows leaves no doubt.
			if tt.stale {
				require.Eventually(t, func() bool { return Pending(c) }, 5*time.Second, time.Millisecond)
			}
			got := make(chan string, 1)
			go func() {
				_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 7)
				if _, err := io.ReadFull(s, buf); err != nil {
					got <- ""
					return
				}
				_, _ = s.Write([]byte("reply"))
				got <- string(buf)
			}()
			// A bound on the wait: sent on a closed stream, the request would get no
			// reply.
			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
			buf := make([]byte, 64)
			wrote, n, err := cs.WriteThenRead([]byte("request"), buf, true)
			if !tt.stale {
				require.NoError(t, err)
				require.True(t, wrote)
				require.Equal(t, "reply", string(buf[:n]))
				require.Equal(t, "request", <-got)
				return
			}
			require.ErrorIs(t, err, errStale)
			require.False(t, wrote)
			require.Zero(t, n)
			c.Close()
			require.Empty(t, <-got, "the peer received nothing")
		})
	}
}

func TestSockReadWriteAllocateNothing(t *testing.T) {
	c, s := tcpPair(t)
	ss := newSock(s)
	go func() { // echo
		buf := make([]byte, 4)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	msg, buf := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := ss.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ss, buf); err != nil {
			t.Fatal(err)
		}
		_, n, err := ss.WriteThenRead(msg, buf, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ss, buf[n:]); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
