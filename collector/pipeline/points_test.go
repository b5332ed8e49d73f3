package pipeline

import (
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/stats"
)

func fields(p *write.Point) map[string]any {
	out := map[string]any{}
	for _, f := range p.FieldList() {
		out[f.Key] = f.Value
	}
	return out
}

// TestWorkloadPointServiceQuantiles: the workload point carries the service
// quantiles under their fields when measured, and none of them when not (an
// idle interval: no zeros the decider would read as a distribution).
func TestWorkloadPointServiceQuantiles(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	m := aggregate.Metrics{Time: at, ServiceQuantiles: []float64{0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08}}
	require.Len(t, m.ServiceQuantiles, len(stats.ServicePercentiles))
	got := fields(WorkloadPoint("ns", "w", m))
	for i, f := range influx.ServiceQuantileFields {
		require.Equal(t, m.ServiceQuantiles[i], got[f], f)
	}
	m.ServiceQuantiles = nil
	got = fields(WorkloadPoint("ns", "w", m))
	for _, f := range influx.ServiceQuantileFields {
		require.NotContains(t, got, f)
	}
	require.Contains(t, got, influx.FieldLatencyP95)
}
