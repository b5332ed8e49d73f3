package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// steps returns rates of each level held for its seconds, in order.
func steps(levels ...[2]float64) []float64 {
	var r []float64
	for _, l := range levels {
		for i := 0; i < int(l[1]); i++ {
			r = append(r, l[0])
		}
	}
	return r
}

func TestFindOnset(t *testing.T) {
	tests := []struct {
		name          string
		history       []float64
		rates         []float64
		lead          int
		onset         int
		jump          float64
		before, after float64
	}{
		{name: "a step is the largest rise", rates: steps([2]float64{10, 600}, [2]float64{40, 600}), lead: 60,
			onset: 600, jump: 4, before: 10, after: 40},
		{name: "the larger of two steps", rates: steps([2]float64{10, 600}, [2]float64{20, 300}, [2]float64{10, 300}, [2]float64{50, 300}), lead: 60,
			onset: 1200, jump: 2.5, before: 20, after: 50},
		{name: "a step the history has seen is no rise", history: steps([2]float64{40, 300}, [2]float64{10, 300}),
			rates: steps([2]float64{10, 600}, [2]float64{40, 600}), lead: 60, onset: 600, jump: 1, before: 40, after: 40},
		{name: "a flat run", rates: steps([2]float64{30, 900}), lead: 120, onset: 120, jump: 1, before: 30, after: 30},
		{name: "a rise from nothing", rates: steps([2]float64{0, 300}, [2]float64{5, 300}), lead: 60,
			onset: 241, jump: math.Inf(1), before: 0, after: 5.0 / 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onset, jump, before, after, err := FindOnset(tt.history, tt.rates, tt.lead)
			require.NoError(t, err)
			assert.Equal(t, tt.onset, onset)
			if math.IsInf(tt.jump, 1) {
				assert.True(t, math.IsInf(jump, 1), "jump %v", jump)
			} else {
				assert.InDelta(t, tt.jump, jump, 1e-9)
			}
			assert.InDelta(t, tt.before, before, 1e-9)
			assert.InDelta(t, tt.after, after, 1e-9)
		})
	}
}

func TestFindOnsetRejects(t *testing.T) {
	tests := []struct {
		name    string
		history []float64
		rates   []float64
		lead    int
		want    string
	}{
		{name: "no lead", rates: steps([2]float64{1, 100}), lead: 0, want: "lead 0 s"},
		{name: "one lead in all", rates: steps([2]float64{1, 100}), lead: 60, want: "100 s of rates after 0 s of history"},
		{name: "no lead in the run", history: steps([2]float64{1, 600}), rates: steps([2]float64{1, 30}), lead: 60, want: "want a lead (60 s) in the run"},
		{name: "NaN in the run", rates: append(steps([2]float64{1, 100}), math.NaN()), lead: 10, want: "rate NaN at second 100 of the run"},
		{name: "negative in the history", history: []float64{1, -2}, rates: steps([2]float64{1, 100}), lead: 10, want: "rate -2 at second 1 of the history"},
		{name: "infinite", rates: append(steps([2]float64{1, 100}), math.Inf(1)), lead: 10, want: "rate +Inf at second 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, _, err := FindOnset(tt.history, tt.rates, tt.lead)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, strings.Contains(tt.want, "of rates after") || strings.Contains(tt.want, "want a lead"), errors.Is(err, ErrShortRun),
				"only a run too short for an onset is ErrShortRun: %v", err)
		})
	}
}

// onsetConfig is a k = 1 run with exponential 50 ms service, p95 ≤ 200 ms
// (one pod meets it up to 5 req/s) and a constant init time.
func onsetConfig(t *testing.T, rates []float64, init string) Config {
	t.Helper()
	svc, err := ParseDist("exp:50ms")
	require.NoError(t, err)
	in, err := ParseDist(init)
	require.NoError(t, err)
	return Config{Rates: rates, Service: svc, Init: in, Concurrency: 1, CPU: 0.5, Target: 0.2, Percentile: 95, Seed: 1}
}

func TestOnsetBoundAFiveFoldStepNeedsPodsBeforeIt(t *testing.T) {
	// 20 req/s for 20 minutes, then 100 req/s for 10: the calm needs 4 pods,
	// and the step's first two minutes on 4 pods (each at 25 req/s, five
	// times what it serves) put far more late than the hour allows.
	cfg := onsetConfig(t, steps([2]float64{20, 1200}, [2]float64{100, 600}), "2m")
	capa := NewCapacity(cfg, 200)
	b, err := FindOnsetBound(cfg, nil, capa, 200)
	require.NoError(t, err)
	assert.Equal(t, 1200, b.Onset)
	assert.Equal(t, 120, b.Lead)
	assert.InDelta(t, 5, b.Jump, 1e-9)
	assert.Equal(t, 4, b.CalmPods)
	assert.InDelta(t, 5, b.BudgetPct, 1e-9)
	assert.Greater(t, b.CalmLatePct, b.BudgetPct, "the past's pods meet the SLO through the step")
	assert.Greater(t, b.Pods, b.CalmPods)
	assert.LessOrEqual(t, b.LatePct, b.BudgetPct)
	assert.InDelta(t, float64(b.Pods)/4, b.Ratio(), 1e-12)

	// Pods is the fewest: with one pod fewer as the cap, no count meets.
	fewer, err := FindOnsetBound(cfg, nil, capa, b.Pods-1)
	require.NoError(t, err)
	assert.Zero(t, fewer.Pods, "a count under Pods met the SLO")
	assert.Greater(t, fewer.LatePct, fewer.BudgetPct)
	assert.Zero(t, fewer.Ratio())

	// A longer init leaves the step longer on the pods that were there.
	slow, err := FindOnsetBound(onsetConfig(t, cfg.Rates, "4m"), nil, capa, 200)
	require.NoError(t, err)
	assert.Greater(t, slow.CalmLatePct, b.CalmLatePct)
	assert.GreaterOrEqual(t, slow.Pods, b.Pods)
}

func TestOnsetBoundOnAPooledPlane(t *testing.T) {
	// The same step through the overflow plane: the calm's pods are the
	// pooled model's, fewer than per-pod queues need, and the step still
	// needs more than they are.
	cfg := onsetConfig(t, steps([2]float64{20, 1200}, [2]float64{100, 600}), "2m")
	random, err := FindOnsetBound(cfg, nil, NewCapacity(cfg, 200), 200)
	require.NoError(t, err)
	cfg.Routing = RouteOverflow
	capa := NewCapacity(cfg, 200)
	b, err := FindOnsetBound(cfg, nil, capa, 200)
	require.NoError(t, err)
	assert.False(t, capa.Pooled, "the caller's capacity is not changed")
	pooled := capa.PooledClone()
	assert.Equal(t, pooled.Pods(20), b.CalmPods)
	assert.Less(t, b.CalmPods, random.CalmPods)
	assert.Greater(t, b.Pods, b.CalmPods)
	assert.LessOrEqual(t, b.LatePct, b.BudgetPct)
}

func TestOnsetBoundAskNothingOfARunItsPastDescribes(t *testing.T) {
	// The same step, with a past that held 100 req/s: the step is no rise, and
	// the past's pods (20) are more than the bound needs.
	cfg := onsetConfig(t, steps([2]float64{20, 1200}, [2]float64{100, 600}), "2m")
	capa := NewCapacity(cfg, 200)
	b, err := FindOnsetBound(cfg, steps([2]float64{100, 600}, [2]float64{20, 600}), capa, 200)
	require.NoError(t, err)
	assert.InDelta(t, 1, b.Jump, 1e-9)
	assert.Equal(t, 20, b.CalmPods)
	assert.LessOrEqual(t, b.CalmLatePct, b.BudgetPct)
	assert.Positive(t, b.Pods)
	assert.LessOrEqual(t, b.Pods, b.CalmPods)
	assert.Less(t, b.Ratio(), 1.0)

	// A flat run: the service time alone is late (P(S > 4 E[S]) = e⁻⁴).
	flat := onsetConfig(t, steps([2]float64{20, 1800}), "45s")
	fb, err := FindOnsetBound(flat, nil, NewCapacity(flat, 200), 200)
	require.NoError(t, err)
	assert.InDelta(t, 1, fb.Jump, 1e-9)
	assert.LessOrEqual(t, fb.Pods, fb.CalmPods)
	assert.Greater(t, fb.CalmLatePct, 100*math.Exp(-4)*0.8)
}

func TestFindOnsetBoundRejects(t *testing.T) {
	good := onsetConfig(t, steps([2]float64{20, 600}), "45s")
	mean := good
	mean.Percentile = 0
	noInit := good
	noInit.Init = Dist{Kind: Constant}
	short := onsetConfig(t, steps([2]float64{20, 60}), "45s")
	tests := []struct {
		name string
		cfg  Config
		max  int
		want string
	}{
		{name: "a mean target", cfg: mean, max: 10, want: "a mean target has no late budget"},
		{name: "no replicas", cfg: good, max: 0, want: "maxReplicas must be at least 1"},
		{name: "no init time", cfg: noInit, max: 10, want: "init time mean 0 s"},
		{name: "shorter than two leads", cfg: short, max: 10, want: "60 s of rates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FindOnsetBound(tt.cfg, nil, NewCapacity(good, 10), tt.max)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tt.want), "%v", err)
		})
	}
}

func TestOnsetBoundMeasuresTheCalmBehindLeastRequest(t *testing.T) {
	// The same step behind least request and behind peer handoff: each
	// sends a request to a pod with room, so the calm needs fewer pods than
	// per-pod queues (the per-pod rule) and no fewer than one queue (the
	// pooled rule). No model gives the count there: it is measured, the
	// fewest pods that serve the calm's rate within the budget.
	cfg := onsetConfig(t, steps([2]float64{20, 1200}, [2]float64{100, 600}), "45s")
	capa := NewCapacity(cfg, 200)
	random, err := FindOnsetBound(cfg, nil, capa, 200)
	require.NoError(t, err)
	pooled := capa.PooledClone()
	for _, tc := range []struct {
		routing Routing
		fewer   bool // than the per-pod rule, at 20/s on 50 ms
	}{{RouteLeastRequest, true}, {RoutePeer, false}} {
		t.Run(tc.routing.String(), func(t *testing.T) {
			cfg := cfg
			cfg.Routing = tc.routing
			b, err := FindOnsetBound(cfg, nil, capa, 200)
			require.NoError(t, err)
			assert.LessOrEqual(t, b.CalmPods, random.CalmPods, "no more than per-pod queues")
			if tc.fewer {
				assert.Less(t, b.CalmPods, random.CalmPods)
			}
			assert.GreaterOrEqual(t, b.CalmPods, pooled.Pods(20), "no fewer than one queue")
			// The count is the fewest that meets: one fewer misses.
			calm := func(n int) float64 { return 100 * calmLateShare(cfg, 20, n) }
			assert.LessOrEqual(t, calm(b.CalmPods), b.BudgetPct)
			assert.Greater(t, calm(b.CalmPods-1), b.BudgetPct)
			// The step needs more than the calm's pods: on a plane that
			// runs its pods busier, a five-fold rise overloads them.
			assert.Greater(t, b.Pods, b.CalmPods)
			assert.Greater(t, b.Ratio(), 1.0)
			t.Logf("%s: calm %d pods (per-pod rule %d, pooled %d), the bound %d (%.2f %% late)", tc.routing, b.CalmPods, random.CalmPods, pooled.Pods(20), b.Pods, b.LatePct)
		})
	}
	// Random routing keeps the per-pod rule's count.
	assert.Equal(t, capa.Pods(20), random.CalmPods)
}
