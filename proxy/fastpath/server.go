// Package fastpath is qas-proxy's HTTP/1.1 fast path: a keep-alive forwarding loop,
// one goroutine per client connection, over pooled connections to the application,
// measuring every request exactly as the general path does.
//
// It handles only plain HTTP/1.1 requests in origin form with no body or a
// Content-Length body. Every other connection, from the request where the fast path
// first meets something it does not handle (h2c prior knowledge or Upgrade, WebSocket
// and other Upgrades, Expect, chunked request bodies, HTTP/1.0, oversized or malformed
// heads, …), is handed whole, unread bytes included, to the general net/http server
// through Fallback, which answers it as before (400, 431, 101, h2c, …).
package fastpath

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/limit"
	"github.com/qas-dev/qas/proxy/measure"
)

// Config configures the fast path. Its fields mean what the general path's do.
type Config struct {
	Upstream                     string
	UpstreamTimeout, DialTimeout time.Duration
	MaxIdleConnsPerHost          int
	// UpstreamIdleTimeout closes pooled application connections idle for longer
	// (0: never).
	UpstreamIdleTimeout time.Duration
	// Stall limits (0: none), kept by the sweeper: how long one read of a request
	// body from the client, one write to the application, or one write of a
	// response to the client may make no progress before both connections close.
	ClientBodyTimeout, UpstreamWriteTimeout, ClientWriteTimeout time.Duration
	ReadHeaderTimeout                                           time.Duration
	IdleTimeout                                                 time.Duration
	// MaxHeaderBytes is the general path's limit; the fast path reads heads of at
	// most min(8 KiB, MaxHeaderBytes+4 KiB) and hands larger ones over, so it never
	// accepts a head the general path would refuse.
	MaxHeaderBytes int
	// HandOver, when set (the pooled data plane is configured), is asked about every
	// request the fast path would forward, before it is admitted; true (every slot is
	// busy) hands the connection, from this request on, to the general path, which
	// may overflow the request to a shared front (proxy/pool). With it set, the fast
	// path also drops a client's Qas- fields, as it drops hop-by-hop ones: on the app
	// port no client speaks the pooled data plane's protocol.
	HandOver func() bool
}

// Server serves client connections on the fast path.
type Server struct {
	cfg      Config
	rec      *measure.Recorder
	lim      *limit.Limiter
	log      *zap.Logger
	pool     *pool
	fallback *chanListener
	readSize int

	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
	draining atomic.Bool // Shutdown began: no new connections
	closing  atomic.Bool // StartDrain began: every response closes its connection
	stop     chan struct{}

	served, handedOver atomic.Uint64
	epoch              time.Time     // the sweeper's generations count watchTicks since
	gen                atomic.Uint64 // the sweeper's latest generation
}

// New returns a fast-path server forwarding to cfg.Upstream, recording into rec and
// admitting through lim (nil: no limit).
func New(cfg Config, rec *measure.Recorder, lim *limit.Limiter, log *zap.Logger) (*Server, error) {
	if _, _, err := net.SplitHostPort(cfg.Upstream); err != nil {
		return nil, err
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = 1024
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = 1 << 20
	}
	if cfg.ReadHeaderTimeout <= 0 {
		return nil, errors.New("fast path: ReadHeaderTimeout must be positive")
	}
	s := &Server{
		cfg: cfg, rec: rec, lim: lim, log: log,
		pool:     newPool(cfg.Upstream, cfg.DialTimeout, cfg.MaxIdleConnsPerHost, nil, ticks(cfg.UpstreamIdleTimeout)),
		readSize: min(8<<10, cfg.MaxHeaderBytes+4<<10),
		conns:    map[*conn]struct{}{},
		stop:     make(chan struct{}),
		epoch:    time.Now(),
	}
	s.pool.gen = &s.gen
	s.fallback = newChanListener()
	return s, nil
}

// Fallback is the listener on which connections the fast path hands over arrive; serve
// it with the general net/http server.
func (s *Server) Fallback() net.Listener { return s.fallback }

// Served counts the requests served on the fast path and HandedOver the connections
// given to the general path.
func (s *Server) Served() uint64     { return s.served.Load() }
func (s *Server) HandedOver() uint64 { return s.handedOver.Load() }

// Serve accepts connections on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	if s.draining.Load() {
		ln.Close()
	}
	go s.housekeeping()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", zap.Error(err), zap.Duration("retry_in", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := s.newConn(nc)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// housekeeping sweeps the connections every watchTick: it starts watching clients of
// requests that wait long for the application, and keeps the idle and upstream
// timeouts. It also closes long-idle application connections. A generation is the
// number of watchTicks since the server was made, by the monotonic clock, so late or
// dropped ticks do not stretch the timeouts.
func (s *Server) housekeeping() {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	idleTicks, upTicks := ticks(s.cfg.IdleTimeout), ticks(s.cfg.UpstreamTimeout)
	var stallTicks [4]uint64
	stallTicks[phaseBodyRead] = ticks(s.cfg.ClientBodyTimeout)
	stallTicks[phaseAppWrite] = ticks(s.cfg.UpstreamWriteTimeout)
	stallTicks[phaseClientWrite] = ticks(s.cfg.ClientWriteTimeout)
	for i := 1; ; i++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		gen := uint64(time.Since(s.epoch) / watchTick)
		s.gen.Store(gen)
		s.mu.Lock()
		idle := idleTicks
		if s.closing.Load() && (idle == 0 || idle > ticks(drainIdle)) {
			idle = ticks(drainIdle)
		}
		for c := range s.conns {
			c.startWatch(gen)
			c.expire(gen, idle, upTicks)
			c.checkStall(gen, &stallTicks)
			c.checkEarly(gen)
		}
		s.mu.Unlock()
		if i%reapTicks == 0 {
			s.pool.reap()
		}
	}
}

// ticks is d in sweeper generations, rounded up; 0 for no limit.
func ticks(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + watchTick - 1) / watchTick)
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// newConnGrace is how long a connection that has sent nothing yet is left alone by
// Shutdown (as net/http does), since its first request may be on the way.
const newConnGrace = 5 * time.Second

// Shutdown stops accepting, lets every in-flight request finish (its response then
// says Connection: close), and closes idle connections, until none remain or ctx
// ends; then it closes what is left. Connections already handed to the general path
// are the general server's to shut down.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.draining.Swap(true) {
		return nil
	}
	s.closing.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	s.mu.Unlock()
	close(s.stop)
	s.fallback.Close()
	defer s.pool.close()
	wait := time.Millisecond
	for {
		if s.closeIdle() {
			return nil
		}
		select {
		case <-ctx.Done():
			s.closeAll()
			return ctx.Err()
		case <-time.After(wait):
			wait = min(2*wait, 100*time.Millisecond)
		}
	}
}

// StartDrain begins the drain before Shutdown: from now on every response says
// Connection: close and closes its connection, and connections idle for longer than
// drainIdle are closed, so that when Shutdown closes the listener no client is left
// on a keep-alive connection it may send on as it closes. An idle connection is not
// closed at once: under load its next request is usually on the way, and is better
// answered (with Connection: close) than met with a close. New connections are still
// served (endpoints leave Services only with a lag), each for one request.
func (s *Server) StartDrain() { s.closing.Store(true) }

// drainIdle is how long a connection may stay idle during the drain before it is
// closed.
const drainIdle = 500 * time.Millisecond

// closeIdle closes the idle connections and reports whether none remain.
func (s *Server) closeIdle() bool {
	now := s.rec.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		st := c.state.Load()
		if st == stateIdle || st == stateNew && now.Sub(c.accepted) > newConnGrace {
			if c.state.CompareAndSwap(st, stateClosed) {
				c.rwc.Close()
			}
		}
	}
	return len(s.conns) == 0
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.state.Store(stateClosed)
		c.rwc.Close()
	}
}

// chanListener is a net.Listener fed with connections handed over by the fast path.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return fallbackAddr{} }

// push hands c to the general server, or closes it if that has stopped.
func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

type fallbackAddr struct{}

func (fallbackAddr) Network() string { return "fastpath-fallback" }
func (fallbackAddr) String() string  { return "fastpath-fallback" }

// handedConn replays the bytes the fast path had buffered before reading the socket.
type handedConn struct {
	net.Conn
	br *bufio.Reader
}

func (h *handedConn) Read(p []byte) (int, error) {
	if h.br != nil {
		if h.br.Buffered() > 0 {
			return h.br.Read(p)
		}
		h.br = nil
	}
	return h.Conn.Read(p)
}
