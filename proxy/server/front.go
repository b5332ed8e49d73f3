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

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
)

// FrontServer is qas-proxy in front mode: the shared queue of the pooled data plane
// (proxy/pool.Front) on the serving port, and the admin port as a sidecar has it.
type FrontServer struct {
	Recorder *measure.Recorder
	front    *pool.Front
	serving  *http.Server
	admin    *http.Server
	servingL net.Listener
	adminL   net.Listener
	draining atomic.Bool
	log      *zap.Logger
	opts     Options
}

// ListenFront binds a front's listeners. cfg.Counters is filled from rec.
func ListenFront(cfg pool.FrontConfig, opts Options, rec *measure.Recorder, log *zap.Logger) (*FrontServer, error) {
	cfg.Counters = rec.EnableFront()
	if cfg.Now == nil {
		cfg.Now = rec.Now
	}
	cfg.Log = log.Named("front")
	f, err := pool.NewFront(cfg)
	if err != nil {
		return nil, err
	}
	s := &FrontServer{Recorder: rec, front: f, log: log, opts: opts}
	s.servingL, err = net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", opts.Listen, err)
	}
	s.adminL, err = net.Listen("tcp", opts.AdminListen)
	if err != nil {
		s.servingL.Close()
		return nil, fmt.Errorf("admin listen %s: %w", opts.AdminListen, err)
	}
	// No read or write timeout on the whole exchange: pulls wait up to the poll
	// timeout and results stream; the front bounds each wait and each read and
	// write itself.
	s.serving = &http.Server{Handler: f, ReadHeaderTimeout: opts.ReadHeaderTimeout, MaxHeaderBytes: 16 << 10,
		IdleTimeout: opts.IdleTimeout, ErrorLog: zap.NewStdLog(log.Named("http"))}
	s.admin = &http.Server{Handler: NewAdmin(rec, "", &s.draining), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: adminReadTimeout, WriteTimeout: adminWriteTimeout, IdleTimeout: opts.AdminIdleTimeout, MaxHeaderBytes: 16 << 10}
	if s.admin.IdleTimeout <= 0 {
		s.admin.IdleTimeout = DefaultAdminIdleTimeout
	}
	return s, nil
}

// Addr and AdminAddr are the bound addresses.
func (s *FrontServer) Addr() string      { return s.servingL.Addr().String() }
func (s *FrontServer) AdminAddr() string { return s.adminL.Addr().String() }

// Serve serves until ctx ends, then drains: /readyz fails and new overflow requests
// are refused (their senders queue them locally), pulls go on taking what is queued
// for up to DrainPeriod, then the server shuts down within ShutdownTimeout; requests
// still queued then get 503.
func (s *FrontServer) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.serving.Serve(s.servingL) }()
	go func() { errc <- s.admin.Serve(s.adminL) }()
	select {
	case err := <-errc:
		s.serving.Close()
		s.admin.Close()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.front.StartDrain()
	s.log.Info("draining", zap.Duration("period", s.opts.DrainPeriod))
	dctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainPeriod)
	s.front.Drain(dctx)
	cancel()
	s.front.Close()
	timeout := s.opts.ShutdownTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.serving.Shutdown(sctx)
	_ = s.admin.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
