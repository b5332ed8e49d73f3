package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scriptedApp is an app on loopback whose connections serve runs, given the
// connection and a reader of the request bytes; ended counts connections whose serve
// returned.
func scriptedApp(t *testing.T, serve func(nc net.Conn, br *bufio.Reader)) (addr string, ended *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ended = new(atomic.Int32)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { nc.Close() })
			go func() {
				defer ended.Add(1)
				serve(nc, bufio.NewReader(nc))
			}()
		}
	}()
	return ln.Addr().String(), ended
}

// readHead reads a request head and returns it.
func readHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil || line == "\r\n" {
			return head.String(), err
		}
	}
}

// TestEarlyAnswerDelivered: an app that answers (413) before reading an upload gets its
// answer to the client at once, while the client is still sending or has stopped;
// the connection closes after it, the body unread (issue #17, defect 5).
func TestEarlyAnswerDelivered(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up, _ := scriptedApp(t, func(nc net.Conn, br *bufio.Reader) {
			if _, err := readHead(br); err != nil {
				return
			}
			_, _ = io.WriteString(nc, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 9\r\n\r\ntoo large")
			<-t.Context().Done() // the connection stays open, the body unread
		})
		p := start(t, up, Config{}, Options{FastPath: fast})
		c := dialRaw(t, p.srv.Addr())
		// 64 KiB of a 100 MiB body, then nothing: the rest never comes.
		c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n" + strings.Repeat("x", 64<<10))
		resp, body, err := c.response("POST")
		require.NoError(t, err, "the app's early answer reaches the client")
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		require.Equal(t, "too large", body)
		if fast {
			// net/http reads and discards up to 256 KiB of an unread body to keep the
			// connection; the fast path closes it.
			require.True(t, resp.Close, "the body was not read: the connection closes")
		}
	})
}

// TestStallsAreCutOff: a client that stops sending its body, a client that reads none
// of its response, and an app that reads none of a request body are each cut off after
// their limit, freeing the app connection or the client (issue #17, defect 8). The
// limits are short here; the hang guard only catches a proxy that never cuts off.
func TestStallsAreCutOff(t *testing.T) {
	const limit = 100 * time.Millisecond
	cfg := Config{ClientBodyTimeout: limit, ClientWriteTimeout: limit, UpstreamWriteTimeout: limit}
	bothPaths(t, func(t *testing.T, fast bool) {
		t.Run("client stops sending its body", func(t *testing.T) {
			up, ended := scriptedApp(t, func(nc net.Conn, br *bufio.Reader) {
				req, err := http.ReadRequest(br)
				if err == nil {
					_, err = io.Copy(io.Discard, req.Body) // ends when the proxy gives up
				}
				if err == nil {
					_, _ = io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}
			})
			p := start(t, up, cfg, Options{FastPath: fast})
			c := dialRaw(t, p.srv.Addr())
			c.send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
			resp, _, err := c.response("POST")
			if err == nil {
				require.NotEqual(t, http.StatusOK, resp.StatusCode)
				require.True(t, resp.Close)
			}
			require.Eventually(t, func() bool { return ended.Load() == 1 }, hangGuard, time.Millisecond, "the app connection is released")
		})
		t.Run("client reads none of its response", func(t *testing.T) {
			wrote := make(chan error, 1)
			up, _ := scriptedApp(t, func(nc net.Conn, br *bufio.Reader) {
				if _, err := readHead(br); err != nil {
					return
				}
				big := strings.Repeat("x", 64<<20)
				_, err := io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 67108864\r\n\r\n"+big)
				wrote <- err
			})
			p := start(t, up, cfg, Options{FastPath: fast})
			c := dialRaw(t, p.srv.Addr())
			c.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
			select {
			case err := <-wrote:
				require.Error(t, err, "the proxy closed the app connection of a client that does not read")
			case <-time.After(hangGuard):
				t.Fatal("a client that reads nothing holds the app connection")
			}
		})
		t.Run("app reads none of the body", func(t *testing.T) {
			up, _ := scriptedApp(t, func(nc net.Conn, br *bufio.Reader) {
				_, _ = readHead(br)
				<-t.Context().Done() // reads no more, answers nothing
			})
			p := start(t, up, cfg, Options{FastPath: fast})
			c := dialRaw(t, p.srv.Addr())
			go func() {
				_, _ = io.WriteString(c.nc, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n"+strings.Repeat("x", 64<<20))
			}()
			resp, _, err := c.response("POST")
			require.NoError(t, err)
			require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
		})
	})
}
