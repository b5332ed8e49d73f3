package matrix

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
	itrace "github.com/qas-dev/qas/internal/trace"
)

// TestPoolingMatrix: every workload (the warm ones too), setting and seed 1–3
// through the four data planes, each combination once.
func TestPoolingMatrix(t *testing.T) {
	cells := Pooling("nasa.gz")
	require.Len(t, cells, (len(Workloads(""))+len(WarmWorkloads()))*len(Settings())*3*4)
	seen := map[string]bool{}
	for _, c := range cells {
		require.False(t, seen[c.Name()], c.Name())
		seen[c.Name()] = true
		require.Contains(t, []sim.Routing{sim.RouteRandom, sim.RoutePeer, sim.RouteFront, sim.RouteOverflow}, c.Routing)
	}
	o := PoolingOptions()
	require.Equal(t, []string{"qas", "kpa", "hpa"}, o.Policies)
	require.Equal(t, []string{policy.OracleName, policy.PooledOracleName}, o.Yardsticks)
}

// TestPoolingRows runs one small cell per data plane and checks the
// comparison: a row per plane and policy (oracle-pooled is the yardstick,
// not a row), costs against the pooled queue's oracle, extra hops only on
// the peer and front planes, and the table's lines.
func TestPoolingRows(t *testing.T) {
	o := PoolingOptions()
	var rs []*Result
	for _, routing := range []sim.Routing{sim.RouteRandom, sim.RoutePeer, sim.RouteFront} {
		c := Cell{Workload: Workload{Name: "flash", Source: trace.PatternFlashCrowd, Scale: 3, Window: itrace.Window{End: 20 * 60e9}},
			Setting: Settings()[0], Seed: 1, Routing: routing}
		r, err := RunCell(c, o)
		require.NoError(t, err)
		base, ok := pooledOracleCost(r)
		require.True(t, ok)
		require.Positive(t, base)
		rs = append(rs, r)
	}
	rows := PoolingRows(rs)
	require.Len(t, rows, 3*4)
	for _, row := range rows {
		require.NotEqual(t, policy.PooledOracleName, row.Policy)
		require.Equal(t, 1, row.Cells)
		require.False(t, math.IsNaN(row.CostMedian) || math.IsInf(row.CostMedian, 0), "%+v", row)
		require.Positive(t, row.CostMedian)
		if row.Routing == "random" {
			require.Zero(t, row.ExtraHopPct, "%+v", row)
		}
	}
	hops := map[string]float64{}
	for _, row := range rows {
		if row.Policy == policy.OracleName {
			hops[row.Routing] = row.ExtraHopPct
		}
	}
	require.Positive(t, hops["peer"])
	require.Positive(t, hops["front"])
	md := PoolingMarkdown(rs, sim.DefaultHandoff.Hop)
	require.Contains(t, md, "| peer | qas | ")
	require.Contains(t, md, "| front | oracle | ")
	require.Contains(t, md, "500µs")
	require.NotContains(t, md, "NaN")
}
