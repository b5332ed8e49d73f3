// Package app is qas-collector: every interval it discovers the injected pods, scrapes
// their proxies, joins CPU from metrics.k8s.io, and writes pod, workload and node
// points to InfluxDB. Flags have QAS_COLLECTOR_* environment overrides.
package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/qas-dev/qas/collector/cpu"
	"github.com/qas-dev/qas/collector/discovery"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/kubeconfig"
	"github.com/qas-dev/qas/internal/kubelog"
	"github.com/qas-dev/qas/internal/version"
)

// Flags are qas-collector's settings.
type Flags struct {
	Influx                               influx.Options
	Interval, ScrapeTimeout              time.Duration
	Concurrency, BufferPoints            int
	Namespace, Kubeconfig, MetricsListen string
	CPU                                  bool
	Log                                  cli.LogOptions
}

// EnvPrefix is the prefix of the environment variables that override qas-collector's
// flags (QAS_COLLECTOR_INTERVAL for --interval).
const EnvPrefix = "QAS_COLLECTOR"

// Parse reads args and the environment into Flags and validates them.
func Parse(args []string, getenv func(string) string) (Flags, error) {
	var f Flags
	fs := flag.NewFlagSet("qas-collector", flag.ContinueOnError)
	f.Influx.Register(fs, "InfluxDB base URL")
	fs.DurationVar(&f.Interval, "interval", 5*time.Second, "scrape interval")
	fs.DurationVar(&f.ScrapeTimeout, "scrape-timeout", 2*time.Second, "limit on one /stats request")
	fs.IntVar(&f.Concurrency, "concurrency", 64, "proxies scraped at once")
	fs.IntVar(&f.BufferPoints, "buffer-points", 100_000, "points held while InfluxDB is unreachable (at most about 610 bytes each); older ones are dropped (and counted) beyond this")
	fs.StringVar(&f.Namespace, "namespace", "", "only this namespace (empty = all)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty = in-cluster)")
	fs.StringVar(&f.MetricsListen, "metrics-listen", ":9902", "address for /metrics and /healthz")
	fs.BoolVar(&f.CPU, "cpu", true, "read CPU from metrics.k8s.io (needs metrics-server)")
	f.Log.Register(fs)
	if err := cli.Parse(fs, EnvPrefix, args, getenv); err != nil {
		return Flags{}, err
	}
	return f, f.validate()
}

func (f Flags) validate() error {
	if err := f.Influx.Validate(); err != nil {
		return err
	}
	if f.Interval <= 0 {
		return cli.Usagef("interval", "%s is not positive", f.Interval)
	}
	if f.ScrapeTimeout <= 0 || f.ScrapeTimeout > f.Interval {
		return cli.Usagef("scrape-timeout", "%s must be positive and at most --interval (%s)", f.ScrapeTimeout, f.Interval)
	}
	if f.Concurrency < 1 {
		return cli.Usagef("concurrency", "%d is less than 1", f.Concurrency)
	}
	if f.BufferPoints < 5000 {
		return cli.Usagef("buffer-points", "%d is less than one batch (5000)", f.BufferPoints)
	}
	if _, _, err := net.SplitHostPort(f.MetricsListen); err != nil {
		return cli.Usagef("metrics-listen", "%q is not host:port: %v", f.MetricsListen, err)
	}
	return nil
}

// Collector is the running loop's state.
type Collector struct {
	Discovery *discovery.Discovery
	CPU       *cpu.Source // nil: no CPU
	Pipeline  *pipeline.Pipeline
	Writer    *influx.Writer
	Log       *zap.Logger
	cpuErrors prometheus.Counter
}

// Cycle runs one collection: discover, read CPU, scrape, write.
func (c *Collector) Cycle(ctx context.Context, namespace string) (pipeline.Cycle, error) {
	pods, skipped, err := c.Discovery.Pods()
	if err != nil {
		return pipeline.Cycle{}, err
	}
	for pod, reason := range skipped {
		c.Log.Debug("pod not scraped", zap.String("pod", pod), zap.String("reason", reason))
	}
	res := make(map[string]pipeline.Resources, len(pods))
	targets := make([]scrape.Target, len(pods))
	for i, p := range pods {
		targets[i] = p.Target
		res[p.Key()] = pipeline.Resources{Request: p.CPURequest, Limit: p.CPULimit}
	}
	if c.CPU != nil {
		usage, err := c.CPU.Pods(ctx, namespace)
		if err != nil {
			c.cpuErrors.Inc()
			c.Log.Warn("pod CPU unavailable this cycle", zap.Error(err))
		}
		for k, u := range usage {
			if r, ok := res[k]; ok {
				r.Usage, r.HasUsage = u, true
				res[k] = r
			}
		}
		nodes, err := c.CPU.Nodes(ctx)
		if err != nil {
			c.cpuErrors.Inc()
			c.Log.Warn("node CPU unavailable this cycle", zap.Error(err))
		}
		for _, n := range nodes {
			c.Writer.Write(cpu.NodePoint(n))
		}
	}
	return c.Pipeline.RunWith(ctx, targets, res), nil
}

// Run runs the collector until ctx ends.
func Run(ctx context.Context, f Flags, cfg *rest.Config, log *zap.Logger) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	w, err := influx.NewWriter(influx.WriterConfig{URL: f.Influx.URL, Token: f.Influx.Token, Org: f.Influx.Org,
		Bucket: f.Influx.Bucket, BufferPoints: f.BufferPoints}, reg, log.Named("influx"))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	}()
	factory := discovery.NewFactory(kube, f.Namespace)
	c := &Collector{
		Discovery: discovery.New(factory), Writer: w, Log: log,
		Pipeline: &pipeline.Pipeline{Scraper: scrape.NewScraper(nil, f.Concurrency, f.ScrapeTimeout, reg, log.Named("scrape")), Sink: w,
			Log: log.Named("pipeline"),
			Invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "qas_collector_invalid_intervals_total",
				Help: "Pod or workload intervals left out because a derived quantity was not a finite number."}),
			Skewed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qas_collector_skewed_proxies",
				Help: "Proxies whose clock was more than 10 s off the collector's at the last cycle (their points carry the collector's time)."}),
		},
		cpuErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "qas_collector_cpu_errors_total", Help: "Failed reads of metrics.k8s.io."}),
	}
	reg.MustRegister(c.cpuErrors, c.Pipeline.Invalid, c.Pipeline.Skewed, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qas_collector_build_info",
		Help: "Always 1; the labels say which build of qas-collector this is.", ConstLabels: version.Labels()}, func() float64 { return 1 }))
	if f.CPU {
		mc, err := metricsclient.NewForConfig(cfg)
		if err != nil {
			return err
		}
		c.CPU = &cpu.Source{Kube: kube, Metrics: mc}
	}
	ln, err := net.Listen("tcp", f.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics listen %s: %w", f.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = msrv.Serve(ln) }()
	defer msrv.Close()

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if err := c.Discovery.WaitForSync(ctx); err != nil {
		return err
	}
	log.Info("collecting", zap.String("version", version.Get()), zap.Duration("interval", f.Interval), zap.String("influx", f.Influx.URL), zap.String("metrics", ln.Addr().String()))
	tick := time.NewTicker(f.Interval)
	defer tick.Stop()
	for {
		cyc, err := c.Cycle(ctx, f.Namespace)
		if err != nil {
			log.Warn("cycle failed", zap.Error(err))
		} else {
			log.Debug("cycle", zap.Int("pods", len(cyc.Results)), zap.Int("points", cyc.Points))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Main parses flags, builds the logger and the Kubernetes config, and runs. --version
// prints to stdout; errors and the log go to stderr.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	f, err := Parse(args, getenv)
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-collector", err)
	}
	log, err := f.Log.Build()
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-collector", err)
	}
	defer func() { _ = log.Sync() }()
	kubelog.Route(log)
	cfg, err := kubeconfig.Load(f.Kubeconfig)
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-collector", err)
	}
	return cli.ExitTo(stdout, stderr, "qas-collector", Run(ctx, f, cfg, log))
}
