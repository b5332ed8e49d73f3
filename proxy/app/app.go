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
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/version"
	"github.com/qas-dev/qas/proxy/fastpath"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
	"github.com/qas-dev/qas/proxy/pool/auth"
	"github.com/qas-dev/qas/proxy/pool/endpoints"
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

	// The pooled data plane (issue #20, docs/pooling.md). Mode is "sidecar" or
	// "front". A sidecar pools when PoolFronts is set (or Fronts, by a caller).
	Mode                string
	Workload            string
	PoolFronts          string
	PoolSecretFile      string
	PoolSecretDir       string
	PoolDecisionTimeout time.Duration
	PoolMaxBody         int64
	// PoolKeepMaxBody and PoolKeepBudget bound the request bodies a sender keeps
	// while their requests are at a front (server.PoolConfig.KeepMaxBody).
	PoolKeepMaxBody, PoolKeepBudget int64
	FrontMaxQueue                   int
	FrontMaxWait                    time.Duration
	FrontPollTimeout                time.Duration
	// PoolFrontService names the front's Service in the pod's namespace
	// (POD_NAMESPACE): Main watches its EndpointSlices (port PoolFrontPortName) for
	// the ready replicas, keeping the last list for PoolFrontsMaxStale after the API
	// server is lost. The webhook sets it for workloads with routing: pooled.
	PoolFrontService   string
	PoolFrontPortName  string
	PoolFrontsMaxStale time.Duration
	// Fronts, when set by a caller (an EndpointSlice watcher), replaces the static
	// --pool-fronts list; it is not a flag.
	Fronts pool.FrontSource
}

// Modes of qas-proxy.
const (
	ModeSidecar = "sidecar"
	ModeFront   = "front"
)

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
	fs.StringVar(&f.Mode, "mode", ModeSidecar, "sidecar (a reverse proxy in front of the app) or front (the shared queue of the pooled data plane: overflow requests wait there until a sidecar with a free slot pulls them)")
	fs.StringVar(&f.Workload, "workload", "", "the workload this sidecar serves (a lowercase DNS name); names its queue at the fronts and its secret")
	fs.StringVar(&f.PoolFronts, "pool-fronts", "", "comma-separated host:port of the front replicas; when set, requests that find every slot busy overflow to a front, and a free slot pulls from them (needs --concurrency, --workload, --pool-secret-file)")
	fs.StringVar(&f.PoolFrontService, "pool-front-service", "", "name of the front's Service in the pod's namespace ($POD_NAMESPACE): the ready front replicas come from its EndpointSlices (needs list/watch on endpointslices there, which the decider grants for routing: pooled); instead of --pool-fronts")
	fs.StringVar(&f.PoolFrontPortName, "pool-front-port-name", sidecar.PoolPortName, "the front Service's port name to overflow to and pull from")
	fs.DurationVar(&f.PoolFrontsMaxStale, "pool-fronts-max-stale", endpoints.DefaultMaxStale, "how long the last list of fronts is used after the API server is lost; past it the sidecar queues locally")
	fs.StringVar(&f.PoolSecretFile, "pool-secret-file", "", "file holding the workload's 32-byte pooling secret (raw, or 64 hex digits); re-read when it changes, the previous key accepted for a minute")
	fs.StringVar(&f.PoolSecretDir, "pool-secret-dir", "", "front mode: directory with one secret file per workload, named by the workload (a Secret volume); alternative to --workload with --pool-secret-file")
	fs.DurationVar(&f.PoolDecisionTimeout, "pool-decision-timeout", pool.DefaultDecisionTimeout, "how long a sidecar waits for a front to accept an overflow request before queueing it locally")
	fs.Int64Var(&f.PoolMaxBody, "pool-max-body", pool.DefaultMaxBody, "largest request body (bytes, known length) that may overflow; larger ones are served locally")
	fs.Int64Var(&f.PoolKeepMaxBody, "pool-keep-max-body", server.DefaultKeepMaxBody, "largest request body (bytes) a sidecar keeps while its request is at a front, so that a request the front gives back unseen (no pod took it in time) is served locally; a larger one gets the front's 503 then (0: keep none, only bodiless requests come back)")
	fs.Int64Var(&f.PoolKeepBudget, "pool-keep-budget", server.DefaultKeepBudget, "bytes of request bodies a sidecar keeps at once for requests at a front (at least --pool-keep-max-body); a body that does not fit is not kept")
	fs.IntVar(&f.FrontMaxQueue, "front-max-queue", 1000, "front mode: requests each workload's queue holds; more are refused (503, the sender queues locally)")
	fs.DurationVar(&f.FrontMaxWait, "front-max-wait", 5*time.Second, "front mode: longest wait of a request in the queue; past it the sender's client gets 503 with Retry-After (at most 1m)")
	fs.DurationVar(&f.FrontPollTimeout, "front-poll-timeout", 5*time.Second, "front mode: how long a pull waits for a request before 204 (at most 20s)")
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
	return f.validatePool()
}

// validatePool checks the pooled data plane's flags.
func (f Flags) validatePool() error {
	if f.Workload != "" && !auth.ValidWorkload(f.Workload) {
		return cli.Usagef("workload", "%q is not a lowercase DNS name", f.Workload)
	}
	if f.PoolDecisionTimeout <= 0 || f.PoolDecisionTimeout > 10*time.Second {
		return cli.Usagef("pool-decision-timeout", "%s is not in (0, 10s]", f.PoolDecisionTimeout)
	}
	if f.PoolMaxBody < 0 || f.PoolMaxBody > 64<<20 {
		return cli.Usagef("pool-max-body", "%d is not in [0, 64 MiB]", f.PoolMaxBody)
	}
	if f.PoolKeepMaxBody < 0 || f.PoolKeepMaxBody > 64<<20 {
		return cli.Usagef("pool-keep-max-body", "%d is not in [0, 64 MiB]", f.PoolKeepMaxBody)
	}
	if f.PoolKeepBudget < f.PoolKeepMaxBody || f.PoolKeepBudget > 1<<30 {
		return cli.Usagef("pool-keep-budget", "%d is not in [--pool-keep-max-body %d, 1 GiB]", f.PoolKeepBudget, f.PoolKeepMaxBody)
	}
	for _, a := range f.frontList() {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return cli.Usagef("pool-fronts", "%q is not host:port: %v", a, err)
		}
	}
	switch f.Mode {
	case ModeFront:
		if f.PoolFronts != "" {
			return cli.Usagef("pool-fronts", "is for sidecars, not --mode front")
		}
		if f.PoolFrontService != "" {
			return cli.Usagef("pool-front-service", "is for sidecars, not --mode front")
		}
		if (f.PoolSecretDir == "") == (f.PoolSecretFile == "") {
			return cli.Usagef("pool-secret-dir", "front mode needs --pool-secret-dir, or --workload with --pool-secret-file")
		}
		if f.PoolSecretFile != "" && f.Workload == "" {
			return cli.Usagef("workload", "--pool-secret-file needs --workload")
		}
		if f.FrontMaxQueue <= 0 {
			return cli.Usagef("front-max-queue", "%d is not positive", f.FrontMaxQueue)
		}
		if f.FrontMaxWait <= 0 || f.FrontMaxWait > pool.MaxFrontWait {
			return cli.Usagef("front-max-wait", "%s is not in (0, %s]", f.FrontMaxWait, pool.MaxFrontWait)
		}
		if f.FrontPollTimeout <= 0 || f.FrontPollTimeout > pool.MaxPollTimeout {
			return cli.Usagef("front-poll-timeout", "%s is not in (0, %s]", f.FrontPollTimeout, pool.MaxPollTimeout)
		}
	case ModeSidecar:
		if f.PoolSecretDir != "" {
			return cli.Usagef("pool-secret-dir", "is for --mode front; a sidecar reads --pool-secret-file")
		}
		if f.PoolFronts != "" && f.PoolFrontService != "" {
			return cli.Usagef("pool-front-service", "give the fronts either statically (--pool-fronts) or by their Service, not both")
		}
		if f.PoolFrontsMaxStale <= 0 {
			return cli.Usagef("pool-fronts-max-stale", "%s is not positive", f.PoolFrontsMaxStale)
		}
		if f.PoolFronts == "" && f.PoolFrontService == "" && f.Fronts == nil {
			return nil
		}
		if f.Workload == "" || f.PoolSecretFile == "" {
			return cli.Usagef("pool-fronts", "pooling needs --workload and --pool-secret-file")
		}
		if f.Concurrency == 0 {
			return cli.Usagef("pool-fronts", "pooling needs --concurrency: a request overflows when every slot is busy")
		}
	default:
		return cli.Usagef("mode", "%q is not sidecar or front", f.Mode)
	}
	return nil
}

// frontList splits --pool-fronts.
func (f Flags) frontList() []string {
	var out []string
	for _, a := range strings.Split(f.PoolFronts, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Run starts the proxy and serves until ctx ends. ready, if not nil, receives the
// bound serving and admin addresses once listening.
func Run(ctx context.Context, f Flags, log *zap.Logger, ready func(addr, admin string)) error {
	if f.Mode == ModeFront {
		return runFront(ctx, f, log, ready)
	}
	rec := measure.New(time.Now, f.Concurrency, f.Queue)
	var poolCfg *server.PoolConfig
	if f.PoolFronts != "" || f.Fronts != nil {
		keys, err := auth.NewFileKeyring(f.Workload, f.PoolSecretFile, time.Now)
		if err != nil {
			return err
		}
		fronts := f.Fronts
		if fronts == nil {
			fronts = pool.Static(f.frontList())
		}
		keepMax := f.PoolKeepMaxBody
		if keepMax == 0 {
			keepMax = -1 // PoolConfig's "keep none"
		}
		poolCfg = &server.PoolConfig{Workload: f.Workload, Keys: keys, Fronts: fronts,
			DecisionTimeout: f.PoolDecisionTimeout, MaxBody: f.PoolMaxBody, KeepMaxBody: keepMax, KeepBudget: f.PoolKeepBudget}
	}
	queue := f.Queue
	if f.Concurrency == 0 {
		queue = 0
	}
	srv, err := server.Listen(server.Config{
		Upstream: f.Upstream, UpstreamTimeout: f.UpstreamTimeout, DialTimeout: f.DialTimeout,
		ConcurrencyLimit: f.Concurrency, QueueLimit: queue, UpstreamProtocol: server.UpstreamProtocol(f.UpstreamProtocol),
		UpstreamIdleTimeout: f.UpstreamIdleTimeout, ClientBodyTimeout: f.ClientBodyTimeout, ClientWriteTimeout: f.ClientWriteTimeout,
		UpstreamWriteTimeout: f.UpstreamWriteTimeout, Pool: poolCfg,
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
		zap.Int("concurrency", f.Concurrency), zap.Bool("fast_path", srv.FastPath()), zap.Bool("pooling", poolCfg != nil))
	if ready != nil {
		ready(srv.Addr(), srv.AdminAddr())
	}
	return srv.Serve(ctx)
}

// runFront runs qas-proxy in front mode.
func runFront(ctx context.Context, f Flags, log *zap.Logger, ready func(addr, admin string)) error {
	var keys *auth.Keyring
	var err error
	if f.PoolSecretDir != "" {
		keys, err = auth.NewDirKeyring(f.PoolSecretDir, time.Now)
	} else {
		keys, err = auth.NewFileKeyring(f.Workload, f.PoolSecretFile, time.Now)
	}
	if err != nil {
		return err
	}
	rec := measure.New(time.Now, 0, f.FrontMaxQueue)
	srv, err := server.ListenFront(pool.FrontConfig{
		Keys: keys, MaxQueue: f.FrontMaxQueue, MaxWait: f.FrontMaxWait, PollTimeout: f.FrontPollTimeout,
		MaxRequestBytes: f.PoolMaxBody + int64(f.MaxHeaderBytes) + 4<<10,
	}, server.Options{
		Listen: f.Listen, AdminListen: f.AdminListen, ReadHeaderTimeout: f.ReadHeaderTimeout,
		IdleTimeout: f.IdleTimeout, DrainPeriod: f.Drain, ShutdownTimeout: f.ShutdownTimeout,
	}, rec, log)
	if err != nil {
		return err
	}
	log.Info("front serving", zap.String("version", version.Get()), zap.String("listen", srv.Addr()), zap.String("admin", srv.AdminAddr()),
		zap.Int("max_queue", f.FrontMaxQueue), zap.Duration("max_wait", f.FrontMaxWait))
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
	if f.Mode == ModeSidecar && f.PoolFrontService != "" && f.Fronts == nil {
		w, err := endpoints.NewInCluster(ctx, getenv("POD_NAMESPACE"), f.PoolFrontService, f.PoolFrontPortName,
			endpoints.Options{MaxStale: f.PoolFrontsMaxStale, Log: log.Named("fronts")})
		if err != nil {
			// Queue locally rather than crash-loop the pod: the app is served as
			// through a plain Service, and the log says why pooling is off.
			log.Warn("pooling off: cannot watch the front's EndpointSlices", zap.Error(err))
		} else {
			f.Fronts = w
		}
	}
	if err := Run(ctx, f, log, nil); err != nil {
		fmt.Fprintf(stderr, "qas-proxy: %v\n", err)
		return 1
	}
	return 0
}
