package decide

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// measuredEngine is an engine whose closed loop has measured reqs requests
// (the weighted count), late of them over the target and transient of those
// put there by transients, their share to a standard error se.
func measuredEngine(reqs, late, transient, se float64) *Engine {
	e := NewEngine()
	e.recent = lateMemory{reqs: reqs, late: late, sq: (se * reqs) * (se * reqs)}
	e.lateTransient = transient
	return e
}

// TestSpendBudget: the late share the steady state sizes for, from what the
// recent requests measured (budget 5 %, at p95's confidence: spending starts
// where the share is under the budget by more than 1.645 standard errors;
// bounds: (1 ± maxPayback) × the budget, 4 % and 6 %).
func TestSpendBudget(t *testing.T) {
	const budget, conf = 0.05, 0.95
	z := normalQuantile(conf)
	require.InDelta(t, 1.6449, z, 1e-4)
	full := 2 * biasTailSamples / budget // more than the evidence needed
	for _, tc := range []struct {
		name                  string
		reqs, late, transient float64 // the engine's weighted counts
		se                    float64 // the recent share's standard error
		eff, spent            float64
	}{
		{name: "no requests measured yet: the budget", eff: budget},
		{name: "too few requests to spend on", reqs: biasTailSamples / budget / 4, late: 0, eff: budget},
		{name: "at the budget", reqs: full, late: 0.05 * full, se: 0.001, eff: budget},
		{name: "within its error of the budget", reqs: full, late: 0.046 * full, se: 0.003, eff: budget},
		{name: "the same share measured tighter: spent", reqs: full, late: 0.046 * full, se: 0.001, eff: 0.054 - z*0.001, spent: 0.004 - z*0.001},
		{name: "4 % late", reqs: full, late: 0.04 * full, se: 0.002, eff: 0.06 - z*0.002, spent: 0.01 - z*0.002},
		{name: "3 % late: at most maxPayback of the budget", reqs: full, late: 0.03 * full, se: 0.002, eff: 0.06, spent: 0.01},
		{name: "over the budget, transients: paid back", reqs: full, late: 0.06 * full, transient: 0.005 * full, se: 0.002, eff: 0.045},
		{name: "transients in a quiet run: payback and spending add", reqs: full, late: 0.035 * full, transient: 0.005 * full, se: 0.002,
			eff: 0.045 + 0.015 - z*0.002, spent: 0.015 - z*0.002},
		{name: "the payback's bound, then the spare", reqs: full, late: 0.025 * full, transient: 0.02 * full, se: 0.002,
			eff: 0.05 + 0.005 - z*0.002, spent: 0.015 - z*0.002},
		{name: "the payback's bound", reqs: full, late: 0.2 * full, transient: 0.2 * full, se: 0.01, eff: budget * (1 - maxPayback)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := measuredEngine(tc.reqs, tc.late, tc.transient, tc.se)
			require.InDelta(t, tc.se, e.recent.shareError(), 1e-15)
			eff, spent := e.spendBudget(budget, conf)
			require.InDelta(t, tc.eff, eff, 1e-12)
			require.InDelta(t, tc.spent, spent, 1e-12)
		})
	}
}

// TestClumpedLateRequestsSpendLess: the same share of late requests, spread
// evenly over the cycles or clumped into one cycle in ten (a burst's
// backlog), measures a standard error three times as large clumped, and
// 4.5 % late against a 5 % budget is spent on only when spread.
func TestClumpedLateRequestsSpendLess(t *testing.T) {
	const budget, n = 0.05, 1000.0
	run := func(late func(i int) float64) *Engine {
		e := NewEngine()
		for i := range 400 {
			l := late(i)
			s := Snapshot{LatencyBuckets: []LatencyBucket{{0.2, n * (1 - l)}, {math.Inf(1), n * l}}, LatencySamples: n}
			e.recordLate(s, 100, 0.2, false, budget)
		}
		return e
	}
	spread := run(func(i int) float64 { return 0.045 + 0.01*float64(i%2) - 0.005 })
	clumped := run(func(i int) float64 {
		if i%10 == 5 {
			return 0.045 * 10
		}
		return 0
	})
	require.InDelta(t, 0.045, spread.recent.share(), 0.002)
	require.InDelta(t, 0.045, clumped.recent.share(), 0.012, "an exponentially weighted share, the last clump four cycles old")
	require.Greater(t, clumped.recent.shareError(), 3*spread.recent.shareError())
	_, spentSpread := spread.spendBudget(budget, 0.95)
	_, spentClumped := clumped.spendBudget(budget, 0.95)
	require.Greater(t, spentSpread, 0.0, "spread: SE %.4f", spread.recent.shareError())
	require.Zero(t, spentClumped, "clumped: SE %.4f", clumped.recent.shareError())
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
			// ±1 point from cycle to cycle: the scatter the share's error is
			// measured from.
			s := measure(snapshot(t0.Add(time.Duration(i)*15*time.Second), 60, 0.04, 6), late+0.01*float64(i%2)-0.005)
			d, err := e.Decide(spec, s)
			require.NoError(t, err)
			e.Revert(d) // the same 6 pods every cycle: only the sizing is under test
			last = d
		}
		return last
	}
	quiet, near := run(0.02), run(0.049)
	x := quiet.Explanation
	require.InDelta(t, 0.02, x.RecentLateShare, 0.001)
	require.Greater(t, x.RecentRequests, biasTailSamples/0.05/2)
	// ±0.5 point about the share each cycle of 1,000 requests: its error over
	// the loop's memory is about 0.1 point.
	require.InDelta(t, 0.001, x.RecentLateShareError, 0.0005)
	// The budget less 1.645 standard errors less 2 % measured is about 2.8
	// points, of which maxPayback of the budget, 1 point, is spent.
	require.InDelta(t, 0.01, x.SpentLateShare, 1e-9)
	require.InDelta(t, 94, x.EffectivePercentile, 1e-9)
	require.Contains(t, x.Reason, fmt.Sprintf("ran %.3g%% late, under the budget 5%% by more than %.2f%%, the share's own error at the SLO's confidence: 1%% of it spent, sized at p94, and a scale-down needs no upper bound on λ",
		100*x.RecentLateShare, 100*normalQuantile(0.95)*x.RecentLateShareError))
	require.Equal(t, x.ArrivalRate, x.ArrivalRateHigh, "the scale-down reads λ itself while the budget is spent")

	y := near.Explanation
	require.InDelta(t, 0.049, y.RecentLateShare, 0.001)
	require.Greater(t, 0.05-y.RecentLateShare, 0.0, "under the budget")
	require.Less(t, 0.05-y.RecentLateShare, normalQuantile(0.95)*y.RecentLateShareError, "but within its own error of it")
	require.Zero(t, y.SpentLateShare)
	require.Equal(t, 95.0, y.EffectivePercentile)
	require.NotContains(t, y.Reason, "spent")
	require.Greater(t, y.ArrivalRateHigh, y.ArrivalRate, "near the budget, λ's upper bound guards the scale-down")

	// The same pods at the same λ are further from the target at the looser
	// percentile.
	require.Less(t, x.Normalized, y.Normalized, "%s\n%s", x.Reason, y.Reason)
}

// TestTheFloorSpendsTheBudgetTheMarginKeeps: while the recent requests leave
// the budget unused (2 % late against 5 %, measured to ±0.1 point), the jump
// floor holds the history's jumps to the budget as the steady state spends it
// (here maxPayback's bound, 6 %), and the scale-down's margin to 1 − p. A
// history of 4× rises at 21/s needs 5 pods at 5 % and 4 at 6 %: with the
// budget spent, 4 pods are not scaled up and 5 are not scaled down (the band
// in which neither acts), and without it 4 pods are scaled up to 5.
func TestTheFloorSpendsTheBudgetTheMarginKeeps(t *testing.T) {
	spec := queueSpec()
	spec.Behavior = immediate()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: 45 * time.Second}
	now := t0.Add(2 * time.Hour)
	quiet := func() *Engine {
		full := 2 * biasTailSamples / 0.05
		return measuredEngine(full, 0.02*full, 0, 0.001)
	}
	decide := func(e *Engine, pods int32) Decision {
		d, err := e.Decide(spec, recurring(now, 21, 4, 0.04, pods))
		require.NoError(t, err)
		return d
	}

	strict := decide(NewEngine(), 4)
	x := strict.Explanation
	require.InDelta(t, 0.05, x.JumpBudget, 1e-12)
	require.Equal(t, int32(5), x.JumpReplicas)
	require.Equal(t, int32(5), strict.DesiredReplicas, "at 1 − p the floor scales 4 pods up: %s", x.Reason)
	require.Contains(t, x.Reason, "their late share is")
	require.NotContains(t, x.Reason, "as the steady state spends it")

	spent := decide(quiet(), 4)
	x = spent.Explanation
	require.InDelta(t, 0.01, x.SpentLateShare, 1e-9)
	require.InDelta(t, 0.06, x.JumpBudget, 1e-9)
	require.Equal(t, int32(4), x.JumpReplicas)
	require.Greater(t, x.JumpLateShare, 0.05, "4 pods hold the jumps within 6 %%, not within 5 %%")
	require.LessOrEqual(t, x.JumpLateShare, 0.06)
	require.Equal(t, int32(4), spent.DesiredReplicas, "the floor spends the budget: no scale-up: %s", x.Reason)

	kept := decide(quiet(), 5)
	x = kept.Explanation
	require.Equal(t, int32(4), x.JumpReplicas)
	require.Equal(t, int32(5), kept.DesiredReplicas, "the margin keeps 1 − p: no scale-down to the floor's 4: %s", x.Reason)
	require.Contains(t, x.Reason, "fewest pods whose late share over the likely λ of the next 45s")
	require.LessOrEqual(t, x.DownLateShare, 0.05)
}

// longEngine is an engine whose long memory measured a share late of reqs
// requests with standard error se (and whose recent memory is empty).
func longEngine(reqs, share, se float64) *Engine {
	e := NewEngine()
	e.long = lateMemory{reqs: reqs, late: share * reqs, sq: (se * reqs) * (se * reqs)}
	return e
}

// TestTightenBudget: the budget the floor and the margin aim at, from the
// long late share (budget 5 %, at p95's confidence: tightened where the share
// is over the budget less 2 × 1.645 standard errors, by the excess, at most
// to 4 %).
func TestTightenBudget(t *testing.T) {
	const budget, conf = 0.05, 0.95
	z := normalQuantile(conf)
	full := longMemory * biasTailSamples / budget // the long memory's weight
	for _, tc := range []struct {
		name            string
		reqs, share, se float64
		want            float64
	}{
		{name: "no requests measured yet: the budget", want: 0},
		{name: "too few requests: under half the long memory", reqs: full / 2.5, share: 0.09, se: 0.001, want: 0},
		{name: "under the budget by more than twice its error", reqs: full, share: 0.045, se: 0.001, want: 0},
		{name: "under the budget by less than twice its error", reqs: full, share: 0.048, se: 0.002, want: budget - (0.048 + 2*z*0.002 - budget)},
		{name: "on the budget", reqs: full, share: 0.05, se: 0.001, want: budget - 2*z*0.001},
		{name: "far over: at most a fifth tighter", reqs: full, share: 0.09, se: 0.001, want: budget * (1 - maxPayback)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, longEngine(tc.reqs, tc.share, tc.se).tightenBudget(budget, conf), 1e-12)
		})
	}
}

// TestRecordLateKeepsTheLongShare: the long memory sees every cycle the recent
// one does and forgets ten times more slowly; its share and error follow the
// same counts.
func TestRecordLateKeepsTheLongShare(t *testing.T) {
	const budget = 0.05
	e := NewEngine()
	mem := biasTailSamples / budget
	// One recent memory's worth of requests at 2 % late, then as many at 8 %.
	for _, late := range []float64{0.02, 0.08} {
		for range 20 {
			e.recordLate(lateSnapshot(mem/20, late), 0, 0.2, false, budget)
		}
	}
	recent := e.recent.share()
	long, se := e.long.share(), e.long.shareError()
	require.Greater(t, recent, 0.06, "the recent memory has mostly forgotten the 2 %% part")
	require.InDelta(t, 0.05, long, 0.004, "the long memory still weighs both parts about equally")
	require.Greater(t, se, 0.0, "the cycles scatter about the long share")
	// Its weight after 2 memories' requests: longMemory·mem·(1 − e^(−2/longMemory)),
	// the recent one's mem·(1 − e^(−2)).
	require.InEpsilon(t, longMemory*mem*(1-math.Exp(-2.0/longMemory)), e.long.reqs, 0.01, "ten times the memory forgets a tenth as fast")
	require.InEpsilon(t, mem*(1-math.Exp(-2)), e.recent.reqs, 0.05)
}

// lateSnapshot is a cycle of n measured requests, a share late of them over
// a 200 ms target.
func lateSnapshot(n, late float64) Snapshot {
	return Snapshot{LatencyBuckets: []LatencyBucket{{0.2, n * (1 - late)}, {math.Inf(1), n * late}}, LatencySamples: n}
}

// TestTheLongShareTightensTheFloorAndTheMargin: 4× rises on 40 ms service.
// The floor, at λ's mean as far as its counts prove it: from 20/s, 4 pods hold
// them within 5 % (4.4 %) and only 5 within 4 %. The margin, at the mean
// itself: from 19/s, 4 pods within 5 % (4.5 %), 5 within 4 %. A long memory
// that ran over the budget (9 %) makes the floor scale 4 pods up and the
// margin keep 5; one that ran under it by more than twice its error (4.5 % ±
// 0.1 %) changes nothing, nor does a long memory too short to judge.
func TestTheLongShareTightensTheFloorAndTheMargin(t *testing.T) {
	spec := queueSpec()
	spec.Behavior = immediate()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: 45 * time.Second}
	now := t0.Add(2 * time.Hour)
	full := longMemory * biasTailSamples / 0.05
	for _, tc := range []struct {
		name   string
		engine func() *Engine
		tight  float64
		floor  int32 // pods after, from 4 at 20/s
		margin int32 // pods after, from 5 at 19/s
	}{
		{name: "no long memory", engine: NewEngine, floor: 4, margin: 4},
		{name: "too short to judge", engine: func() *Engine { return longEngine(full/3, 0.09, 0.001) }, floor: 4, margin: 4},
		{name: "under the budget beyond twice its error", engine: func() *Engine { return longEngine(full, 0.045, 0.001) }, floor: 4, margin: 4},
		{name: "over the budget", engine: func() *Engine { return longEngine(full, 0.09, 0.001) }, tight: 0.04, floor: 5, margin: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.engine().Decide(spec, recurring(now, 20, 4, 0.04, 4))
			require.NoError(t, err)
			x := d.Explanation
			require.InDelta(t, tc.tight, x.TightenedBudget, 1e-12)
			require.Equal(t, tc.floor, d.DesiredReplicas, x.Reason)
			if tc.tight > 0 {
				require.InDelta(t, tc.tight, x.JumpBudget, 1e-12, "the floor aims at the tightened budget")
				require.LessOrEqual(t, x.JumpLateShare, tc.tight)
				require.Contains(t, x.Reason, "the floor and the margin aim at 0.04: the last 200000 requests ran 9% late, ± 0.1%")
			} else {
				require.NotContains(t, x.Reason, "the floor and the margin aim at")
			}
			d, err = tc.engine().Decide(spec, recurring(now, 19, 4, 0.04, 5))
			require.NoError(t, err)
			x = d.Explanation
			require.Equal(t, tc.margin, d.DesiredReplicas, "the margin: %s", x.Reason)
			require.Contains(t, x.Reason, "fewest pods whose late share over the likely λ")
			if tc.tight > 0 {
				require.LessOrEqual(t, x.DownLateShare, tc.tight)
			} else {
				require.Greater(t, x.DownLateShare, 0.04)
				require.LessOrEqual(t, x.DownLateShare, 0.05)
			}
		})
	}
}

// TestTheLateCountsSurviveRestart: a restarted engine resumes the closed
// loop's recent and long late counts (not starting afresh, which would stop
// the spending and the tightening until it had measured half a memory again);
// counts that cannot be right are dropped.
func TestTheLateCountsSurviveRestart(t *testing.T) {
	e := longEngine(300000, 0.07, 0.002)
	e.recent, e.lateTransient = lateMemory{reqs: 30000, late: 900, sq: 4e4}, 100
	s := e.State()
	back := NewEngineFromState(s)
	require.Equal(t, e.recent, back.recent)
	require.Equal(t, e.lateTransient, back.lateTransient)
	require.Equal(t, e.long, back.long)
	require.InDelta(t, e.tightenBudget(0.05, 0.95), back.tightenBudget(0.05, 0.95), 1e-15)
	require.Positive(t, back.tightenBudget(0.05, 0.95))

	for _, bad := range []StateLateCounts{
		{Requests: math.NaN(), Late: 1},
		{Requests: 100, Late: 101},
		{Requests: 100, Late: 10, Transient: 11},
		{Requests: 100, Late: -1},
		{Requests: 100, Late: 1, LateSq: math.Inf(1)},
		{},
	} {
		c := bad
		e := NewEngineFromState(State{RecentLate: &c, LongLate: &c})
		require.Zero(t, e.recent, "%+v", bad)
		require.Zero(t, e.lateTransient, "%+v", bad)
		require.Zero(t, e.long, "%+v", bad)
	}
	// A state without them (written before they were kept) starts afresh.
	require.Zero(t, NewEngineFromState(State{}).long)
}
