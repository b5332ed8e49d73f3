package fastpath

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// upConn is a keep-alive connection to the application.
type upConn struct {
	nc      net.Conn
	sock    *sock // nc's socket for raw reads and writes; nil: use nc
	br      *bufio.Reader
	bw      *bufio.Writer
	reused  bool
	idleGen uint64 // the sweeper's generation when it was pooled

	// With deferSend, what bw flushes is kept in pending and sent by the next read,
	// which then waits for the reply without first trying to read (sock.WriteThenRead).
	deferSend bool
	pending   []byte

	// check: the connection was reused and not yet checked for bytes the application
	// sent, or an end of stream, while it idled (pool.take with deferCheck). Its first
	// send checks first, and fails with errStale, sending nothing, if there were any.
	check bool
}

// errStale: a reused connection turned out, just before the request was sent on it,
// to have bytes waiting or to have been closed by the application; nothing was sent.
var errStale = errors.New("fastpath: the application sent on or closed an idle connection")

// upWriter is where an upConn's bw flushes to.
type upWriter struct{ c *upConn }

func (w upWriter) Write(p []byte) (int, error) {
	c := w.c
	if c.deferSend {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	if c.check {
		// A send that is not WriteThenRead's checks on its own.
		c.check = false
		if !alive(c) {
			return 0, errStale
		}
	}
	if c.sock != nil {
		return c.sock.Write(p)
	}
	return c.nc.Write(p)
}

// upReader is what an upConn's br reads from: it first sends what is pending.
type upReader struct{ c *upConn }

func (r upReader) Read(p []byte) (int, error) {
	c := r.c
	if len(c.pending) > 0 {
		req := c.pending
		c.pending = c.pending[:0]
		check := c.check
		c.check = false
		if c.sock != nil {
			_, n, err := c.sock.WriteThenRead(req, p, check)
			return n, err
		}
		if check && !alive(c) {
			return 0, errStale
		}
		if _, err := c.nc.Write(req); err != nil {
			return 0, err
		}
	}
	if c.sock != nil {
		return c.sock.Read(p)
	}
	return c.nc.Read(p)
}

// Buffer sizes. A response head from the application must fit in upReadSize.
const (
	upReadSize  = 16 << 10
	upWriteSize = 8 << 10
	// DefaultUpstreamIdleTimeout closes pooled connections before common
	// applications close them (Node 5 s, gunicorn 2 s): a request sent on a
	// connection the application is closing fails, and only some can be resent.
	DefaultUpstreamIdleTimeout = time.Second
	// reapTicks is how often, in sweeper generations, expired idle connections are
	// closed.
	reapTicks = 10
)

// pool keeps idle connections to the application, newest first out (so that the
// oldest age out when load falls).
type pool struct {
	addr   string
	dialer net.Dialer
	max    int
	// gen is the sweeper's clock (Server.gen); a connection idle for more than
	// idleTicks of it is closed, not reused.
	gen       *atomic.Uint64
	idleTicks uint64

	mu     sync.Mutex
	idle   []*upConn
	closed bool
}

func newPool(addr string, dialTimeout time.Duration, maxIdle int, gen *atomic.Uint64, idleTicks uint64) *pool {
	return &pool{addr: addr, dialer: net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}, max: maxIdle, gen: gen, idleTicks: idleTicks}
}

// get returns an idle connection, or a new one. Every reused connection is first
// checked for having been closed by the application while idle, or for bytes the
// application sent unasked (a 408 before closing, the body of a response to HEAD): such
// a connection is closed, so no request is sent on a connection already dead and no
// byte read on it ever reaches another client.
func (p *pool) get() (*upConn, error) { return p.take(false) }

// take is get; with deferCheck, a reused connection's check is left to its first send
// (upConn.check), which on Linux makes it inside the wait for the reply that the send
// begins (sock.WriteThenRead): the same system call, without a wait of its own. A
// connection that fails the check then sends nothing and reports errStale, and the
// caller takes another. Callers that may consume input for the request before it is
// sent (a request body) check at once.
func (p *pool) take(deferCheck bool) (*upConn, error) {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if p.expired(c, p.gen.Load()) || !deferCheck && !alive(c) {
			c.nc.Close()
			continue
		}
		c.reused, c.check = true, deferCheck
		return c, nil
	}
	return p.dial()
}

// dial opens a new connection to the application.
func (p *pool) dial() (*upConn, error) {
	nc, err := p.dialer.Dial("tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &upConn{nc: nc, sock: newSock(nc)}
	c.br = bufio.NewReaderSize(upReader{c}, upReadSize)
	c.bw = bufio.NewWriterSize(upWriter{c}, upWriteSize)
	return c, nil
}

// put returns a connection whose last response was read to its end.
func (p *pool) put(c *upConn) {
	c.idleGen = p.gen.Load()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.max {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// expired reports whether c has been idle for longer than the idle timeout at
// generation gen.
func (p *pool) expired(c *upConn, gen uint64) bool {
	return p.idleTicks > 0 && gen-c.idleGen > p.idleTicks
}

// reap closes connections idle for longer than the idle timeout: the oldest are first
// in the pool.
func (p *pool) reap() {
	gen := p.gen.Load()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && p.expired(p.idle[n], gen) {
		n++
	}
	if n == 0 {
		p.mu.Unlock()
		return
	}
	old := append([]*upConn(nil), p.idle[:n]...)
	p.idle = append(p.idle[:0], p.idle[n:]...)
	p.mu.Unlock()
	for _, c := range old {
		c.nc.Close()
	}
}

// close closes every idle connection and refuses new ones.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}
