package server

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/qas-dev/qas/proxy/fastpath"
)

// errUnsolicited is what the general path's Transport reads from an application
// connection on which the application sent bytes while no request was outstanding.
var errUnsolicited = errors.New("qas-proxy: the application sent bytes on an idle connection; connection closed")

// appConn is a connection from the general path's Transport to the application
// (HTTP/1.1 only). It keeps bytes the application sends on an idle connection (a 408
// before closing it, the late body of a response to HEAD) from ever being read as the
// response to the next request, which net/http's Transport does when the bytes and the
// next request cross; the next client would get another exchange's bytes. The
// Transport's trace hooks (traceAppConn) tell it when a request takes the connection
// and when the connection goes back to the pool. It also bounds every write to the
// application (writeTimeout), so an application that stops reading a request body
// cannot hold the proxy.
type appConn struct {
	net.Conn
	writeTimeout time.Duration

	mu   sync.Mutex
	seq  uint64 // requests that took the connection
	idle bool   // pooled, and no request written on it since: nothing may arrive
	// stale: the application sent bytes while the connection idled; it is closed.
	stale bool
}

func (c *appConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		bad := c.idle || c.stale
		c.mu.Unlock()
		if bad {
			c.Close()
			return 0, errUnsolicited
		}
	}
	return n, err
}

func (c *appConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.idle && fastpath.Pending(c.Conn) {
		// The application sent something, or closed, while the connection idled
		// and the Transport has not read it yet: nothing is written, so the
		// Transport resends the request on a new connection.
		c.stale = true
	}
	c.idle = false
	stale := c.stale
	c.mu.Unlock()
	if stale {
		c.Close()
		return 0, errUnsolicited
	}
	if c.writeTimeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	}
	return c.Conn.Write(p)
}

// taken notes that a request took the connection and returns the request's number.
// The connection stays idle until the request is written: no answer can come before.
func (c *appConn) taken() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	return c.seq
}

// pooled marks the connection idle, unless a later request has taken it already.
func (c *appConn) pooled(seq uint64) {
	c.mu.Lock()
	if c.seq == seq {
		c.idle = true
	}
	c.mu.Unlock()
}

// dialApp returns a DialContext for the Transport that makes appConns.
func dialApp(d *net.Dialer, writeTimeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &appConn{Conn: nc, writeTimeout: writeTimeout}, nil
	}
}

// traceAppConn returns ctx with hooks that tell the appConn a request uses when the
// request takes it and when it goes back to the pool.
func traceAppConn(ctx context.Context) context.Context {
	var conn *appConn
	var seq uint64
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*appConn); ok {
				conn, seq = c, c.taken()
			}
		},
		PutIdleConn: func(err error) {
			if err == nil && conn != nil {
				conn.pooled(seq)
			}
		},
	})
}
