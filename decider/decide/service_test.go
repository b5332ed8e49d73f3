package decide

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lognormalIntervals draws k intervals of n lognormal service times of mean
// es and coefficient of variation cv, and returns each interval's mean and
// sample SCV, as a collector computes them.
func lognormalIntervals(r *rand.Rand, k, n int, es, cv float64) (means, scvs []float64) {
	sig := math.Sqrt(math.Log(1 + cv*cv))
	mu := math.Log(es) - sig*sig/2
	for range k {
		var sum, sq float64
		for range n {
			x := math.Exp(mu + sig*r.NormFloat64())
			sum += x
			sq += x * x
		}
		m := sum / float64(n)
		means = append(means, m)
		scvs = append(scvs, (sq/float64(n)-m*m)/(m*m))
	}
	return means, scvs
}

func stddev(xs []float64) float64 {
	var s, sq float64
	for _, x := range xs {
		s += x
		sq += x * x
	}
	m := s / float64(len(xs))
	return math.Sqrt(math.Max(0, sq/float64(len(xs))-m*m))
}

// TestServiceEstimatePoolsIntervals: intervals of 150 requests each (30/s over
// a 5 s scrape) move E[S] by about 10 % at cv 1.2; the pooled estimate moves
// by a fraction of that, stays near the true mean, and a stationary service
// time does not make it start again.
func TestServiceEstimatePoolsIntervals(t *testing.T) {
	for _, tc := range []struct {
		name string
		cv   float64
	}{{"exponential-like cv 1", 1}, {"lognormal cv 1.2", 1.2}, {"lognormal cv 0.5", 0.5}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			means, scvs := lognormalIntervals(r, 600, 150, 0.05, tc.cv)
			var s serviceEstimate
			var pooled []float64
			for i := range means {
				require.Empty(t, s.update(means[i], scvs[i], 150, 500), "interval %d", i)
				pooled = append(pooled, s.mean())
			}
			// After the first memory's worth of requests: the estimate's
			// spread against the intervals'.
			settled := pooled[200:]
			require.Less(t, stddev(settled), stddev(means[200:])/4)
			for i, m := range settled {
				require.InDelta(t, 0.05, m, 0.05*0.04, "interval %d", 200+i)
			}
			require.InDelta(t, tc.cv*tc.cv, s.scv(), 0.35*tc.cv*tc.cv)
		})
	}
}

// TestServiceEstimateFollowsAStep: a service time that moves (a new version,
// a slower dependency) is followed within a few intervals, up or down, from
// the requests since the change, not averaged away over the memory.
func TestServiceEstimateFollowsAStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		factor float64
		word   string
	}{{"30% slower", 1.3, "rose"}, {"twice as slow", 2, "rose"}, {"30% faster", 0.7, "fell"}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			before, beforeSCV := lognormalIntervals(r, 300, 150, 0.05, 1.2)
			after, afterSCV := lognormalIntervals(r, 40, 150, 0.05*tc.factor, 1.2)
			var s serviceEstimate
			for i := range before {
				require.Empty(t, s.update(before[i], beforeSCV[i], 150, 500))
			}
			restartedAt := -1
			for i := range after {
				if why := s.update(after[i], afterSCV[i], 150, 500); why != "" {
					require.Contains(t, why, tc.word)
					restartedAt = i
					break
				}
			}
			require.GreaterOrEqual(t, restartedAt, 0, "the step was never found")
			require.Less(t, restartedAt, 10, "found after %d intervals", restartedAt+1)
			// Pooled from the requests since the change: near the new mean
			// once a few more intervals came.
			for i := restartedAt + 1; i < restartedAt+11; i++ {
				s.update(after[i], afterSCV[i], 150, 500)
			}
			require.InDelta(t, 0.05*tc.factor, s.mean(), 0.05*tc.factor*0.08)
		})
	}
}

// TestOneExtremeIntervalIsNoStep: one interval whose mean is tens of standard
// errors out (a request of seconds among a few dozen: heavy tails do that)
// does not start the estimate again; the pooled mean barely moves.
func TestOneExtremeIntervalIsNoStep(t *testing.T) {
	var s serviceEstimate
	for range 200 {
		require.Empty(t, s.update(0.05, 1.44, 30, 500))
	}
	require.Empty(t, s.update(0.17, 13.7, 27, 500))
	for range 20 {
		require.Empty(t, s.update(0.05, 1.44, 30, 500))
	}
	require.InDelta(t, 0.05, s.mean(), 0.05*0.02, "pooled, not started again at 0.17 s")
}

// TestServiceEstimateStartsAgainOnAResize: E[S] depends on the CPU, so a
// changed CPU request starts the estimate again from the new interval.
func TestServiceEstimateStartsAgainOnAResize(t *testing.T) {
	var s serviceEstimate
	for range 50 {
		require.Empty(t, s.update(0.05, 1, 200, 500))
	}
	why := s.update(0.03, 1, 200, 1000)
	require.Contains(t, why, "CPU request changed (500m → 1000m)")
	require.InDelta(t, 0.03, s.mean(), 1e-12)
	require.InDelta(t, 200, s.n, 1e-9)
	// Unknown CPU (0) is no change.
	require.Empty(t, s.update(0.03, 1, 200, 0))
}

// TestEngineCountsAnIntervalOnce: the store returns the same newest point
// while the collector misses a cycle; the engine folds it in once.
func TestEngineCountsAnIntervalOnce(t *testing.T) {
	e := NewEngine()
	spec := baseSpec()
	s := snapshot(t0, 100, 0.05, 10)
	s.ServiceSamples = 500
	_, err := e.Decide(spec, s)
	require.NoError(t, err)
	require.InDelta(t, 500, e.State().ServiceSamples, 1e-9)
	s.Now = t0.Add(5 * time.Second) // same DataTime
	d, err := e.Decide(spec, s)
	require.NoError(t, err)
	require.InDelta(t, 500, e.State().ServiceSamples, 1e-9)
	require.InDelta(t, 500, d.Explanation.ServiceSamples, 1e-9)
	// Without a count, λ × the sample interval (100/s × 15 s).
	s = snapshot(t0.Add(10*time.Second), 100, 0.05, 10)
	_, err = e.Decide(spec, s)
	require.NoError(t, err)
	require.InDelta(t, 500*math.Exp(-1500/serviceMemory(1))+1500, e.State().ServiceSamples, 1e-6)
}

// TestEngineSizesThePooledServiceTime: the decision sizes for the pooled
// E[S], not the newest interval's, and shows both.
func TestEngineSizesThePooledServiceTime(t *testing.T) {
	e := NewEngine()
	spec := baseSpec()
	for i := range 40 {
		s := snapshot(t0.Add(time.Duration(i)*5*time.Second), 100, 0.05, 10)
		s.ServiceSamples, s.ServiceSCV = 500, 1
		_, err := e.Decide(spec, s)
		require.NoError(t, err)
	}
	// One interval 8 % slower: noise for 500 requests at SCV 1 (a 4.5 %
	// standard error), within the CUSUM's limit.
	s := snapshot(t0.Add(40*5*time.Second), 100, 0.054, 10)
	s.ServiceSamples, s.ServiceSCV = 500, 1
	d, err := e.Decide(spec, s)
	require.NoError(t, err)
	x := d.Explanation
	require.InDelta(t, 0.054, x.ServiceTimeInterval, 1e-12)
	require.Less(t, x.ServiceTime, 0.0505)
	require.Greater(t, x.ServiceTime, 0.05)
	require.True(t, strings.HasPrefix(x.ServiceNote, "E[S] pooled over the last"), x.ServiceNote)
}

// TestServiceStateSurvivesRestart: the estimate is part of the engine's
// State; a state with bad numbers is not restored.
func TestServiceStateSurvivesRestart(t *testing.T) {
	var e Engine
	for range 20 {
		e.service.update(0.04, 1.44, 300, 250)
	}
	st := e.State()
	require.InDelta(t, 0.04, st.ServiceMean, 1e-12)
	require.InDelta(t, 1.44, st.ServiceSCV, 1e-9)
	require.InDelta(t, 250, st.ServiceCPU, 0)
	r := NewEngineFromState(st)
	require.InDelta(t, e.service.mean(), r.service.mean(), 1e-15)
	require.InDelta(t, e.service.scv(), r.service.scv(), 1e-9)
	require.InDelta(t, e.service.n, r.service.n, 1e-9)
	for _, bad := range []State{
		{ServiceMean: math.NaN(), ServiceSamples: 10},
		{ServiceMean: 0.05, ServiceSamples: math.Inf(1)},
		{ServiceMean: -0.05, ServiceSamples: 10},
		{ServiceMean: 0.05, ServiceSamples: 10, ServiceSCV: -1},
		{ServiceMean: 0.05, ServiceSamples: 10, ServiceCPU: math.NaN()},
		{ServiceSCV: 1.2}, // a state from before the pooled estimate
	} {
		require.Zero(t, NewEngineFromState(bad).service.n, "%+v", bad)
	}
}
