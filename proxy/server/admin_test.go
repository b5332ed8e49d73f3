package server

import (
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/measure"
)

// TestAdminClosesIdleConnections: an admin connection left idle after a request is
// closed by the proxy, not held forever (issue #17, defect 10).
func TestAdminClosesIdleConnections(t *testing.T) {
	up := app(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, up, Config{}, Options{AdminIdleTimeout: 50 * time.Millisecond})
	c := dialRaw(t, p.srv.AdminAddr())
	c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _, err := c.response("GET")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.False(t, resp.Close, "kept alive at first")
	require.True(t, c.closed(), "the idle admin connection is closed (within the hang guard)")
}

// TestMetricsHaveRuntimeAndProcess: /metrics has the Go runtime's and the process's
// collectors, as every Go exporter does (issue #17, defect 10).
func TestMetricsHaveRuntimeAndProcess(t *testing.T) {
	up := app(t, func(w http.ResponseWriter, r *http.Request) {})
	p := start(t, up, Config{}, Options{})
	families := scrapeMetrics(t, p.admin)
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_open_fds", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		require.Contains(t, families, name)
	}
	require.Positive(t, families["go_goroutines"].Metric[0].GetGauge().GetValue())
	require.Positive(t, families["process_open_fds"].Metric[0].GetGauge().GetValue())
}

// TestMetricsPoolAndFront: with pooling configured (and in front mode), /metrics
// carries the pool and front counters of /stats.
func TestMetricsPoolAndFront(t *testing.T) {
	rec := measure.New(nil, 1, 1)
	var draining atomic.Bool
	a := NewAdmin(rec, "127.0.0.1:1", &draining)
	families := func() map[string]*dto.MetricFamily {
		w := httptest.NewRecorder()
		a.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(w.Body)
		require.NoError(t, err)
		return families
	}
	require.NotContains(t, families(), "qas_proxy_pool_overflow_total", "nothing about pooling unless configured")

	p, f := rec.EnablePool(), rec.EnableFront()
	rec.Arrive()
	p.Overflow(measure.OverflowRefused, time.Millisecond)
	p.FrontFailure()
	p.DrainKept()
	p.Expired(true)
	f.Accept()
	f.Dispatch(time.Millisecond)
	got := families()
	outcomes := map[string]float64{}
	for _, m := range got["qas_proxy_pool_overflow_total"].Metric {
		outcomes[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	require.Equal(t, map[string]float64{"accepted": 0, "refused": 1, "timeout": 0, "error": 0}, outcomes)
	require.Equal(t, 1.0, got["qas_proxy_pool_front_failures_total"].Metric[0].GetCounter().GetValue())
	for name, want := range map[string]map[string]float64{
		"qas_proxy_pool_drain_total":   {"pushed": 0, "kept": 1},
		"qas_proxy_pool_expired_total": {"requeued": 1, "relayed": 0},
	} {
		values := map[string]float64{}
		for _, m := range got[name].Metric {
			values[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
		require.Equal(t, want, values, name)
	}
	require.Equal(t, uint64(1), got["qas_proxy_pool_overflow_decision_seconds"].Metric[0].GetHistogram().GetSampleCount())
	require.Equal(t, 1.0, got["qas_front_accepted_total"].Metric[0].GetCounter().GetValue())
	require.Equal(t, uint64(1), got["qas_front_queue_wait_seconds"].Metric[0].GetHistogram().GetSampleCount())
	require.Equal(t, 0.0, got["qas_front_queue_length"].Metric[0].GetGauge().GetValue())
}

// TestMetricsServiceTimeHistogram: /metrics on the admin port exports /stats' service
// histogram as the Prometheus histogram qas_proxy_service_time_seconds, in the latency
// histogram's buckets, with ServiceSecondsSum as its sum. A rejected request (503, no
// service) and a queued one's wait are in the latency histogram only.
func TestMetricsServiceTimeHistogram(t *testing.T) {
	up, inApp, release := gatedApp(t, app)
	p := start(t, up, Config{ConcurrencyLimit: 1, QueueLimit: 1}, Options{})
	codes := fillSlotAndQueue(t, p, inApp)
	resp, err := http.Get(p.url + "/") // the slot and the queue are full
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	close(release)
	require.Equal(t, 200, <-codes)
	require.Equal(t, 200, <-codes)
	require.Eventually(t, func() bool { return snapshot(t, p).Completions == 3 }, 10*time.Second, 5*time.Millisecond)

	families := scrapeMetrics(t, p.admin)
	s := snapshot(t, p) // no request since the scrape: the same counts

	fam := families["qas_proxy_service_time_seconds"]
	require.NotNil(t, fam, "no qas_proxy_service_time_seconds family")
	require.Equal(t, dto.MetricType_HISTOGRAM, fam.GetType())
	require.Len(t, fam.Metric, 1)
	h := fam.Metric[0].GetHistogram()
	require.Equal(t, uint64(2), h.GetSampleCount(), "the two served requests, not the rejected one")
	require.Equal(t, s.Service.Total(), h.GetSampleCount())
	require.Equal(t, s.ServiceSecondsSum, h.GetSampleSum())
	// The text format's buckets: each bound of /stats, then +Inf counting everything.
	require.Len(t, h.Bucket, len(s.Service.Bounds)+1)
	var cum uint64
	for i, b := range h.Bucket[:len(s.Service.Bounds)] {
		cum += s.Service.Counts[i]
		require.Equal(t, s.Service.Bounds[i], b.GetUpperBound(), "bucket %d", i)
		require.Equal(t, cum, b.GetCumulativeCount(), "bucket %d (≤ %g s)", i, b.GetUpperBound())
	}
	require.True(t, math.IsInf(h.Bucket[len(s.Service.Bounds)].GetUpperBound(), 1))
	require.Equal(t, h.GetSampleCount(), h.Bucket[len(s.Service.Bounds)].GetCumulativeCount())

	latency := families["qas_proxy_latency_seconds"].Metric[0].GetHistogram()
	require.Equal(t, uint64(3), latency.GetSampleCount(), "the latency histogram counts the rejected request")
	require.Equal(t, len(h.Bucket), len(latency.Bucket), "the service histogram has the latency histogram's buckets")
	for i := range h.Bucket {
		require.Equal(t, latency.Bucket[i].GetUpperBound(), h.Bucket[i].GetUpperBound())
	}
	require.Positive(t, s.QueueWaitSecondsSum)
	// Each latency runs from arrival to the end: its wait, the moment between its
	// admission and service, and its service.
	require.Equal(t, s.LatencySecondsSum, latency.GetSampleSum(), "the sum of every observed latency")
	require.GreaterOrEqual(t, latency.GetSampleSum(), s.QueueWaitSecondsSum+s.ServiceSecondsSum)
}

// scrapeMetrics gets admin's /metrics and parses it into its families.
func scrapeMetrics(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}
