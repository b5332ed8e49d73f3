// Package runner is `qas-decider run`: the controller wired to the collector's
// measurements in InfluxDB, decisions written back to InfluxDB, leader election among
// replicas, and the /metrics, /healthz and /readyz endpoints.
package runner

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/leader"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/version"
)

// metrics are the decider's own Prometheus metrics (qas_decider_*).
type metrics struct {
	cycles, failures prometheus.Counter
	duration         prometheus.Histogram
	lastCycle        prometheus.Gauge
	leader           prometheus.Gauge
	decisions        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		cycles:    prometheus.NewCounter(prometheus.CounterOpts{Name: "qas_decider_cycles_total", Help: "Decision cycles run (as leader)."}),
		failures:  prometheus.NewCounter(prometheus.CounterOpts{Name: "qas_decider_reconcile_failures_total", Help: "QueueAutoscalers whose reconcile failed in a cycle."}),
		duration:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qas_decider_cycle_duration_seconds", Help: "Wall time of one decision cycle over every QueueAutoscaler.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		lastCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qas_decider_last_cycle_timestamp_seconds", Help: "Unix time the last cycle ended."}),
		leader:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "qas_decider_leader", Help: "1 while this replica holds the lease and acts."}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qas_decider_decisions_total", Help: "Decisions by action (none, horizontal, vertical, migrate, ...) and whether they were dry runs."}, []string{"action", "dry_run"}),
	}
	reg.MustRegister(m.cycles, m.failures, m.duration, m.lastCycle, m.leader, m.decisions)
	return m
}

// countingSink counts decisions before passing them on.
type countingSink struct {
	next measurement.DecisionSink
	m    *metrics
}

func (s countingSink) RecordDecision(ctx context.Context, of measurement.DecisionOf, d decide.Decision, dryRun bool) error {
	s.m.decisions.WithLabelValues(d.Action.String(), fmt.Sprint(dryRun)).Inc()
	return s.next.RecordDecision(ctx, of, d, dryRun)
}

// Runner drives the controller: a cycle over every QueueAutoscaler each interval,
// and in between the reconciles its watches ask for (a QueueAutoscaler created or
// changed, its pods turning Ready or going, its target changed).
type Runner struct {
	Ctrl     *controller.Controller
	Interval time.Duration
	Log      *zap.Logger
	Clock    clock.WithTicker
	m        *metrics
}

// Lead runs cycles until ctx ends; it is what the leader does.
func (r *Runner) Lead(ctx context.Context) {
	r.m.leader.Set(1)
	defer r.m.leader.Set(0)
	tick := r.Clock.NewTicker(r.Interval)
	defer tick.Stop()
	r.Ctrl.Run(ctx, tick.C(), controller.Hooks{
		Cycle: func(failed int, _ error, took time.Duration) {
			r.m.cycles.Inc()
			r.m.failures.Add(float64(failed))
			r.m.duration.Observe(took.Seconds())
			r.m.lastCycle.Set(float64(r.Clock.Now().UnixNano()) / 1e9)
		},
		Reconciled: func(_ string, err error) {
			if err != nil {
				r.m.failures.Inc()
			}
		},
	})
}

// Shutdown undoes the migrations in progress: the decider is stopping (a rolling
// update, or QAS being uninstalled) and must not leave a node tainted.
func (r *Runner) Shutdown(ctx context.Context) {
	if err := r.Ctrl.AbortMigrations(ctx, "the decider is stopping"); err != nil {
		r.Log.Error("migrations not fully undone on shutdown", zap.Error(err))
	}
}

// Run runs `qas-decider run` until ctx ends.
func Run(ctx context.Context, o Options, cfg *rest.Config, log *zap.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qas_decider_build_info",
			Help: "Always 1; the labels say which build of qas-decider this is.", ConstLabels: version.Labels()}, func() float64 { return 1 }))
	m := newMetrics(reg)
	w, err := influx.NewWriter(influx.WriterConfig{URL: o.Influx.URL, Token: o.Influx.Token, Org: o.Influx.Org,
		Bucket: o.Influx.Bucket, MetricsPrefix: "qas_decider"}, reg, log.Named("influx"))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Close(cctx); err != nil {
			log.Warn("decisions not flushed to InfluxDB", zap.Error(err))
		}
	}()
	client := influxdb2.NewClient(o.Influx.URL, o.Influx.Token)
	defer client.Close()
	flux := &store.Flux{Query: client.QueryAPI(o.Influx.Org), Bucket: o.Influx.Bucket}
	src := store.Source{Store: flux, Window: o.Window, RateWindow: o.RateWindow, MaxPodAge: o.MaxPodAge}
	if o.HistorySpan > 0 {
		src.History = &store.LongHistory{Store: flux, Span: o.HistorySpan, Step: o.HistoryStep}
	}
	sink := store.InfluxSink{W: w}
	ctrl, stopEvents, err := controller.NewForConfig(cfg, src, countingSink{sink, m}, log, clock.RealClock{})
	if err != nil {
		return err
	}
	defer stopEvents()
	ctrl.DryRun = o.DryRun
	ctrl.Workers, ctrl.MeasureTimeout = o.Workers, o.ReadDeadline()
	if ctrl.Front, err = o.Front(); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", o.MetricsListen)
	if err != nil {
		return fmt.Errorf("metrics listen %s: %w", o.MetricsListen, err)
	}
	srv := &http.Server{Handler: Handler(reg, ctrl), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	// The caches fill on every replica, so that a standby takes over warm. (The
	// shutdown below reads the API server directly: it needs no cache.)
	if err := ctrl.Start(ctx); err != nil {
		return err
	}
	r := &Runner{Ctrl: ctrl, Interval: o.Interval, Log: log, Clock: clock.RealClock{}, m: m}
	log.Info("deciding", zap.String("version", version.Get()), zap.Duration("interval", o.Interval), zap.String("influx", o.Influx.URL),
		zap.Bool("dryRun", o.DryRun), zap.Bool("leaderElect", o.LeaderElect), zap.String("identity", o.Identity),
		zap.String("metrics", ln.Addr().String()))
	if !o.LeaderElect {
		r.Lead(ctx)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		r.Shutdown(sctx)
		return nil
	}
	return leader.Run(ctx, ctrl.Kube, leader.Config{
		Namespace: o.LeaseNamespace, Name: o.LeaseName, Identity: o.Identity,
		LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		OnShutdown: r.Shutdown,
	}, log, r.Lead)
}

// Handler serves /metrics, /healthz (the process is alive) and /readyz (the API
// server answers; a standby replica is ready too, so that it can take over).
func Handler(reg *prometheus.Registry, ctrl *controller.Controller) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if err := ctrl.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			http.Error(w, "kube-apiserver not reachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
