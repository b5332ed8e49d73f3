package fastpath

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// idlePool returns a pool holding one idle connection to a loopback application, and
// the application's end of that connection.
func idlePool(tb testing.TB) (*pool, *upConn, net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	tb.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tb.Cleanup(func() { c.Close() })
			accepted <- c
		}
	}()
	p := newPool(ln.Addr().String(), time.Second, 4, new(atomic.Uint64), 0)
	tb.Cleanup(p.close)
	c, err := p.get()
	require.NoError(tb, err)
	require.False(tb, c.reused, "an empty pool dials")
	p.put(c)
	return p, c, <-accepted
}

// TestPoolGetChecksIdleConnection: every request gets an idle connection only if the
// application has neither closed it nor sent on it unasked.
func TestPoolGetChecksIdleConnection(t *testing.T) {
	tests := []struct {
		name    string
		app     func(t *testing.T, app net.Conn) // what the application does while the connection idles
		reusing bool
	}{
		{name: "open", app: func(*testing.T, net.Conn) {}, reusing: true},
		{name: "closed by the app", app: func(_ *testing.T, app net.Conn) { app.Close() }, reusing: false},
		{name: "sent on unasked", app: func(t *testing.T, app net.Conn) {
			_, err := app.Write([]byte("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n"))
			require.NoError(t, err)
		}, reusing: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, idle, app := idlePool(t)
			tt.app(t, app)
			c, err := p.get()
			require.NoError(t, err)
			require.Equal(t, tt.reusing, c == idle, "whether the idle connection is reused")
			require.Equal(t, tt.reusing, c.reused)
			c.nc.Close()
		})
	}
}

// TestPoolTakeDefersCheck: a connection taken with its check deferred is checked by
// its first send, whichever way that goes out (WriteThenRead for a request without a
// body, a plain write otherwise): on a connection the application sent on or closed
// while it idled, nothing is sent and the error is errStale.
func TestPoolTakeDefersCheck(t *testing.T) {
	apps := []struct {
		name  string
		app   func(t *testing.T, app net.Conn)
		stale bool
	}{
		{name: "open", app: func(*testing.T, net.Conn) {}},
		{name: "closed by the app", app: func(_ *testing.T, app net.Conn) { app.Close() }, stale: true},
		{name: "sent on unasked", app: func(t *testing.T, app net.Conn) {
			_, err := app.Write([]byte("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n"))
			require.NoError(t, err)
		}, stale: true},
	}
	for _, deferSend := range []bool{true, false} {
		for _, tt := range apps {
			name := tt.name + "/plain write"
			if deferSend {
				name = tt.name + "/WriteThenRead"
			}
			t.Run(name, func(t *testing.T) {
				p, idle, app := idlePool(t)
				tt.app(t, app)
				if tt.stale {
					require.Eventually(t, func() bool { return Pending(idle.nc) }, 5*time.Second, time.Millisecond)
				}
				c, err := p.take(true)
				require.NoError(t, err)
				require.Same(t, idle, c, "the check is left to the first send")
				require.True(t, c.check)
				received := make(chan string, 1)
				go func() {
					_ = app.SetReadDeadline(time.Now().Add(5 * time.Second))
					buf := make([]byte, 4)
					n, _ := io.ReadFull(app, buf)
					if n == 4 {
						_, _ = app.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
					}
					received <- string(buf[:n])
				}()
				c.deferSend = deferSend
				_, _ = c.bw.WriteString("GET ")
				err = c.bw.Flush()
				c.deferSend = false
				if err == nil {
					_, err = c.br.Peek(1)
				}
				require.False(t, c.check, "checked once")
				if !tt.stale {
					require.NoError(t, err)
					require.Equal(t, "GET ", <-received)
					return
				}
				require.ErrorIs(t, err, errStale)
				c.nc.Close()
				require.Empty(t, <-received, "nothing was sent")
			})
		}
	}
}

func TestPoolGetFreshAllocatesNothing(t *testing.T) {
	p, idle, _ := idlePool(t)
	allocs := testing.AllocsPerRun(200, func() {
		c, err := p.get()
		if err != nil || c != idle {
			t.Fatal("the idle connection was not reused", err)
		}
		p.put(c)
	})
	require.Zero(t, allocs)
}

// BenchmarkPoolGetFresh: taking an idle connection, which first checks that the
// application has neither closed it nor sent on it.
func BenchmarkPoolGetFresh(b *testing.B) {
	p, idle, _ := idlePool(b)
	for b.Loop() {
		c, err := p.get()
		if err != nil || c != idle {
			b.Fatal("the idle connection was not reused", err)
		}
		p.put(c)
	}
}

// TestPoolGetSkipsExpired: a connection idle for longer than the upstream idle timeout
// is closed, not reused, before the application's own idle timeout can race a request
// on it; reap closes such connections too.
func TestPoolGetSkipsExpired(t *testing.T) {
	p, idle, _ := idlePool(t)
	p.idleTicks = 3
	p.gen.Add(3)
	c, err := p.get()
	require.NoError(t, err)
	require.Same(t, idle, c, "idle for the timeout exactly: reused")
	p.put(c)
	p.gen.Add(4)
	c, err = p.get()
	require.NoError(t, err)
	require.NotSame(t, idle, c, "idle past the timeout: a new connection")
	p.put(c)
	p.gen.Add(4)
	p.reap()
	p.mu.Lock()
	require.Empty(t, p.idle, "reaped")
	p.mu.Unlock()
}
