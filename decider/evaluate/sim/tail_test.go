package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/queueing"
)

// tailRun simulates n k = 1 pods behind random routing at a constant rate for
// seeds replications, and returns the share of requests over target, its
// standard error, and the service quantiles the collector would store from
// the whole run's service-time histograms.
func tailRun(t *testing.T, service string, n int, rate, target float64, seeds int) (late, se float64, qs []decide.LatencyQuantile) {
	t.Helper()
	var shares []float64
	var hist [len(policy.LatencyBounds) + 1]uint64
	for s := 1; s <= seeds; s++ {
		cfg := Config{Rates: constRates(rate, 3000), Service: mustDist(t, service), Init: mustDist(t, "1s"), Concurrency: 1, CPU: 1,
			Target: target, Percentile: 95, InitialReplicas: n, Seed: uint64(s)}
		r := Run(cfg, policy.Static{N: n})
		require.Positive(t, r.Requests)
		shares = append(shares, float64(r.OverTarget)/float64(r.Requests))
		for _, sec := range r.Seconds() {
			for b, c := range sec.Service {
				hist[b] += uint64(c)
			}
		}
	}
	for _, x := range shares {
		late += x
	}
	late /= float64(len(shares))
	for _, x := range shares {
		se += (x - late) * (x - late)
	}
	se = math.Sqrt(se / float64(len(shares)-1) / float64(len(shares)))
	return late, se, policy.ServiceQuantiles(hist[:])
}

// modelTail is P(T > target) of one of n per-pod M/G/1 queues (Allen–Cunneen
// with cs²), exponential service when qs is nil, else the calibrated tail.
func modelTail(t *testing.T, rate, es, cs2 float64, n int, target float64, qs []decide.LatencyQuantile) float64 {
	t.Helper()
	l := queueing.Load{ArrivalRate: rate, ServiceTime: es, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: cs2}
	if qs != nil {
		pts := make([]queueing.ServiceQuantile, len(qs))
		for i, q := range qs {
			pts[i] = queueing.ServiceQuantile{Percentile: q.Percentile, Seconds: q.Seconds}
		}
		shape, err := queueing.NewServiceShape(pts, es)
		require.NoError(t, err)
		l.Shape = shape
	}
	m, err := l.PerPod(n, 1)
	require.NoError(t, err)
	return m.TailProbability(target)
}

// TestCalibratedTailAgainstSimulation compares the model's share of requests
// over a p95 target of 4·E[S] with the simulator's (10 pods, random routing,
// Poisson arrivals, 4 × 3,000 s), the model calibrated from the service
// quantiles the collector would store. The calibrated tail must be within 5 %
// of the simulation (plus four standard errors) for lognormal cv 1.2 and
// exponential service, and closer than the exponential tail wherever that is
// off by more than 5 %; for lognormal cv 2 (tail far beyond the stored
// p99.9) within 20 %, and still closer.
func TestCalibratedTailAgainstSimulation(t *testing.T) {
	const es, target, n = 0.05, 0.2, 10
	for _, tc := range []struct {
		name    string
		service string
		cs2     float64
		rho     float64
		tol     float64
	}{
		{name: "lognormal cv 1.2 at ρ 0.1", service: "lognormal:50ms,cv=1.2", cs2: 1.44, rho: 0.1, tol: 0.05},
		{name: "lognormal cv 1.2 at ρ 0.2", service: "lognormal:50ms,cv=1.2", cs2: 1.44, rho: 0.2, tol: 0.05},
		{name: "lognormal cv 1.2 at ρ 0.3", service: "lognormal:50ms,cv=1.2", cs2: 1.44, rho: 0.3, tol: 0.05},
		{name: "lognormal cv 1.2 at ρ 0.45", service: "lognormal:50ms,cv=1.2", cs2: 1.44, rho: 0.45, tol: 0.05},
		{name: "exponential at ρ 0.1", service: "exp:50ms", cs2: 1, rho: 0.1, tol: 0.05},
		{name: "exponential at ρ 0.3", service: "exp:50ms", cs2: 1, rho: 0.3, tol: 0.05},
		{name: "lognormal cv 2 at ρ 0.1", service: "lognormal:50ms,cv=2", cs2: 4, rho: 0.1, tol: 0.2},
		{name: "lognormal cv 2 at ρ 0.3", service: "lognormal:50ms,cv=2", cs2: 4, rho: 0.3, tol: 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate := tc.rho * n / es
			late, se, qs := tailRun(t, tc.service, n, rate, target, 4)
			require.NotNil(t, qs)
			cal := modelTail(t, rate, es, tc.cs2, n, target, qs)
			exp := modelTail(t, rate, es, tc.cs2, n, target, nil)
			t.Logf("simulated %.4f ± %.4f; calibrated %.4f (%+.1f%%); exponential %.4f (%+.1f%%)",
				late, se, cal, 100*(cal/late-1), exp, 100*(exp/late-1))
			require.InDelta(t, late, cal, tc.tol*late+4*se)
			if math.Abs(exp-late) > 0.05*late+4*se {
				require.Less(t, math.Abs(cal-late), math.Abs(exp-late))
			}
		})
	}
}

// TestCalibratedPodsMeetTheTarget: at the pod count the calibrated model
// sizes for p95 ≤ 4·E[S] (lognormal cv 1.2, per-pod M/G/1, random routing),
// the simulator's late share is within 3 % of the 5 % budget (plus two
// standard errors: near the target the late share falls slowly with the
// pods, so a 1 % error in it is a few percent of pods); the exponential
// model's count, fewer pods, runs over the budget by more (the issue's
// "credits each pod with more capacity than it has").
func TestCalibratedPodsMeetTheTarget(t *testing.T) {
	const es, target, svc = 0.05, 0.2, "lognormal:50ms,cv=1.2"
	_, _, qs := tailRun(t, svc, 10, 20, target, 1)
	pts := make([]queueing.ServiceQuantile, len(qs))
	for i, q := range qs {
		pts[i] = queueing.ServiceQuantile{Percentile: q.Percentile, Seconds: q.Seconds}
	}
	shape, err := queueing.NewServiceShape(pts, es)
	require.NoError(t, err)
	for _, rate := range []float64{50, 200} {
		l := queueing.Load{ArrivalRate: rate, ServiceTime: es, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 1.44}
		nExp, err := l.MinPods(1, queueing.LayoutPerPod, target, 95)
		require.NoError(t, err)
		l.Shape = shape
		nCal, err := l.MinPods(1, queueing.LayoutPerPod, target, 95)
		require.NoError(t, err)
		lateCal, seCal, _ := tailRun(t, svc, nCal, rate, target, 4)
		lateExp, seExp, _ := tailRun(t, svc, nExp, rate, target, 4)
		t.Logf("λ %v/s: calibrated %d pods, %.4f ± %.4f late; exponential %d pods, %.4f ± %.4f late", rate, nCal, lateCal, seCal, nExp, lateExp, seExp)
		require.Greater(t, nCal, nExp)
		require.LessOrEqual(t, lateCal, 0.05*1.03+2*seCal)
		require.Greater(t, lateExp, 0.05+2*seExp)
		require.Greater(t, lateExp-0.05, 2*math.Abs(lateCal-0.05))
	}
}
