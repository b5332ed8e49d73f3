// Package app is the qas-proxy command: flags (with QAS_PROXY_* environment overrides),
// validation, and running the server until a stop signal.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/version"
	"github.com/qas-dev/qas/proxy/fastpath"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// Flags are qas-proxy's settings. The defaults suit a sidecar: it takes the pod's
// serving port, forwards to the app on localhost, and serves admin on its own port.
type Flags struct {
	Listen, AdminListen, Upstream      string
	UpstreamProtocol                   string
	UpstreamTimeout, DialTimeout       time.Duration
	UpstreamIdleTimeout                time.Duration
	ClientBodyTimeout                  time.Duration
	ClientWriteTimeout                 time.Duration
	UpstreamWriteTimeout               time.Duration
	ReadHeaderTimeout, IdleTimeout     time.Duration
	Drain, ShutdownTimeout             time.Duration
	Concurrency, Queue, MaxHeaderBytes int
	Procs                              int
	FastPath                           bool
	Log                                cli.LogOptions
}

// Parse reads args and the environment (getenv) into Flags and validates them.
func Parse(args []string, getenv func(string) string) (Flags, error) {
	var f Flags
	fs := flag.NewFlagSet("qas-proxy", flag.ContinueOnError)
	fs.StringVar(&f.Listen, "listen", ":8080", "serving address (the pod's serving port)")
	fs.StringVar(&f.AdminListen, "admin-listen", fmt.Sprintf(":%d", sidecar.DefaultAdminPort), "admin address for /metrics, /stats, /healthz, /readyz")
	fs.StringVar(&f.Upstream, "upstream", "127.0.0.1:8081", "the application's host:port")
	fs.StringVar(&f.UpstreamProtocol, "upstream-protocol", string(server.UpstreamHTTP1), "how the proxy speaks to the app: http1 (pooled HTTP/1.1 keep-alive) or h2c (HTTP/2 cleartext with prior knowledge, for gRPC and other HTTP/2-only apps; every request then takes the general net/http path, as the fast path speaks only HTTP/1.1 upstream)")
	fs.DurationVar(&f.UpstreamTimeout, "upstream-timeout", 60*time.Second, "answer 504 when the app sends no response headers within this (0 = no limit)")
	fs.DurationVar(&f.DialTimeout, "dial-timeout", 2*time.Second, "limit on connecting to the app")
	fs.DurationVar(&f.UpstreamIdleTimeout, "upstream-idle-timeout", fastpath.DefaultUpstreamIdleTimeout, "close pooled connections to the app idle for longer than this (0 = never); keep it below the app's own keep-alive timeout (Node 5s, gunicorn 2s), or requests race the app's close")
	fs.DurationVar(&f.ClientBodyTimeout, "client-body-timeout", 30*time.Second, "cut off a client whose request body makes no progress for this long (0 = no limit)")
	fs.DurationVar(&f.ClientWriteTimeout, "client-write-timeout", 30*time.Second, "cut off a client that reads none of its response for this long (0 = no limit)")
	fs.DurationVar(&f.UpstreamWriteTimeout, "upstream-write-timeout", 30*time.Second, "fail a request whose body the app reads none of for this long (0 = no limit)")
	fs.DurationVar(&f.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "cut off clients that take longer to send request headers")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", 120*time.Second, "close idle client connections after this")
	fs.DurationVar(&f.Drain, "drain", 5*time.Second, "after SIGTERM, keep serving this long with /readyz failing")
	fs.DurationVar(&f.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "after the drain, wait this long for in-flight requests; --drain plus this must end within the pod's terminationGracePeriodSeconds (Kubernetes' default 30 s; the injection webhook sets both from it)")
	fs.IntVar(&f.Concurrency, "concurrency", 0, "requests served at once, k (0 = unlimited)")
	fs.IntVar(&f.Queue, "queue", 1000, "requests that may wait for a slot when --concurrency is set; more get 503")
	fs.IntVar(&f.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block; larger gets 431")
	fs.BoolVar(&f.FastPath, "fast-path", true, "serve plain HTTP/1.1 on the fast path; h2c, Upgrade and other requests always take the general net/http path")
	fs.IntVar(&f.Procs, "procs", 1, "CPUs the proxy runs Go code on at once (GOMAXPROCS); a sidecar shares its pod's CPU with the app, and one is the cheapest per request. 0 = Go's default (all CPUs, the container's CPU limit, or $GOMAXPROCS)")
	f.Log.Register(fs)
	if err := cli.Parse(fs, "QAS_PROXY", args, getenv); err != nil {
		return Flags{}, err
	}
	return f, f.validate()
}

func (f Flags) validate() error {
	for name, addr := range map[string]string{"listen": f.Listen, "admin-listen": f.AdminListen, "upstream": f.Upstream} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return cli.Usagef(name, "%q is not host:port: %v", addr, err)
		}
	}
	if !slices.Contains(server.UpstreamProtocols, server.UpstreamProtocol(f.UpstreamProtocol)) {
		return cli.Usagef("upstream-protocol", "%q is not one of http1, h2c", f.UpstreamProtocol)
	}
	if f.Listen == f.AdminListen {
		return cli.Usagef("admin-listen", "must differ from --listen: admin endpoints are never served on the serving port")
	}
	for name, d := range map[string]time.Duration{"upstream-timeout": f.UpstreamTimeout, "dial-timeout": f.DialTimeout,
		"upstream-idle-timeout": f.UpstreamIdleTimeout, "client-body-timeout": f.ClientBodyTimeout,
		"client-write-timeout": f.ClientWriteTimeout, "upstream-write-timeout": f.UpstreamWriteTimeout,
		"read-header-timeout": f.ReadHeaderTimeout, "idle-timeout": f.IdleTimeout, "drain": f.Drain, "shutdown-timeout": f.ShutdownTimeout} {
		if d < 0 {
			return cli.Usagef(name, "%s is negative", d)
		}
	}
	if f.ReadHeaderTimeout == 0 {
		return cli.Usagef("read-header-timeout", "must be positive: without it slow clients hold connections forever")
	}
	if f.Concurrency < 0 {
		return cli.Usagef("concurrency", "%d is negative", f.Concurrency)
	}
	if f.Procs < 0 {
		return cli.Usagef("procs", "%d is negative", f.Procs)
	}
	if f.Queue < 0 {
		return cli.Usagef("queue", "%d is negative", f.Queue)
	}
	if f.MaxHeaderBytes < 1024 {
		return cli.Usagef("max-header-bytes", "%d is below 1024", f.MaxHeaderBytes)
	}
	return nil
}

// Run starts the proxy and serves until ctx ends. ready, if not nil, receives the
// bound serving and admin addresses once listening.
func Run(ctx context.Context, f Flags, log *zap.Logger, ready func(addr, admin string)) error {
	rec := measure.New(time.Now, f.Concurrency, f.Queue)
	queue := f.Queue
	if f.Concurrency == 0 {
		queue = 0
	}
	srv, err := server.Listen(server.Config{
		Upstream: f.Upstream, UpstreamTimeout: f.UpstreamTimeout, DialTimeout: f.DialTimeout,
		ConcurrencyLimit: f.Concurrency, QueueLimit: queue, UpstreamProtocol: server.UpstreamProtocol(f.UpstreamProtocol),
		UpstreamIdleTimeout: f.UpstreamIdleTimeout, ClientBodyTimeout: f.ClientBodyTimeout, ClientWriteTimeout: f.ClientWriteTimeout,
		UpstreamWriteTimeout: f.UpstreamWriteTimeout,
	}, server.Options{
		Listen: f.Listen, AdminListen: f.AdminListen, ReadHeaderTimeout: f.ReadHeaderTimeout,
		MaxHeaderBytes: f.MaxHeaderBytes, IdleTimeout: f.IdleTimeout, DrainPeriod: f.Drain, ShutdownTimeout: f.ShutdownTimeout,
		FastPath: f.FastPath,
	}, rec, log)
	if err != nil {
		return err
	}
	log.Info("serving", zap.String("version", version.Get()), zap.String("listen", srv.Addr()), zap.String("admin", srv.AdminAddr()),
		zap.String("upstream", f.Upstream), zap.String("upstream_protocol", f.UpstreamProtocol),
		zap.Int("concurrency", f.Concurrency), zap.Bool("fast_path", srv.FastPath()))
	if ready != nil {
		ready(srv.Addr(), srv.AdminAddr())
	}
	return srv.Serve(ctx)
}

// Main is the whole command: it returns the exit status. --version prints to stdout;
// errors and the log go to stderr.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	f, err := Parse(args, getenv)
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-proxy", err)
	}
	log, err := f.Log.Build()
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-proxy", err)
	}
	defer func() { _ = log.Sync() }()
	if f.Procs > 0 {
		runtime.GOMAXPROCS(f.Procs)
	}
	log.Info("go runtime", zap.Int("gomaxprocs", runtime.GOMAXPROCS(0)))
	if err := Run(ctx, f, log, nil); err != nil {
		fmt.Fprintf(stderr, "qas-proxy: %v\n", err)
		return 1
	}
	return 0
}
