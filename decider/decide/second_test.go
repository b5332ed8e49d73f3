package decide

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// normalCDF is Φ(z).
func normalCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// TestRBMSurvival checks the reflected Brownian motion's survival against its
// known cases: certain at 0, the reflection principle without drift
// (2·(1 − Φ(x/√(v·u))) from 0), the steady state e^{2·m·x/v} long after the
// start with a negative drift, a start above x with no time to move, and no
// NaN or value outside [0, 1] far in the tails, where the reflection term's
// exponential overflows on its own.
func TestRBMSurvival(t *testing.T) {
	for _, tc := range []struct {
		name           string
		x, u, x0, m, v float64
		want           float64
		tol            float64
	}{
		{"at zero", 0, 1, 0, -0.5, 0.01, 1, 0},
		{"no drift, from 0", 0.1, 1, 0, 0, 0.01, 2 * (1 - normalCDF(1)), 1e-12}, // √(v·u) = 0.1
		{"no drift, from 0, later", 0.1, 4, 0, 0, 0.01, 2 * (1 - normalCDF(0.1/0.2)), 1e-12},
		{"steady state", 0.05, 1e4, 0, -0.2, 0.01, math.Exp(2 * -0.2 * 0.05 / 0.01), 1e-9},
		{"started above, no time", 0.1, 1e-12, 0.2, -0.2, 0.01, 1, 1e-9},
		{"started below, no time", 0.1, 1e-12, 0.05, -0.2, 0.01, 0, 1e-9},
		{"overloaded, far tail", 50, 1, 0, 3, 1e-4, 0, 1e-12},
		{"overloaded, below the drift", 0.5, 1, 0, 1, 1e-4, 1, 1e-9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rbmSurvival(tc.x, tc.u, tc.x0, tc.m, tc.v)
			require.False(t, math.IsNaN(got))
			require.InDelta(t, tc.want, got, tc.tol)
		})
	}
	// Falls with x, rises with the drift and with the start.
	prev := 1.0
	for x := 0.0; x <= 0.5; x += 0.01 {
		p := rbmSurvival(x, 0.5, 0.02, 0.1, 0.005)
		require.LessOrEqual(t, p, prev+1e-12, "x %v", x)
		require.Greater(t, rbmSurvival(x+0.01, 0.5, 0.02, 0.2, 0.005), rbmSurvival(x+0.01, 0.5, 0.02, 0.1, 0.005)-1e-12)
		require.Greater(t, rbmSurvival(x+0.01, 0.5, 0.05, 0.1, 0.005), rbmSurvival(x+0.01, 0.5, 0.02, 0.1, 0.005)-1e-12)
		prev = p
	}
}

// TestLogNormalCDF: continuous where the asymptotic series takes over, and
// finite far beyond where Φ underflows.
func TestLogNormalCDF(t *testing.T) {
	require.InDelta(t, math.Log(normalCDF(-7.999)), logNormalCDF(-7.999), 1e-9)
	require.InEpsilon(t, logNormalCDF(-7.999999), logNormalCDF(-8.000001), 1e-4)
	require.InEpsilon(t, math.Log(normalCDF(-20)), logNormalCDF(-20), 1e-4)
	v := logNormalCDF(-100)
	require.False(t, math.IsInf(v, 0) || math.IsNaN(v))
	require.InEpsilon(t, -5000-math.Log(100*math.Sqrt(2*math.Pi)), v, 1e-6)
}

// TestSecondFactor: the factor a second's steady-state share is scaled by.
func TestSecondFactor(t *testing.T) {
	spec := queueSpec()
	spec.Model = ModelPerPod
	s := newSizer(spec, snapshot(t0, 3, 0.04, 1), 0.04)
	s.mix, s.cv2 = rateMixture(2.5), 2.5

	// Far from saturation the steady state stands.
	require.Equal(t, 1.0, s.secondFactor(10, 3, 0.04, 1), "ρ = 0.4")
	// Within the budget at its steady state: nothing to correct (a 1 s
	// target: e^{−7} of the requests late at ρ = 0.72), unlike at 250 ms.
	loose := spec
	loose.Target = time.Second
	require.Equal(t, 1.0, newSizer(loose, snapshot(t0, 3, 0.04, 1), 0.04).secondFactor(18, 3, 0.04, 1))
	require.Less(t, s.secondFactor(18, 3, 0.04, 1), 1.0)

	// Beyond the pod's capacity the steady state counts every request late;
	// a second of it does not.
	steady := s.tail0(30, 0.04, 1, 0.25)
	require.Equal(t, 1.0, steady)
	f := s.secondFactor(30, 3, 0.04, 1)
	require.Greater(t, f, 0.05)
	require.Less(t, f, 0.8)
	// Cached per decision by the rounded utilisations: a nearby rate reads
	// the same factor, and per-pod queues at the same utilisations are the
	// same queue whatever the pods.
	cached := len(s.seconds)
	require.Equal(t, f, s.secondFactor(30*(1+secondRateStep/4), 3, 0.04, 1))
	require.Equal(t, f, s.secondFactor(60, 6, 0.04, 2))
	require.Len(t, s.seconds, cached)
	// The closed loop's correction (calibrate tries many) and the percentile
	// are part of the model the factor was computed for: not read across.
	s.waitBias = 2
	require.NotEqual(t, f, s.secondFactor(30, 3, 0.04, 1))
	s.waitBias = 1
	g := s.secondFactor(18, 3, 0.04, 1) // steady share 0.17 > 0.05
	require.Less(t, g, 1.0)
	s.pct = 80 // a budget of 0.2: within it at the steady state
	require.Equal(t, 1.0, s.secondFactor(18, 3, 0.04, 1))
	s.pct = spec.Percentile
	require.Equal(t, f, s.secondFactor(30, 3, 0.04, 1))
	require.Equal(t, g, s.secondFactor(18, 3, 0.04, 1))

	// Overloaded on average (the jump floor prices a rate sustained for a
	// lead): no typical state to return to, every second stays at the
	// steady state.
	require.Equal(t, 1.0, s.secondFactor(40, 26, 0.04, 1))

	// More arrivals in the second, more of them late; a busier queue around
	// it, more late too.
	share := func(rate, mean float64) float64 {
		return s.tail0(rate, 0.04, 1, 0.25) * s.secondFactor(rate, mean, 0.04, 1)
	}
	for _, r := range []float64{24, 28, 32, 40, 60} {
		require.Less(t, share(r, 3), share(r*1.1, 3), "rate %v", r)
		require.LessOrEqual(t, share(r, 3), share(r, 10)+1e-12, "rate %v", r)
	}

	// Nothing to scale without a percentile target.
	spec.Percentile = 0
	require.Equal(t, 1.0, newSizer(spec, snapshot(t0, 3, 0.04, 1), 0.04).secondFactor(30, 3, 0.04, 1))
}

// TestOneSecondOverloadsDoNotBuyAPod: one pod of 40 ms service, 3 requests a
// second on average in batches (cv² 2.5: a second holds 0, 7.5, 15, 22.5, 30,
// … requests), p95 ≤ 250 ms. Simulated, the one pod runs under the 5 % budget;
// the steady state of each second counts the seconds of four batches (30
// requests on a pod that clears 25) entirely late, those of three at ρ = 0.9,
// and asks for a second pod.
// The transient gives one.
func TestOneSecondOverloadsDoNotBuyAPod(t *testing.T) {
	const lambda, cv2, es = 3, 2.5, 0.04
	simulated := simulateSeconds(rand.New(rand.NewPCG(5, 6)), lambda, cv2, es, 1, true, 0.25, 4*3600)
	require.Less(t, simulated, 0.05, "one pod meets the budget")

	spec := queueSpec()
	spec.Model = ModelPerPod
	spec.Target = 250 * time.Millisecond
	s := newSizer(spec, snapshot(t0, lambda, es, 1), es)
	s.mix, s.cv2 = rateMixture(cv2), cv2
	require.Equal(t, int32(1), s.minPods(lambda, es))
	steady := s.mixAverage(lambda, func(rate float64) float64 { return s.tail0(rate, es, 1, 0.25) })
	require.Greater(t, steady, 0.05, "the steady state alone would buy a second pod")
	require.InDelta(t, simulated, s.tail(lambda, es, 1, 0.25), 0.3*simulated)
}

// TestTheTransientIsExplained: a decision whose seconds reach the pod's
// capacity shows, beside the modelled late share, the share were each second
// at its steady state, in the explanation and its reason; with a constant
// rate the two are the same and the reason says nothing of it.
func TestTheTransientIsExplained(t *testing.T) {
	spec := queueSpec()
	spec.Model = ModelPerPod
	snap := func(cv2 float64) Snapshot {
		s := snapshot(t0, 3, 0.04, 1)
		s.RateCV2, s.RateCV2Pairs = cv2, 300
		s.MeasuredLatency = 0.2
		s.MeasuredQuantiles = []LatencyQuantile{{50, 0.05}, {95, 0.2}, {99, 0.4}}
		return s
	}
	d, err := NewEngine().Decide(spec, snap(2.5))
	require.NoError(t, err)
	x := d.Explanation
	require.Positive(t, x.ModelledLateShare)
	require.Greater(t, x.SteadyLateShare, x.ModelledLateShare)
	require.Contains(t, x.Reason, fmt.Sprintf("the seconds near the pods' capacity at their one-second transient: %.3g%% late modelled at the current pods, %.3g%% were each at its steady state",
		100*x.ModelledLateShare, 100*x.SteadyLateShare))

	d, err = NewEngine().Decide(spec, snap(0))
	require.NoError(t, err)
	x = d.Explanation
	require.Positive(t, x.ModelledLateShare)
	require.Equal(t, x.ModelledLateShare, x.SteadyLateShare)
	require.NotContains(t, x.Reason, "one-second transient")
}
