package matrix

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	itrace "github.com/qas-dev/qas/internal/trace"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
)

func nasaPath(t *testing.T) string {
	p := filepath.Join("..", "..", "..", "..", "shared", "traces", "nasa-1995-07-08.rps.gz")
	if v := os.Getenv("QAS_SHARED"); v != "" {
		p = filepath.Join(v, "traces", "nasa-1995-07-08.rps.gz")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the shared NASA trace is needed: %v", err)
	}
	return p
}

// TestDefaultMatrix: every workload × setting × seeds 1–3 through a
// Service, and every workload behind least-request balancing; the NASA
// windows span scales 20–100 and both scalings; the names are unique.
func TestDefaultMatrix(t *testing.T) {
	cells := Default("nasa.gz")
	ws, ss := Workloads("nasa.gz"), Settings()
	warm := WarmWorkloads()
	require.Len(t, cells, len(ws)*len(ss)*3+len(ws)+3+len(warm)*len(ss)*3)
	seen := map[string]bool{}
	planes := map[sim.Routing]int{}
	for _, c := range cells {
		require.False(t, seen[c.Name()], c.Name())
		seen[c.Name()] = true
		planes[c.Routing]++
	}
	require.Equal(t, len(ws), planes[sim.RouteLeastRequest])
	var recurring int
	for _, c := range cells {
		if c.Workload.Source == trace.PatternRecurring {
			recurring++
			require.Positive(t, c.Workload.History, "a recurring cell gives the policies its past")
		}
	}
	require.Equal(t, 3, recurring)
	// Each warm workload is a bursty cold workload one window later, with
	// that window as its history; under both settings and three seeds.
	cold := map[string]Workload{}
	for _, w := range ws {
		cold[w.Source] = w
	}
	warmCells := map[string]int{}
	for _, c := range cells {
		if strings.HasSuffix(c.Workload.Name, "-warm") {
			warmCells[c.Workload.Name]++
			require.Equal(t, sim.RouteRandom, c.Routing, c.Name())
		}
	}
	for _, w := range warm {
		require.Equal(t, len(ss)*3, warmCells[w.Name], w.Name)
		c, ok := cold[w.Source]
		require.True(t, ok, "%s has a cold twin", w.Name)
		require.Contains(t, []string{trace.PatternBursts, trace.PatternMMPP}, w.Source, w.Name)
		require.Equal(t, c.Scale, w.Scale, w.Name)
		require.Equal(t, c.Window.End, w.Window.Start, "%s replays the window after its cold twin's", w.Name)
		require.Equal(t, c.Window.End-c.Window.Start, w.Window.End-w.Window.Start, w.Name)
		require.Equal(t, w.Window.Start-c.Window.Start, w.History, "%s's history is its cold twin's window", w.Name)
	}
	scales, smooth, long, sources := map[float64]bool{}, 0, 0, map[string]bool{}
	for _, w := range ws {
		sources[w.Source] = true
		if w.Source == "nasa.gz" {
			scales[w.Scale] = true
			if w.Smooth > 0 {
				smooth++
			}
			if w.Window.End-w.Window.Start >= 6*time.Hour {
				long++
			}
		}
	}
	require.Equal(t, map[float64]bool{5: true, 20: true, 50: true, 100: true}, scales)
	require.Equal(t, 2, smooth, "two NASA windows with Poisson scaling")
	require.Equal(t, 2, long, "two NASA windows of six hours: a night, a ramp and a morning, at ×50 and at ×5")
	for _, p := range []string{trace.PatternFlashCrowd, trace.PatternIncreaseDecrease, trace.PatternBursts, trace.PatternMMPP, trace.PatternDiurnal} {
		require.True(t, sources[p], p)
	}
	require.Len(t, Demo("nasa.gz"), 2)
}

// TestRunCell: a cell runs its policies and every yardstick on its data
// plane, says its conditions, and each clairvoyant oracle costs 1 × itself.
func TestRunCell(t *testing.T) {
	c := Cell{Workload: Workload{Name: "flash", Source: trace.PatternFlashCrowd, Scale: 2, Window: itrace.Window{End: 20 * 60e9}},
		Setting: Settings()[0], Seed: 2, Routing: sim.RouteLeastRequest}
	o := DefaultOptions()
	o.Policies = []string{"qas", "kpa"}
	r, err := RunCell(c, o)
	require.NoError(t, err)
	var names []string
	for _, s := range r.Summaries {
		names = append(names, s.Name)
	}
	require.Equal(t, append([]string{"qas", "kpa"}, policy.Yardsticks...), names)
	require.Contains(t, r.Conditions, "real time; routing leastRequest; p95 ≤ 200ms; service lognormal:50ms,cv=1.2; init const:45s")
	require.Contains(t, r.Conditions, "seed 2")
	cpu := func(name string) float64 { return r.Summaries[r.Comparison.Index(name)].CPUCoreSeconds }
	for i, s := range r.Summaries {
		require.NotNil(t, r.CostRatio[i], s.Name)
		require.NotNil(t, r.ReactiveCostRatio[i], s.Name)
		if s.Name == policy.OracleName || s.Name == policy.PooledOracleName {
			require.InDelta(t, 1, *r.CostRatio[i], 1e-12)
		}
		// Each policy over the reactive oracle of its own data plane: the
		// KPA's and the -pooled yardsticks' is the pooled one.
		reactive := policy.ReactiveOracleName
		if s.Name == "kpa" || strings.HasSuffix(s.Name, "-pooled") {
			reactive = policy.PooledReactiveOracleName
		}
		require.InDelta(t, s.CPUCoreSeconds/cpu(reactive), *r.ReactiveCostRatio[i], 1e-12, s.Name)
	}
	require.Equal(t, "leastRequest", r.Summaries[0].Routing)
	// The matrix's coarser search grid: windows 10, 60 and 300 s, 7 steps.
	for _, y := range r.Oracles {
		for _, c := range y.Candidates {
			require.Contains(t, []int{10, 60, 300}, c.Window)
		}
		groups := 1
		if strings.HasSuffix(y.Policy, "-pooled") {
			groups = 2
		}
		require.Equal(t, groups*3*(7+1), y.Runs, y.Policy)
	}
	hs := Headlines([]*Result{r, r}, o)
	require.Len(t, hs, len(names))
	require.Equal(t, 2, hs[0].Cells)
	require.InDelta(t, *r.ReactiveCostRatio[0], hs[0].ReactiveCostMedian, 1e-12, "the median of two equal ratios")
	// The onset bound, from the cell's own rates and init time.
	require.NotNil(t, r.OnsetBound)
	require.Equal(t, 45, r.OnsetBound.Lead)
	require.GreaterOrEqual(t, r.OnsetBound.Jump, 1.0)
	require.Positive(t, r.OnsetBound.CalmPods)
	md := Markdown([]*Result{r}, o, "test conditions")
	require.Contains(t, md, "test conditions")
	require.Contains(t, md, "| qas | ")
	require.Contains(t, md, r.Conditions)
	require.Contains(t, md, "Onset bound: the largest rise over the run's past is ×")
}

// TestOnsetMarkdown: the table lists the cells whose onset bound asks for
// more pods than their past, and those no count meets; a cell within its
// past's pods or without a bound is left out.
func TestOnsetMarkdown(t *testing.T) {
	cell := func(name string, ob *sim.OnsetBound) *Result { return &Result{Name: name, OnsetBound: ob} }
	rs := []*Result{
		cell("burst", &sim.OnsetBound{Onset: 1195, Jump: 5, CalmPods: 4, CalmLatePct: 14.62, Pods: 8}),
		cell("calm", &sim.OnsetBound{Onset: 60, Jump: 1.2, CalmPods: 9, CalmLatePct: 2.7, Pods: 3}),
		cell("mean target", nil),
		cell("capped", &sim.OnsetBound{Onset: 10, Jump: 40, CalmPods: 1, CalmLatePct: 60}),
	}
	md := onsetMarkdown(rs)
	require.Contains(t, md, "| burst | 1195 | ×5.00 | 4 | 14.62 | 8 | 2.00 |")
	require.Contains(t, md, "| capped | 10 | ×40.00 | 1 | 60.00 | over the cap | — |")
	require.NotContains(t, md, "| calm |")
	require.NotContains(t, md, "mean target")
	require.Empty(t, onsetMarkdown(rs[1:3]), "no cell asks for more than its past")
	require.Contains(t, rs[3].OnsetBound.Sentence(), "needs more pods than the replica cap when it begins")
}

// TestBurstiness: Poisson arrivals at a constant rate have the Poisson CV;
// the NASA trace with counts multiplied by 100 is far burstier than Poisson,
// and Poisson scaling takes most of that away (what is left is the rate's
// own change from minute to minute within the hour).
func TestBurstiness(t *testing.T) {
	rates := make([]float64, 3600)
	for i := range rates {
		rates[i] = 50
	}
	cfg := sim.Config{Rates: rates, Service: mustDist(t, "exp:10ms"), Init: mustDist(t, "1s"), Concurrency: 1, CPU: 1, Target: 1,
		Percentile: 95, InitialReplicas: 2, Seed: 1}
	res := sim.Run(cfg, policy.Static{N: 2})
	cv, pois := burstiness(res.Arrivals, rates)
	require.InDelta(t, 1/math.Sqrt(500), pois, 0.02/math.Sqrt(500), "√(λ·10) over the realised mean count")
	require.InDelta(t, pois, cv, 0.25*pois)

	nasa := nasaPath(t)
	w := itrace.Window{Start: 34 * 3600e9, End: 35 * 3600e9}
	var cvs []float64
	for _, smooth := range []int{0, 60} {
		p, err := trace.Load(trace.Options{Source: nasa, Window: w, Scale: 100, Smooth: smooth})
		require.NoError(t, err)
		cfg.Rates = p.Rates
		res := sim.Run(cfg, policy.Static{N: 200})
		cv, pois := burstiness(res.Arrivals, p.Rates)
		t.Logf("smooth %d: CV10 %.3f, Poisson %.3f", smooth, cv, pois)
		require.Greater(t, cv, 5*pois, "the hour's own rate changes, and with counts multiplied the batches")
		cvs = append(cvs, cv)
	}
	require.Less(t, cvs[1], 0.6*cvs[0], "Poisson scaling removes the batches")
}

func mustDist(t *testing.T, s string) sim.Dist {
	d, err := sim.ParseDist(s)
	require.NoError(t, err)
	return d
}

// TestRunKeepsOrderAndReportsProgress: results keep the cells' order
// whatever finishes first, and progress counts to the total.
func TestRunKeepsOrderAndReportsProgress(t *testing.T) {
	cells := shortCells(3)
	o := DefaultOptions()
	o.Policies = []string{"hpa"}
	var dones []int
	rs, err := Run(cells, o, 2, func(done, total int, _ *Result) {
		require.Equal(t, 3, total)
		dones = append(dones, done)
	})
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, dones)
	for i, r := range rs {
		require.True(t, strings.HasSuffix(r.Name, "seed "+string(rune('1'+i))), r.Name)
	}
	_, err = Run([]Cell{{Workload: Workload{Name: "bad", Source: "pattern:nope"}, Setting: Settings()[0], Seed: 1}}, o, 1, nil)
	require.ErrorContains(t, err, "unknown pattern")
}

// TestWithSeeds: every workload, setting and routing runs seeds 1 to n, in
// the order each first appears, whatever seeds it had.
func TestWithSeeds(t *testing.T) {
	ln, ex := Settings()[0], Settings()[1]
	a, b := Workload{Name: "a"}, Workload{Name: "b"}
	cells := []Cell{
		{Workload: a, Setting: ln, Seed: 1, Routing: sim.RouteRandom},
		{Workload: a, Setting: ln, Seed: 2, Routing: sim.RouteRandom},
		{Workload: a, Setting: ln, Seed: 3, Routing: sim.RouteRandom},
		{Workload: a, Setting: ex, Seed: 1, Routing: sim.RouteRandom},
		{Workload: b, Setting: ln, Seed: 1, Routing: sim.RouteLeastRequest},
		{Workload: a, Setting: ln, Seed: 1, Routing: sim.RouteLeastRequest},
	}
	names := func(cs []Cell) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name())
		}
		return out
	}
	for _, tc := range []struct {
		name string
		n    int
		want []Cell
	}{
		{"one seed each", 1, []Cell{
			{Workload: a, Setting: ln, Seed: 1, Routing: sim.RouteRandom},
			{Workload: a, Setting: ex, Seed: 1, Routing: sim.RouteRandom},
			{Workload: b, Setting: ln, Seed: 1, Routing: sim.RouteLeastRequest},
			{Workload: a, Setting: ln, Seed: 1, Routing: sim.RouteLeastRequest},
		}},
		{"four seeds each, the single-seed cells too", 4, func() []Cell {
			var out []Cell
			for _, c := range []Cell{cells[0], cells[3], cells[4], cells[5]} {
				for s := uint64(1); s <= 4; s++ {
					c.Seed = s
					out = append(out, c)
				}
			}
			return out
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, names(tc.want), names(WithSeeds(cells, tc.n)))
		})
	}
	// A group is the cell but for its seed, not its names: a workload of the
	// same name at another scale is another group.
	a2 := Workload{Name: "a", Scale: 2}
	require.Equal(t, []Cell{
		{Workload: a, Setting: ln, Seed: 1}, {Workload: a, Setting: ln, Seed: 2},
		{Workload: a2, Setting: ln, Seed: 1}, {Workload: a2, Setting: ln, Seed: 2},
	}, WithSeeds([]Cell{{Workload: a, Setting: ln, Seed: 3}, {Workload: a2, Setting: ln, Seed: 3}, {Workload: a, Setting: ln, Seed: 1}}, 2))
	// The matrices' cells differ in nothing but their seed within a group:
	// three seeds each run every cell they had.
	for _, m := range [][]Cell{Default(nasaPath(t)), Pooling(nasaPath(t))} {
		three := names(WithSeeds(m, 3))
		require.Subset(t, three, names(m))
		require.Len(t, WithSeeds(m, 10), 10*len(three)/3)
	}
}

// TestRunDropsTheSeriesOfCellsNotKept: with KeepSeries, the cells it does not
// keep lose their per-second series and rates once they finish, and nothing
// that results.md, results.json or the report's tables read: the summaries,
// cost ratios, the SLO verdicts and the headline are those of a run that
// keeps everything.
func TestRunDropsTheSeriesOfCellsNotKept(t *testing.T) {
	cells := shortCells(3)
	o := DefaultOptions()
	o.Policies = []string{"qas", "hpa"}
	whole, err := Run(cells, o, 2, nil)
	require.NoError(t, err)
	o.KeepSeries = func(cell int) bool { return cell < 1 }
	kept, err := Run(cells, o, 2, nil)
	require.NoError(t, err)
	for i, r := range kept {
		require.Equal(t, whole[i].Summaries, r.Summaries)
		require.Equal(t, whole[i].CostRatio, r.CostRatio)
		require.Equal(t, whole[i].ReactiveCostRatio, r.ReactiveCostRatio)
		require.Equal(t, whole[i].OnsetBound, r.OnsetBound)
		for j, res := range r.Comparison.Results {
			budget := r.Comparison.Capacity.Budget()
			require.Equal(t, whole[i].Comparison.Results[j].MeetsSLO(budget), res.MeetsSLO(budget))
			if i == 0 {
				require.Equal(t, whole[i].Comparison.Results[j].Ready, res.Ready, "the kept cell's charts")
				continue
			}
			require.Nil(t, res.Arrivals, res.Policy)
			require.Nil(t, res.Ready, res.Policy)
			require.Nil(t, res.MinuteLatency, res.Policy)
			require.Nil(t, res.Seconds(), res.Policy)
		}
		if i > 0 {
			require.Nil(t, r.Rates)
			require.NotEmpty(t, whole[i].Rates)
		}
	}
	require.Equal(t, Headlines(whole, o), Headlines(kept, o))
}

// shortCells are n seeds of a ten-minute increase–decrease at ×1, exponential
// service and a 2-minute init: cells that run in a fraction of a second.
func shortCells(n int) []Cell {
	var cells []Cell
	for seed := uint64(1); seed <= uint64(n); seed++ {
		cells = append(cells, Cell{Workload: Workload{Name: "id", Source: trace.PatternIncreaseDecrease, Scale: 1,
			Window: itrace.Window{End: 10 * 60e9}}, Setting: Settings()[1], Seed: seed})
	}
	return cells
}

// TestHeldOutMatrix: the held-out evaluation is the held-out shapes, each
// six hours from an empty history at a small and a larger scale, under every
// setting and three seeds through a Service, and shares no cell with the
// matrix, whose cells the engine was screened on.
func TestHeldOutMatrix(t *testing.T) {
	cells := HeldOut()
	ws := HeldOutWorkloads()
	require.Len(t, cells, len(ws)*len(Settings())*3)
	matrix := map[string]bool{}
	for _, c := range Default("nasa.gz") {
		matrix[c.Workload.Source] = true
	}
	seen := map[string]bool{}
	shapes := map[string]map[float64]bool{}
	for _, c := range cells {
		require.False(t, seen[c.Name()], c.Name())
		seen[c.Name()] = true
		require.Equal(t, sim.RouteRandom, c.Routing, c.Name())
		require.Zero(t, c.Workload.History, "%s starts from an empty history", c.Name())
		require.Contains(t, trace.HeldOutNames(), c.Workload.Source, c.Name())
		require.False(t, matrix[c.Workload.Source], "%s's shape is in the matrix", c.Name())
		require.Equal(t, 6*time.Hour, c.Workload.Window.End-c.Workload.Window.Start, c.Name())
		if shapes[c.Workload.Source] == nil {
			shapes[c.Workload.Source] = map[float64]bool{}
		}
		shapes[c.Workload.Source][c.Workload.Scale] = true
	}
	for _, name := range trace.HeldOutNames() {
		require.Equal(t, map[float64]bool{5: true, 40: true}, shapes[name], name)
		p, err := trace.Load(trace.Options{Source: name, Seed: 1, Window: ws[0].Window, Scale: 1})
		require.NoError(t, err, "the window lies within the pattern")
		require.Len(t, p.Rates, 6*3600)
		require.Contains(t, p.Description, name+" (seed 1)", "the seed draws it")
	}
}
