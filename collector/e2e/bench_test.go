package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScrape1000 runs collection cycles over 1,000 in-process proxies' real
// /stats handlers (each recorder counts one request per cycle). It reports wall time
// per cycle (ns/op) and the process CPU time per cycle (cpu-ms/cycle; this includes
// the 1,000 servers answering, which share the process).
func BenchmarkScrape1000(b *testing.B) {
	const pods = 1000
	var targets []scrape.Target
	recs := make([]*measure.Recorder, pods)
	for i := range pods {
		recs[i] = measure.New(nil, 0, 0)
		srv := httptest.NewServer(server.NewAdmin(recs[i], "127.0.0.1:1", new(atomic.Bool)))
		b.Cleanup(srv.Close)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: fmt.Sprintf("w%d", i%50), Pod: fmt.Sprintf("p%d", i), Node: fmt.Sprintf("n%d", i%20), URL: srv.URL + "/stats"})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, MaxIdleConns: 2 * pods}}
	p := &pipeline.Pipeline{Scraper: scrape.NewScraper(client, 64, 5*time.Second, nil, zap.NewNop()), Sink: &countSink{}}
	ctx := context.Background()
	p.Run(ctx, targets) // baselines and connections
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		for _, r := range recs {
			a := r.Arrive()
			r.End(a, r.Begin(), 0, http.StatusOK, measure.OK)
		}
		c := p.Run(ctx, targets)
		if len(c.Pods) != pods {
			b.Fatalf("%d pods with an interval, want %d", len(c.Pods), pods)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/cycle")
}

type countSink struct{ n int }

func (c *countSink) Write(p ...*write.Point) { c.n += len(p) }

// BenchmarkWriteInflux measures points per second written to a real InfluxDB through
// the buffered writer, with the collector's qas_pod points (1,000 pods per cycle).
func BenchmarkWriteInflux(b *testing.B) {
	db := influxtest.Start(b)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 10 * time.Millisecond}, nil, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	const perCycle = 1000
	base := time.Now().Add(-time.Hour)
	start := time.Now()
	total := 0
	for i := 0; b.Loop(); i++ {
		pts := make([]*write.Point, perCycle)
		for j := range pts {
			pts[j] = write.NewPoint(influx.Pod,
				map[string]string{"namespace": "ns", "workload": fmt.Sprintf("w%d", j%50), "pod": fmt.Sprintf("p%d", j), "node": fmt.Sprintf("n%d", j%20)},
				map[string]any{"arrival_rate": 1.0, "service_mean_seconds": 0.02, "service_scv": 1.0, "queue_wait_mean_seconds": 0.0,
					"in_flight_mean": 0.02, "busy_ratio": 0.02, "error_rate": 0.0, "latency_p50_seconds": 0.01,
					"latency_p95_seconds": 0.05, "latency_p99_seconds": 0.08},
				base.Add(time.Duration(i)*time.Millisecond))
		}
		w.Write(pts...)
		total += perCycle
		for {
			written, _, dropped := w.Counts()
			if dropped > 0 {
				b.Fatalf("%v points dropped", dropped)
			}
			if int(written) >= total {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "points/s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
