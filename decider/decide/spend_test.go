package decide

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpendBudget: the late share the steady state sizes for, from what the
// recent requests measured (budget 5 %, θ = 0.1: spending starts below 4.5 %;
// bounds: (1 ± maxPayback) × the budget, 4 % and 6 %).
func TestSpendBudget(t *testing.T) {
	const budget, theta = 0.05, 0.1
	full := 2 * biasTailSamples / budget // more than the evidence needed
	for _, tc := range []struct {
		name                  string
		reqs, late, transient float64 // the engine's weighted counts
		eff, spent            float64
	}{
		{name: "no requests measured yet: the budget", eff: budget},
		{name: "too few requests to spend on", reqs: biasTailSamples / budget / 4, late: 0, eff: budget},
		{name: "at the budget", reqs: full, late: 0.05 * full, eff: budget},
		{name: "within θ of the budget", reqs: full, late: 0.046 * full, eff: budget},
		{name: "4 % late: half a point spent", reqs: full, late: 0.04 * full, eff: 0.055, spent: 0.005},
		{name: "3 % late: at most maxPayback of the budget", reqs: full, late: 0.03 * full, eff: 0.06, spent: 0.01},
		{name: "over the budget, transients: paid back", reqs: full, late: 0.06 * full, transient: 0.005 * full, eff: 0.045},
		{name: "transients in a quiet run: payback and spending add", reqs: full, late: 0.035 * full, transient: 0.005 * full, eff: 0.055, spent: 0.01},
		{name: "the payback's bound, then the spare", reqs: full, late: 0.025 * full, transient: 0.02 * full, eff: 0.05, spent: 0.01},
		{name: "the payback's bound", reqs: full, late: 0.2 * full, transient: 0.2 * full, eff: budget * (1 - maxPayback)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine()
			e.reqs, e.late, e.lateTransient = tc.reqs, tc.late, tc.transient
			eff, spent := e.spendBudget(budget, theta)
			require.InDelta(t, tc.eff, eff, 1e-12)
			require.InDelta(t, tc.spent, spent, 1e-12)
		})
	}
}

// TestSpendsTheUnusedBudget: a workload whose requests keep running well
// within the budget (2 % late against 5 %) is sized for a looser percentile,
// which the explanation shows with the measured share, and the same pods are
// further from its target; one that runs near the budget is not.
func TestSpendsTheUnusedBudget(t *testing.T) {
	spec := queueSpec()
	spec.Behavior = immediate()
	// 1,000 requests a cycle, late shares from the proxies' histogram.
	measure := func(s Snapshot, late float64) Snapshot {
		s.LatencyBuckets = []LatencyBucket{{0.25, 1000 * (1 - late)}, {math.Inf(1), 1000 * late}}
		s.LatencySamples = 1000
		return s
	}
	run := func(late float64) Decision {
		e := NewEngine()
		var last Decision
		for i := range 60 {
			s := measure(snapshot(t0.Add(time.Duration(i)*15*time.Second), 60, 0.04, 6), late)
			d, err := e.Decide(spec, s)
			require.NoError(t, err)
			e.Revert(d) // the same 6 pods every cycle: only the sizing is under test
			last = d
		}
		return last
	}
	quiet, near := run(0.02), run(0.048)
	x := quiet.Explanation
	require.InDelta(t, 0.02, x.RecentLateShare, 1e-9)
	require.Greater(t, x.RecentRequests, biasTailSamples/0.05/2)
	// 4.5 % (the budget less θ) − 2 % measured is 2.5 points, of which
	// maxPayback of the budget, 1 point, is spent.
	require.InDelta(t, 0.01, x.SpentLateShare, 1e-9)
	require.InDelta(t, 94, x.EffectivePercentile, 1e-9)
	require.Contains(t, x.Reason, "ran 2% late, under the budget 5% by more than θ: 1% of it spent, sized at p94, and a scale-down needs no upper bound on λ")
	require.Equal(t, x.ArrivalRate, x.ArrivalRateHigh, "the scale-down reads λ itself while the budget is spent")

	y := near.Explanation
	require.InDelta(t, 0.048, y.RecentLateShare, 1e-9)
	require.Zero(t, y.SpentLateShare)
	require.Equal(t, 95.0, y.EffectivePercentile)
	require.NotContains(t, y.Reason, "spent")
	require.Greater(t, y.ArrivalRateHigh, y.ArrivalRate, "near the budget, λ's upper bound guards the scale-down")

	// The same pods at the same λ are further from the target at the looser
	// percentile.
	require.Less(t, x.Normalized, y.Normalized, "%s\n%s", x.Reason, y.Reason)
}
