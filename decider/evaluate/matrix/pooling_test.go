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
	require.Equal(t, []string{policy.OracleName, policy.ReactiveOracleName, policy.PooledOracleName, policy.PooledReactiveOracleName}, o.Yardsticks)
}

// TestPoolingRows runs one small cell per data plane and checks the
// comparison: a row per plane and policy (oracle-pooled, which divides, is
// not a row), costs against the pooled queue's oracle and against the
// reactive oracle of each one's data plane (the cell's own; the pooled one
// for the KPA and the -pooled yardsticks, as the main matrix judges them),
// extra hops only on the peer and front planes, and the table's lines.
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
	require.Len(t, rows, 3*6)
	for _, row := range rows {
		require.NotEqual(t, policy.PooledOracleName, row.Policy)
		require.Equal(t, 1, row.Cells)
		require.False(t, math.IsNaN(row.CostMedian) || math.IsInf(row.CostMedian, 0), "%+v", row)
		require.Positive(t, row.CostMedian)
		if row.Policy == policy.ReactiveOracleName || row.Policy == policy.PooledReactiveOracleName {
			// Each reactive oracle is its own plane's.
			require.InDelta(t, 1, row.ReactiveMedian, 1e-12, "%+v", row)
		}
		require.False(t, math.IsNaN(row.ReactiveMedian) || math.IsInf(row.ReactiveMedian, 0), "%+v", row)
		require.Positive(t, row.ReactiveMedian)
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
	// The reactive ratio is the policy's cost over its plane's reactive
	// oracle's, in the same cell: the cell's own for qas, the pooled one for
	// the KPA, whose activator pools.
	cost := func(r *Result, name string) float64 {
		j := r.Comparison.Index(name)
		require.GreaterOrEqual(t, j, 0, name)
		require.Positive(t, r.Summaries[j].CPUCoreSeconds, name)
		return r.Summaries[j].CPUCoreSeconds
	}
	for i, r := range rs {
		for _, row := range rows {
			if row.Routing != r.Cell.Routing.String() {
				continue
			}
			switch row.Policy {
			case "qas":
				require.InDelta(t, cost(r, "qas")/cost(r, policy.ReactiveOracleName), row.ReactiveMedian, 1e-12, "cell %d", i)
			case "kpa":
				require.InDelta(t, cost(r, "kpa")/cost(r, policy.PooledReactiveOracleName), row.ReactiveMedian, 1e-12, "cell %d", i)
			}
		}
	}
	md := PoolingMarkdown(rs, sim.DefaultHandoff.Hop)
	require.Contains(t, md, "| peer | qas | ")
	require.Contains(t, md, "| front | oracle | ")
	require.Contains(t, md, "500µs")
	require.Contains(t, md, "| ÷ reactive median |")
	require.Contains(t, md, "| front | oracle-reactive | ")
	require.Regexp(t, `\| front \| oracle-reactive-pooled \| 1/1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.—]+ \| 1\.00 \|`, md)
	require.NotContains(t, md, "NaN")
}
