package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/qas-dev/qas/proxy/fastpath"
	"github.com/qas-dev/qas/proxy/limit"
	"github.com/qas-dev/qas/proxy/measure"
)

// Options are the listener settings around the proxy.
type Options struct {
	Listen, AdminListen string
	// ReadHeaderTimeout cuts off clients that send headers too slowly.
	ReadHeaderTimeout time.Duration
	// MaxHeaderBytes bounds request headers; larger ones get a 431.
	MaxHeaderBytes int
	// IdleTimeout closes idle client keep-alive connections.
	IdleTimeout time.Duration
	// DrainPeriod is how long the proxy keeps serving after a stop signal while
	// /readyz fails, so endpoints are removed before it closes.
	DrainPeriod time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests after the drain period.
	ShutdownTimeout time.Duration
	// AdminIdleTimeout closes idle admin connections (0: DefaultAdminIdleTimeout).
	AdminIdleTimeout time.Duration
	// FastPath serves plain HTTP/1.1 on the fast path (proxy/fastpath) and hands every
	// other connection to the general net/http path. The fast path speaks only
	// HTTP/1.1 to the application, so it is off when Config.UpstreamProtocol is h2c.
	FastPath bool
	// Sleep waits on the recorder's clock for the per-second arrival counts
	// (nil: measure.RealSleep); tests with a fake clock inject a fake one.
	Sleep measure.Sleep
}

// Admin connection limits: a scrape or probe is one small request.
const (
	adminReadTimeout  = 10 * time.Second
	adminWriteTimeout = 30 * time.Second
	// DefaultAdminIdleTimeout closes idle admin connections (Options.AdminIdleTimeout).
	DefaultAdminIdleTimeout = 60 * time.Second
)

// Server is a running proxy: the serving and admin listeners.
type Server struct {
	Recorder *measure.Recorder
	serving  *http.Server
	fast     *fastpath.Server
	proxy    *Proxy
	admin    *http.Server
	servingL net.Listener
	adminL   net.Listener
	draining atomic.Bool
	log      *zap.Logger
	opts     Options
	lim      *limit.Limiter
	freed    <-chan struct{} // slot releases, for the pull loops (pooling only)
}

// Listen binds both listeners (so callers learn the addresses before serving).
func Listen(cfg Config, opts Options, rec *measure.Recorder, log *zap.Logger) (*Server, error) {
	lim := limit.New(cfg.ConcurrencyLimit, cfg.QueueLimit)
	p, err := NewProxy(cfg, rec, lim, log)
	if err != nil {
		return nil, err
	}
	s := &Server{Recorder: rec, log: log, opts: opts, proxy: p, lim: lim}
	var handOver func() bool
	if p.pool != nil {
		s.freed = lim.EnableFreed()
		// The general path overflows, and queues every request that has to wait
		// (so that the drain can offer the queue to a front); the fast path hands it
		// every request that finds each slot busy. Both drop a client's Qas- fields.
		handOver = lim.Busy
	}
	if opts.FastPath && cfg.UpstreamProtocol != UpstreamH2C {
		s.fast, err = fastpath.New(fastpath.Config{
			Upstream: cfg.Upstream, UpstreamTimeout: cfg.UpstreamTimeout, DialTimeout: cfg.DialTimeout,
			MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost, ReadHeaderTimeout: opts.ReadHeaderTimeout,
			UpstreamIdleTimeout: cfg.UpstreamIdleTimeout, UpstreamWriteTimeout: cfg.UpstreamWriteTimeout,
			ClientBodyTimeout: cfg.ClientBodyTimeout, ClientWriteTimeout: cfg.ClientWriteTimeout,
			IdleTimeout: opts.IdleTimeout, MaxHeaderBytes: opts.MaxHeaderBytes, HandOver: handOver,
		}, rec, lim, log.Named("fastpath"))
		if err != nil {
			return nil, err
		}
	}
	s.servingL, err = net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", opts.Listen, err)
	}
	s.adminL, err = net.Listen("tcp", opts.AdminListen)
	if err != nil {
		s.servingL.Close()
		return nil, fmt.Errorf("admin listen %s: %w", opts.AdminListen, err)
	}
	// h2c lets HTTP/2 clients without TLS (gRPC in a mesh-less cluster) through;
	// HTTP/1.1 requests pass the wrapper untouched.
	s.serving = &http.Server{
		Handler:           h2c.NewHandler(p, &http2.Server{}),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	// Scrapers and probes keep connections alive; one that goes quiet, or never
	// reads, is closed instead of being held forever.
	s.admin = &http.Server{Handler: NewAdmin(rec, cfg.Upstream, &s.draining), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: adminReadTimeout, WriteTimeout: adminWriteTimeout, IdleTimeout: opts.AdminIdleTimeout, MaxHeaderBytes: 16 << 10}
	if s.admin.IdleTimeout <= 0 {
		s.admin.IdleTimeout = DefaultAdminIdleTimeout
	}
	return s, nil
}

// FastPath reports whether plain HTTP/1.1 takes the fast path (Options.FastPath, unless
// the application is spoken to over h2c).
func (s *Server) FastPath() bool { return s.fast != nil }

// Addr and AdminAddr are the bound addresses.
func (s *Server) Addr() string      { return s.servingL.Addr().String() }
func (s *Server) AdminAddr() string { return s.adminL.Addr().String() }

// Serve serves until ctx ends, then drains: /readyz fails at once, requests are still
// served for DrainPeriod, then the listeners close and in-flight requests finish (up to
// ShutdownTimeout). No accepted request is dropped.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 3)
	if s.fast != nil {
		go func() { errc <- s.fast.Serve(s.servingL) }()
		go func() { errc <- s.serving.Serve(s.fast.Fallback()) }()
	} else {
		// The fast path guards the connections it hands over; here every one is.
		maxHead := s.serving.MaxHeaderBytes
		if maxHead == 0 {
			maxHead = http.DefaultMaxHeaderBytes
		}
		go func() { errc <- s.serving.Serve(fastpath.GuardListener(s.servingL, maxHead+4<<10, s.Recorder)) }()
	}
	go func() { errc <- s.admin.Serve(s.adminL) }()
	// The per-second arrival counts (issue #15) run beside the request path, on
	// the recorder's clock, until Serve returns.
	perSecond := s.Recorder.CountPerSecond(s.opts.Sleep)
	perSecondDone := make(chan struct{})
	perSecondCtx, stopPerSecond := context.WithCancel(context.Background())
	go func() {
		defer close(perSecondDone)
		perSecond.Run(perSecondCtx)
	}()
	defer func() { stopPerSecond(); <-perSecondDone }()
	pullDone := make(chan struct{})
	pullCtx, stopPull := context.WithCancel(context.Background())
	defer func() { stopPull(); <-pullDone }()
	if s.proxy.pool != nil {
		go func() {
			defer close(pullDone)
			s.proxy.pool.RunPull(pullCtx, s.lim, s.freed, s.proxy.servePulled)
		}()
	} else {
		close(pullDone)
	}
	select {
	case err := <-errc:
		if s.fast != nil {
			cctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = s.fast.Shutdown(cctx)
		}
		s.serving.Close()
		s.admin.Close()
		s.proxy.CloseIdle()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	if s.proxy.pool != nil {
		// A draining pod takes no more work from the fronts; what it pulled is
		// served before the shutdown below waits for the rest.
		s.proxy.pool.StartDrain()
	}
	// From now on every response closes its connection (the general path's say
	// so in Proxy.ServeHTTP), so that no client is on a keep-alive connection when
	// the listener closes.
	s.proxy.draining.Store(true)
	if s.fast != nil {
		s.fast.StartDrain()
	}
	s.log.Info("draining", zap.Duration("period", s.opts.DrainPeriod))
	time.Sleep(s.opts.DrainPeriod)
	timeout := s.opts.ShutdownTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	fastErr := make(chan error, 1)
	if s.fast != nil {
		go func() { fastErr <- s.fast.Shutdown(sctx) }()
	} else {
		fastErr <- nil
	}
	err := s.serving.Shutdown(sctx)
	_ = s.admin.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if ferr := <-fastErr; err == nil {
		err = ferr
	}
	s.proxy.CloseIdle()
	s.log.Info("stopped", zap.Int64("in_flight_left", s.Recorder.InFlight()))
	return err
}
