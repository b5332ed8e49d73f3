// Package e2e tests the collector end to end: real qas-proxy instances in front of the
// example app, under Poisson load from qas-loadgen, scraped by the pipeline, written to
// a real InfluxDB 1.8 and read back through the Flux store.
package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/examples/app"
	"github.com/qas-dev/qas/examples/loadgen"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
	"github.com/qas-dev/qas/proxy/stats"
)

// startPod runs the example app behind a real qas-proxy on loopback and returns the
// proxy's serving URL and its /stats URL.
// startPods starts n pods (startPod) and returns their serving URLs and scrape
// targets: target(i) names pod i, and its URL is the pod's /stats.
func startPods(t *testing.T, n int, target func(i int) scrape.Target) (serving []string, targets []scrape.Target) {
	t.Helper()
	for i := range n {
		s, st := startPod(t)
		tg := target(i)
		tg.URL = st
		serving, targets = append(serving, s), append(targets, tg)
	}
	return serving, targets
}

func startPod(t *testing.T) (serving, statsURL string) {
	return startPodWithClock(t, nil)
}

// startPodWithClock is startPod with the proxy's clock (nil: the machine's).
func startPodWithClock(t *testing.T, clock measure.Clock) (serving, statsURL string) {
	t.Helper()
	upstream := httptest.NewServer(app.Handler())
	t.Cleanup(upstream.Close)
	rec := measure.New(clock, 0, 0)
	srv, err := server.Listen(server.Config{Upstream: upstream.Listener.Addr().String(), UpstreamTimeout: 10 * time.Second},
		server.Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"}, rec, zap.NewNop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return "http://" + srv.Addr(), "http://" + srv.AdminAddr() + "/stats"
}

// TestProxiesToInfluxToSnapshot sends Poisson arrivals at rate λ with exponential
// service times of mean μ⁻¹ to two proxied pods, collects every second into a real
// InfluxDB, and checks the λ and E[S] that the Flux store returns.
//
// Tolerances: the arrivals in T seconds are Poisson with mean λT, so the measured rate
// has relative standard deviation 1/√(λT) (λ=40/s, T=8 s: 5.6 %); we allow 4σ. The
// mean of n exponential service times has relative standard deviation 1/√n (n≈320:
// 5.6 %) and timer overshoot and proxy overhead only lengthen it, so E[S] must be above
// μ⁻¹(1−4/√n) and below the mean latency the client observed; it must also equal the
// proxies' own totals within 2 %. Each 4σ bound fails falsely with probability < 1e-4.
func TestProxiesToInfluxToSnapshot(t *testing.T) {
	db := influxtest.Start(t)
	const (
		lambda  = 40.0
		runFor  = 8 * time.Second
		meanSvc = 20 * time.Millisecond
	)
	serving, targets := startPods(t, 2, func(i int) scrape.Target {
		return scrape.Target{Namespace: "shop", Workload: "web", Pod: fmt.Sprintf("web-%d", i), Node: fmt.Sprintf("node-%d", i)}
	})
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 200 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	p := &pipeline.Pipeline{Scraper: scrape.NewScraper(nil, 8, 2*time.Second, nil, zap.NewNop()), Sink: w}

	ctx := context.Background()
	var statsURLs []string
	for _, tg := range targets {
		statsURLs = append(statsURLs, tg.URL)
	}
	first := p.Run(ctx, targets) // baselines
	before, err := loadgen.Snapshots(ctx, http.DefaultClient, statsURLs)
	require.NoError(t, err)
	require.Zero(t, first.Points)
	start := time.Now()
	type out struct {
		r   loadgen.Result
		err error
	}
	gen := make(chan out, 1)
	go func() {
		r, err := loadgen.Run(ctx, loadgen.Config{
			Targets: serving, Path: fmt.Sprintf("/work?sleep=%s&dist=exp", meanSvc),
			Rates: []float64{lambda}, Step: time.Second, Duration: runFor, MaxInFlight: 1000, Seed: 7,
		}, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}, nil)
		gen <- out{r, err}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var res out
loop:
	for {
		select {
		case res = <-gen:
			break loop
		case <-tick.C:
			p.Run(ctx, targets)
		}
	}
	require.NoError(t, res.err)
	last := p.Run(ctx, targets) // every response has been received: the totals are complete
	require.Len(t, last.Workloads, 1)
	after, err := loadgen.Snapshots(ctx, http.DefaultClient, statsURLs)
	require.NoError(t, err)
	proxyTotals, err := loadgen.Total(before, after)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	written, _, dropped := w.Counts()
	require.Zero(t, dropped)
	require.Positive(t, written)

	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	st := &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	snap, err := st.Snapshot(ctx, store.Query{Namespace: "shop", Workload: "web", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)

	// Total arrivals = Σ λ_i·Δt_i over the workload points (the first interval starts
	// at the baseline scrape); E[S] pools each interval's mean weighted by its
	// arrivals, which equal its completions up to the few requests in flight at a scrape.
	var total, svcSum, scvSum float64
	from := start
	for _, s := range snap.ArrivalRates {
		n := s.Rate * s.Time.Sub(from).Seconds()
		total += n
		from = s.Time
		at := snapshotAt(t, client, s.Time)
		svcSum += n * at.ServiceTime
		scvSum += n * at.ServiceSCV
		t.Logf("%s n=%.1f E[S]=%.2fms scv=%.2f", s.Time.Format("15:04:05.000"), n, at.ServiceTime*1000, at.ServiceSCV)
	}
	require.InDelta(t, float64(res.r.Sent), total, 0.02*float64(res.r.Sent)+2,
		"arrivals read back from InfluxDB vs sent by the generator")
	sigma := 1 / math.Sqrt(lambda*runFor.Seconds())
	require.InEpsilon(t, lambda, total/runFor.Seconds(), 4*sigma, "measured λ vs nominal λ")
	es := svcSum / total
	svcSigma := meanSvc.Seconds() / math.Sqrt(total)
	// What went through InfluxDB equals what the proxies measured, up to weighting
	// intervals by arrivals rather than completions: the requests in flight at each
	// scrape shift weight between neighbouring intervals whose means differ by
	// about 1/√(λ·1 s) (16 %). On a loaded machine a scrape can find several
	// requests in flight, so the shift reaches a few per cent; 5 % still catches a
	// unit, field or aggregation error.
	require.InEpsilon(t, proxyTotals.ServiceMean, es, 0.05, "E[S] read back vs the proxies' own totals")
	// Against the generator: overhead only lengthens service, so the lower bound is
	// statistical; the upper bound is physical, since the proxy's service time is
	// part of the latency the client saw (a fixed overhead allowance would fail on a
	// loaded machine).
	require.GreaterOrEqual(t, es, meanSvc.Seconds()-4*svcSigma, "E[S] below the service time sent")
	var clientMean float64
	for _, l := range res.r.Latencies {
		clientMean += l
	}
	clientMean /= float64(len(res.r.Latencies))
	require.LessOrEqual(t, es, clientMean, "E[S] above the client-observed mean latency")
	// Exponential service: SCV 1. The sample SCV of n exponentials has standard
	// deviation ≈ √(8/n) (0.16 at n=320); 4σ either side.
	scv := scvSum / total
	scvSigma := math.Sqrt(8 / total)
	require.InDelta(t, 1, scv, 4*scvSigma, "SCV of exponential service")

	// The service-time quantiles of the newest point are what the collector
	// computed from the proxies' service histograms in its last cycle (none
	// if nothing completed in it), and every point with requests has them,
	// ascending, at or below the histogram bound above the client's slowest
	// response (quantiles are interpolated inside their bucket).
	lastM := last.Workloads[pipeline.WorkloadKey{Namespace: "shop", Workload: "web"}]
	if lastM.ServiceQuantiles == nil {
		require.Nil(t, snap.ServiceQuantiles)
	} else {
		require.Len(t, snap.ServiceQuantiles, len(lastM.ServiceQuantiles))
		for i, q := range snap.ServiceQuantiles {
			require.InDelta(t, lastM.ServiceQuantiles[i], q.Seconds, 1e-12*q.Seconds, "p%v read back", q.Percentile)
		}
	}
	slowest := slices.Max(res.r.Latencies)
	if i := sort.SearchFloat64s(stats.DefaultLatencyBounds, slowest); i < len(stats.DefaultLatencyBounds) {
		slowest = stats.DefaultLatencyBounds[i]
	}
	withQuantiles := 0
	for _, s := range snap.ArrivalRates {
		at := snapshotAt(t, client, s.Time)
		if at.ServiceTime == 0 {
			continue
		}
		require.NotNil(t, at.ServiceQuantiles, "a point with completions at %s has service quantiles", s.Time)
		withQuantiles++
		for i, q := range at.ServiceQuantiles {
			require.Positive(t, q.Seconds)
			require.LessOrEqual(t, q.Seconds, slowest)
			if i > 0 {
				require.GreaterOrEqual(t, q.Seconds, at.ServiceQuantiles[i-1].Seconds)
			}
		}
	}
	require.Positive(t, withQuantiles)

	require.Len(t, snap.Pods, 2)
	require.Equal(t, []string{"web-0", "web-1"}, []string{snap.Pods[0].Name, snap.Pods[1].Name})
	require.Equal(t, "node-0", snap.Pods[0].Node)
	require.Equal(t, "node-1", snap.Pods[1].Node)
	require.Equal(t, snap.ArrivalRates[len(snap.ArrivalRates)-1].Time, snap.DataTime)
	t.Logf("sent %d, read back %.1f arrivals (λ %.2f/s); E[S] %.2f ms; SCV %.2f; %d points",
		res.r.Sent, total, total/runFor.Seconds(), es*1000, scv, int(written))
}

// snapshotAt reads the workload's point at exactly time ts.
func snapshotAt(t *testing.T, client influxdb2.Client, ts time.Time) measurement.Workload {
	t.Helper()
	st := &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	snap, err := st.Snapshot(context.Background(), store.Query{Namespace: "shop", Workload: "web", Now: ts, Window: time.Nanosecond})
	require.NoError(t, err)
	return snap
}
