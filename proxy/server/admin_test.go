package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
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
