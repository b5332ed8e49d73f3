package matrix

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	itrace "github.com/qas-dev/qas/internal/trace"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
)

// TestGoalsOfCounts: each goal is counted from the runs as the issues word
// it, table by table.
func TestGoalsOfCounts(t *testing.T) {
	nan := math.NaN()
	random := func(met bool, clairvoyant, reactive float64) run {
		return run{routing: sim.RouteRandom, met: met, cpu: 100, clairvoyant: clairvoyant, reactive: reactive, pooled: nan}
	}
	tests := []struct {
		name  string
		runs  []run
		check func(t *testing.T, g Goals)
	}{
		{
			name: "misses, and those the onset bound rules out",
			runs: []run{
				random(true, 1.2, 1.05),
				{routing: sim.RouteRandom, met: false, ruledOut: true, clairvoyant: 1.1, reactive: 0.9, pooled: nan},
				{routing: sim.RouteRandom, met: false, clairvoyant: 1.1, reactive: 0.95, pooled: nan},
				// A bound that asks for more pods where qas met the SLO rules nothing out.
				{routing: sim.RouteRandom, met: true, ruledOut: true, clairvoyant: 1.3, reactive: 1.2, pooled: nan},
			},
			check: func(t *testing.T, g Goals) {
				require.Equal(t, 4, g.Cells)
				require.Equal(t, 2, g.Met)
				require.Equal(t, 1, g.RuledOut)
				require.Len(t, g.Planes, 1)
				require.InDelta(t, (0.95+1.05)/2, g.Planes[0].Reactive, 1e-12, "the median of four")
				require.True(t, math.IsNaN(g.Planes[0].Pooled), "a Service does not pool")
				require.Nil(t, g.Smooth)
				require.Nil(t, g.Recurring)
				require.Nil(t, g.KPA, "no KPA ran")
			},
		},
		{
			name: "each plane its own median, in the order the planes ran; pooled planes against oracle-pooled",
			runs: []run{
				{routing: sim.RouteOverflow, met: true, reactive: 1.2, pooled: 1.4, clairvoyant: 1.1},
				random(true, 1.2, 1.0),
				{routing: sim.RouteOverflow, met: false, reactive: 1.0, pooled: 1.2, clairvoyant: 1.1},
				{routing: sim.RouteOverflow, met: true, reactive: nan, pooled: 1.25, clairvoyant: 1.1},
				// oracle-pooled searched in a Service's cell: not that plane's goal.
				{routing: sim.RouteRandom, met: true, reactive: 1.2, pooled: 2, clairvoyant: 1.2},
			},
			check: func(t *testing.T, g Goals) {
				require.Len(t, g.Planes, 2)
				over, svc := g.Planes[0], g.Planes[1]
				require.Equal(t, "overflow", over.Routing)
				require.Equal(t, 3, over.Cells)
				require.Equal(t, 2, over.Met)
				require.InDelta(t, 1.1, over.Reactive, 1e-12, "NaN is left out: the median of 1.2 and 1.0")
				require.InDelta(t, 1.25, over.Pooled, 1e-12)
				require.Equal(t, "random", svc.Routing)
				require.InDelta(t, 1.1, svc.Reactive, 1e-12)
				require.True(t, math.IsNaN(svc.Pooled))
				md := GoalsMarkdown(g)
				require.Contains(t, md, "| ≤ 1.10 × the reactive oracle, overflow (median) | 1.100 over 3 cells (2 met) | yes |")
				require.Contains(t, md, "| every cell at ≤ 1.30 × oracle-pooled, overflow (median) | 1.250 over 3 cells, 2 met | no |", "a miss fails it at any cost")
				require.NotContains(t, md, "oracle-pooled, random")
			},
		},
		{
			name: "smooth traffic against the clairvoyant oracle, recurring bursts below the reactive one",
			runs: []run{
				{routing: sim.RouteRandom, shape: ShapeSmooth, met: true, clairvoyant: 1.06, reactive: 1.2, pooled: nan},
				{routing: sim.RouteRandom, shape: ShapeSmooth, met: true, clairvoyant: 1.10, reactive: 1.2, pooled: nan},
				{routing: sim.RouteRandom, shape: ShapeSmooth, met: false, clairvoyant: 1.13, reactive: 1.2, pooled: nan},
				{routing: sim.RouteRandom, shape: ShapeRecurring, met: true, clairvoyant: 1.5, reactive: 0.9, pooled: nan},
				{routing: sim.RouteRandom, shape: ShapeRecurring, met: true, clairvoyant: 1.5, reactive: 1.0, pooled: nan},
				random(true, 3, 0.5),
			},
			check: func(t *testing.T, g Goals) {
				require.Equal(t, &ShapeGoals{Cells: 3, Met: 2, Median: 1.10, Within: 2, Goal: GoalSmooth}, g.Smooth, "1.10 is within its goal")
				require.Equal(t, &ShapeGoals{Cells: 2, Met: 2, Median: 0.95, Within: 1, Goal: 1}, g.Recurring, "the reactive oracle's own cost is not below it")
				md := GoalsMarkdown(g)
				require.Contains(t, md, "| ≤ 1.10 × the clairvoyant oracle on smooth traffic (median) | 1.100 over 3 cells, 2 within, 2 met | yes |")
				require.Contains(t, md, "| below the reactive oracle where bursts recur (median) | 0.950 over 2 cells, 1 below, 2 met | yes |")
			},
		},
		{
			name: "KPA pairs: only where a KPA met the SLO; CPU outright and over each plane's own oracle",
			runs: []run{
				// Met at less CPU than both KPAs: two pairs, no dearer either way.
				{routing: sim.RouteRandom, met: true, cpu: 100, clairvoyant: 1.2, reactive: 1, pooled: nan,
					kpas: []kpaRun{{met: true, cpu: 150, clairvoyant: 2.5}, {met: true, cpu: 100, clairvoyant: 1.2}}},
				// More CPU than the KPA on its cheaper plane, yet cheaper over each plane's oracle.
				{routing: sim.RouteRandom, met: true, cpu: 120, clairvoyant: 1.2, reactive: 1, pooled: nan,
					kpas: []kpaRun{{met: true, cpu: 110, clairvoyant: 1.5}, {met: false, cpu: 50, clairvoyant: 0.6}}},
				// Missed where the KPA met.
				{routing: sim.RouteRandom, met: false, cpu: 80, clairvoyant: 1, reactive: 1, pooled: nan,
					kpas: []kpaRun{{met: true, cpu: 200, clairvoyant: 3}}},
				// No KPA met: no pair.
				{routing: sim.RouteRandom, met: false, cpu: 80, clairvoyant: 1, reactive: 1, pooled: nan,
					kpas: []kpaRun{{met: false, cpu: 20, clairvoyant: 0.3}}},
			},
			check: func(t *testing.T, g Goals) {
				require.Equal(t, &KPAGoals{Pairs: 4, Missed: 1, NoMoreCPU: 2, NoDearer: 3}, g.KPA)
				require.Contains(t, GoalsMarkdown(g), "| 4 pairs: missed in 1; met at no more CPU-core-seconds in 2, at no more ÷ its own plane's clairvoyant oracle in 3 | no |")
			},
		},
		{
			name: "KPAs that ran and never met: no pair, and the goal has no verdict",
			runs: []run{{routing: sim.RouteRandom, met: true, cpu: 1, clairvoyant: 1, reactive: 1, pooled: nan,
				kpas: []kpaRun{{met: false, cpu: 1, clairvoyant: 1}}}},
			check: func(t *testing.T, g Goals) {
				require.Equal(t, &KPAGoals{}, g.KPA)
				md := GoalsMarkdown(g)
				require.Contains(t, md, "| 0 pairs: missed in 0; met at no more CPU-core-seconds in 0, at no more ÷ its own plane's clairvoyant oracle in 0 | — |")
				require.Contains(t, md, "| the SLO in every cell | 1/1 met; 0 of the 0 misses ruled out by the onset bound | yes |")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := goalsOf("qas", tc.runs)
			require.Equal(t, "qas", g.Policy)
			tc.check(t, g)
			b, err := json.Marshal(g)
			require.NoError(t, err, "NaN medians are written as null")
			require.NotContains(t, string(b), "NaN")
		})
	}
}

// TestGoalsOfRealCells: GoalsOf reads each real cell's run as the summaries
// and cost ratios the cell wrote: a smooth pattern through a Service and
// behind least request, with qas and both KPAs.
func TestGoalsOfRealCells(t *testing.T) {
	o := DefaultOptions()
	o.Policies = []string{"qas", "kpa", policy.KPADelayName}
	w := Workload{Name: "id", Source: trace.PatternIncreaseDecrease, Scale: 1, Window: itrace.Window{End: 10 * 60e9}, Shape: ShapeSmooth}
	var rs []*Result
	for _, routing := range []sim.Routing{sim.RouteRandom, sim.RouteLeastRequest, sim.RouteRandom} {
		r, err := RunCell(Cell{Workload: w, Setting: Settings()[1], Seed: uint64(len(rs) + 1), Routing: routing}, o)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	g, ok := GoalsOf(rs, "qas")
	require.True(t, ok)
	_, ok = GoalsOf(rs, "no such policy")
	require.False(t, ok)

	// The same figures, read here from the summaries.
	met, pairs, missed, noMoreCPU, noDearer := 0, 0, 0, 0, 0
	var clairvoyant []float64
	reactive := map[string][]float64{}
	for _, r := range rs {
		budget := 100 * r.Comparison.Capacity.Budget()
		require.InDelta(t, 5, budget, 1e-9, "p95")
		i := r.Comparison.Index("qas")
		q := r.Summaries[i]
		qMet := q.RequestsOverTargetPct <= budget
		if qMet {
			met++
		}
		clairvoyant = append(clairvoyant, q.CPUCoreSeconds/r.Summaries[r.Comparison.Index(policy.OracleName)].CPUCoreSeconds)
		reactive[q.Routing] = append(reactive[q.Routing], q.CPUCoreSeconds/r.Summaries[r.Comparison.Index(policy.ReactiveOracleName)].CPUCoreSeconds)
		for _, k := range []string{"kpa", policy.KPADelayName} {
			j := r.Comparison.Index(k)
			s := r.Summaries[j]
			if s.RequestsOverTargetPct > budget {
				continue
			}
			pairs++
			switch {
			case !qMet:
				missed++
			default:
				if q.CPUCoreSeconds <= s.CPUCoreSeconds {
					noMoreCPU++
				}
				if *r.CostRatio[i] <= *r.CostRatio[j] {
					noDearer++
				}
			}
		}
	}
	require.Equal(t, 3, g.Cells)
	require.Equal(t, met, g.Met)
	require.Len(t, g.Planes, 2)
	require.Equal(t, "random", g.Planes[0].Routing)
	require.Equal(t, 2, g.Planes[0].Cells)
	require.InDelta(t, median(reactive["random"]), g.Planes[0].Reactive, 1e-12)
	require.Equal(t, "leastRequest", g.Planes[1].Routing)
	require.InDelta(t, reactive["leastRequest"][0], g.Planes[1].Reactive, 1e-12)
	require.True(t, math.IsNaN(g.Planes[0].Pooled), "neither plane pools")
	require.NotNil(t, g.Smooth)
	require.Equal(t, 3, g.Smooth.Cells)
	require.InDelta(t, median(clairvoyant), g.Smooth.Median, 1e-12)
	require.Nil(t, g.Recurring)
	require.Equal(t, &KPAGoals{Pairs: pairs, Missed: missed, NoMoreCPU: noMoreCPU, NoDearer: noDearer}, g.KPA)
	t.Logf("goals: %+v; KPA %+v; smooth %+v", g, *g.KPA, *g.Smooth)

	md := Markdown(rs, o, "test conditions")
	require.Contains(t, md, "## Goals (issues #15 and #20): qas")
	require.Contains(t, md, "| ≤ 1.10 × the reactive oracle, leastRequest (median) | ")
	require.Less(t, strings.Index(md, "## Goals"), strings.Index(md, "## Cells"), "the goals come before the cells")
}

// TestMatrixShapes: the matrix's smooth workloads are the increase–decrease
// pattern and the diurnal day, its recurring one the bursts on a clock, and
// no other workload has a shape.
func TestMatrixShapes(t *testing.T) {
	shapes := map[string]Shape{}
	for _, w := range append(append(Workloads("nasa.gz"), WarmWorkloads()...), RecurringWorkload()) {
		shapes[w.Name] = w.Shape
	}
	for name, want := range map[string]Shape{"increase-decrease-x5": ShapeSmooth, "diurnal-7h-x40": ShapeSmooth, "recurring-x20": ShapeRecurring,
		"flash-crowd-x5": ShapeTrace, "bursts-x20": ShapeTrace, "mmpp-x20-warm": ShapeTrace, "nasa-2jul-14h-x100-poisson": ShapeTrace} {
		require.Equal(t, want, shapes[name], name)
	}
	smooth := 0
	for _, s := range shapes {
		if s == ShapeSmooth {
			smooth++
		}
	}
	require.Equal(t, 2, smooth)
}
