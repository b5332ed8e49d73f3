package server

import (
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
	resp, err := http.Get(p.admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
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
