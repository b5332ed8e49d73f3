package decide

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lognormalQuantiles are the exact quantiles of a lognormal service time of
// mean es and coefficient of variation cv at the percentiles ps.
func lognormalQuantiles(es, cv float64, ps ...float64) []LatencyQuantile {
	s2 := math.Log1p(cv * cv)
	mu, sigma := math.Log(es)-s2/2, math.Sqrt(s2)
	out := make([]LatencyQuantile, len(ps))
	for i, p := range ps {
		out[i] = LatencyQuantile{Percentile: p, Seconds: math.Exp(mu + sigma*math.Sqrt2*math.Erfinv(2*p/100-1))}
	}
	return out
}

func exponentialQuantiles(es float64, ps ...float64) []LatencyQuantile {
	out := make([]LatencyQuantile, len(ps))
	for i, p := range ps {
		out[i] = LatencyQuantile{Percentile: p, Seconds: -math.Log1p(-p/100) * es}
	}
	return out
}

var servicePs = []float64{50, 75, 90, 95, 97.5, 99, 99.5, 99.9}

func tailSpec() Spec {
	s := baseSpec()
	s.Model, s.ServiceModel = ModelPerPod, ServiceAllenCunneen
	s.Percentile, s.Target = 95, 200*time.Millisecond
	s.MaxReplicas = 10_000
	return s
}

// TestCalibratedTailDecisions: one decision from a steady state, per load.
// Exponential service quantiles give the decision the exponential model gives
// without quantiles (the fallback); lognormal cv 1.2 quantiles (a heavier tail
// at the target) need more pods, and the explanation says why.
func TestCalibratedTailDecisions(t *testing.T) {
	const es = 0.05
	for _, tc := range []struct {
		name   string
		lambda float64
	}{{"light", 20}, {"medium", 200}, {"heavy", 2000}} {
		t.Run(tc.name, func(t *testing.T) {
			decide := func(qs []LatencyQuantile, scv float64) Decision {
				s := snapshot(t0, tc.lambda, es, 1)
				// Requests enough to take the quantiles in full (below that
				// they are weighed against the exponential's:
				// TestFewRequestsWeighTheShape).
				s.ServiceSCV, s.ServiceQuantiles, s.ServiceSamples = scv, qs, shapeEvidence(tailSpec())
				d, err := NewEngine().Decide(tailSpec(), s)
				require.NoError(t, err)
				return d
			}
			none := decide(nil, 1)
			require.Equal(t, TailExponential, none.Explanation.TailModel)
			require.Contains(t, none.Explanation.TailNote, "no service-time quantiles measured")
			require.InDelta(t, math.Exp(-4), none.Explanation.ServiceLateShare, 1e-15)
			exp := decide(exponentialQuantiles(es, servicePs...), 1)
			require.Equal(t, TailMeasured, exp.Explanation.TailModel)
			require.Equal(t, none.Explanation.Recommendation, exp.Explanation.Recommendation, "exponential quantiles are the exponential model")
			require.InDelta(t, none.Explanation.Latency, exp.Explanation.Latency, 1e-9*none.Explanation.Latency)

			expSCV := decide(nil, 1.44)
			ln := decide(lognormalQuantiles(es, 1.2, servicePs...), 1.44)
			require.Greater(t, ln.Explanation.Recommendation, expSCV.Explanation.Recommendation, "lognormal cv 1.2 needs more pods than the exponential tail credits")
			x := ln.Explanation
			require.Equal(t, TailMeasured, x.TailModel)
			require.Len(t, x.ServiceQuantiles, len(servicePs))
			for i, q := range lognormalQuantiles(es, 1.2, servicePs...) {
				require.InDelta(t, q.Seconds, x.ServiceQuantiles[i].Seconds, 1e-12)
			}
			require.Greater(t, x.ServiceLateShare, math.Exp(-4), "more service times over the target than exponential")
			require.Contains(t, x.Reason, "service tail measured")
			require.Contains(t, x.TailNote, "if exponential")
		})
	}
}

// TestFewRequestsWeighTheShape: the measured quantiles count as far as the
// requests they were measured over know the tail (shapeEvidence: those that
// put 1/θ² beyond the percentile, 2,000 at p95 with θ = 0.1); before that each
// is that share of the way from the exponential's. The case is a decider's
// first interval in the simulator (NASA-free: the diurnal day ×40, lognormal
// 50 ms cv 1.2, 150 requests on 8 pods): its p97.5–p99.9 are a few service
// times each and put 4.3 % of them over the target where the law puts 2.6 %;
// taken whole they ordered three times the pods the law itself needs.
func TestFewRequestsWeighTheShape(t *testing.T) {
	spec := tailSpec()
	full := shapeEvidence(spec)
	require.InDelta(t, 2000, full, 1e-9)
	const es, lambda = 0.0517, 30.4
	firstInterval := []LatencyQuantile{{50, 0.0314}, {75, 0.0573}, {90, 0.1078}, {95, 0.1725}, {97.5, 0.3062}, {99, 0.3625}, {99.5, 0.3812}, {99.9, 0.3962}}
	decide := func(e *Engine, i int, qs []LatencyQuantile, n float64) Decision {
		s := snapshot(t0.Add(time.Duration(i)*5*time.Second), lambda, es, 8)
		s.ServiceSCV, s.ServiceQuantiles, s.ServiceSamples = 1.5, qs, n
		d, err := e.Decide(spec, s)
		require.NoError(t, err)
		return d
	}
	law := decide(NewEngine(), 0, lognormalQuantiles(es, 1.2, servicePs...), full).Explanation
	exp := decide(NewEngine(), 0, exponentialQuantiles(es, servicePs...), full).Explanation
	whole := decide(NewEngine(), 0, firstInterval, full).Explanation
	require.GreaterOrEqual(t, whole.Recommendation, 2*law.Recommendation,
		"the first interval's quantiles, taken whole, order at least twice the pods the law needs")

	e := NewEngine()
	x := decide(e, 0, firstInterval, 150).Explanation
	require.InDelta(t, 150/full, x.ServiceShapeWeight, 1e-12)
	for i, q := range firstInterval {
		want := (150/full)*q.Seconds/es - (1-150/full)*math.Log1p(-q.Percentile/100)
		require.InDelta(t, want*es, x.ServiceQuantiles[i].Seconds, 1e-9, "p%v between the measured and the exponential", q.Percentile)
	}
	require.Contains(t, x.TailNote, "the measured quantiles weigh 8% against the exponential's: 150 requests measured, taken in full from 2000")
	require.LessOrEqual(t, x.Recommendation, law.Recommendation, "150 requests order no more than the law needs")
	require.GreaterOrEqual(t, x.Recommendation, exp.Recommendation)
	require.Equal(t, 150.0, e.State().ServiceShapeSamples)

	// The evidence adds up over intervals, and the weight reaches 1 with it.
	prev := x.ServiceShapeWeight
	for i := 1; i < 12; i++ {
		x = decide(e, i, lognormalQuantiles(es, 1.2, servicePs...), 150).Explanation
		require.InDelta(t, math.Min(1, float64(i+1)*150/full), x.ServiceShapeWeight, 1e-12)
		require.Greater(t, x.ServiceShapeWeight, prev)
		prev = x.ServiceShapeWeight
	}
	for i := 12; i < 14; i++ {
		x = decide(e, i, lognormalQuantiles(es, 1.2, servicePs...), 150).Explanation
	}
	require.Equal(t, 1.0, x.ServiceShapeWeight)
	require.NotContains(t, x.TailNote, "weigh")
	require.InDelta(t, 14*150, e.State().ServiceShapeSamples, 1e-9)

	// E[S] estimate started again (here E[S] doubles for three intervals):
	// the shape starts from the interval, its evidence stays.
	twice := func(qs []LatencyQuantile) []LatencyQuantile {
		out := make([]LatencyQuantile, len(qs))
		for i, q := range qs {
			out[i] = LatencyQuantile{Percentile: q.Percentile, Seconds: 2 * q.Seconds}
		}
		return out
	}
	var restart Decision
	for i := 20; i < 23; i++ {
		s := snapshot(t0.Add(time.Duration(i)*5*time.Second), lambda, 2*es, 8)
		s.ServiceSCV, s.ServiceQuantiles, s.ServiceSamples = 1.5, twice(lognormalQuantiles(es, 1.2, servicePs...)), 150
		var err error
		restart, err = e.Decide(spec, s)
		require.NoError(t, err)
	}
	require.Contains(t, restart.Explanation.ServiceNote, "started again")
	require.Equal(t, 1.0, restart.Explanation.ServiceShapeWeight)

	// A restored engine keeps its evidence; a state saved before the count
	// was kept starts it again, as do other percentiles.
	require.InDelta(t, 17*150, e.State().ServiceShapeSamples, 1e-9)
	restored := NewEngineFromState(e.State())
	require.Equal(t, 1.0, decide(restored, 24, nil, 0).Explanation.ServiceShapeWeight)
	old := e.State()
	old.ServiceShapeSamples = 0
	require.InDelta(t, 0.0, decide(NewEngineFromState(old), 24, nil, 0).Explanation.ServiceShapeWeight, 1e-12)
	for _, bad := range []float64{math.NaN(), math.Inf(1), -5} {
		st := e.State()
		st.ServiceShapeSamples = bad
		require.InDelta(t, 0.0, decide(NewEngineFromState(st), 24, nil, 0).Explanation.ServiceShapeWeight, 1e-12, "%v", bad)
	}
	x = decide(e, 24, []LatencyQuantile{{90, 0.11}, {99, 0.24}}, 150).Explanation
	require.InDelta(t, 150/full, x.ServiceShapeWeight, 1e-12)

	// No tolerance: taken whole at once (the behaviour before the weighing).
	zero := spec
	zero.Tolerance = 0
	require.Zero(t, shapeEvidence(zero))
}

// TestServiceShapeIsAveraged: the engine averages the quantiles relative to
// E[S] as it pools E[S] (service.go): each interval weighs its share of the
// pooled requests. It keeps them through a cycle without any, starts over
// when the percentiles change or the E[S] estimate starts again, and
// remembers them in its State.
func TestServiceShapeIsAveraged(t *testing.T) {
	spec := tailSpec()
	e := NewEngine()
	const n = 1500.0 // requests per interval
	at := func(i int, es float64, qs []LatencyQuantile) Decision {
		s := snapshot(t0.Add(time.Duration(i)*5*time.Second), 100, es, 30)
		s.ServiceQuantiles, s.ServiceSamples = qs, n
		d, err := e.Decide(spec, s)
		require.NoError(t, err)
		return d
	}
	first := []LatencyQuantile{{50, 0.05}, {95, 0.2}}
	at(0, 0.05, first)
	require.Equal(t, []LatencyQuantile{{50, 1}, {95, 4}}, e.State().ServiceShape)
	// A heavier p95 at the same E[S]: the average moves by this interval's
	// share of the pooled requests (the first one's decayed by e^(−n/memory),
	// the memory 10 000 requests for an SCV of 1).
	w := n / (n*math.Exp(-n/serviceMemory(1)) + n)
	d := at(1, 0.05, []LatencyQuantile{{50, 0.05}, {95, 0.3}})
	require.InDeltaSlice(t, []float64{1, 4 + w*(6-4)}, seconds(e.State().ServiceShape), 1e-9)
	require.InDelta(t, 0.05*(4+w*2), d.Explanation.ServiceQuantiles[1].Seconds, 1e-9, "shown in seconds at this E[S]")
	shape := seconds(e.State().ServiceShape)
	// No quantiles this cycle (idle interval): the shape is kept.
	d = at(2, 0.05, nil)
	require.Equal(t, TailMeasured, d.Explanation.TailModel)
	require.InDeltaSlice(t, shape, seconds(e.State().ServiceShape), 1e-12)
	// Restored from the state.
	restored := NewEngineFromState(e.State())
	require.Equal(t, e.State().ServiceShape, restored.State().ServiceShape)
	// E[S] doubles with the quantiles: no single interval starts the
	// estimate again (service.go), the third in a row does, and the shape
	// starts again with it, the same relative to E[S].
	for i := 3; i < 5; i++ {
		d = at(i, 0.1, []LatencyQuantile{{50, 0.1}, {95, 0.2}})
		require.NotContains(t, d.Explanation.ServiceNote, "started again")
	}
	d = at(5, 0.1, []LatencyQuantile{{50, 0.1}, {95, 0.4}})
	require.Contains(t, d.Explanation.ServiceNote, "started again")
	require.InDeltaSlice(t, []float64{1, 4}, seconds(e.State().ServiceShape), 1e-12)
	// Other percentiles: start over.
	at(6, 0.1, []LatencyQuantile{{90, 0.2}, {99, 0.8}})
	require.Equal(t, []LatencyQuantile{{90, 2}, {99, 8}}, e.State().ServiceShape)
	// A state with a broken shape is not restored.
	for _, bad := range [][]LatencyQuantile{{{50, 0}}, {{50, 2}, {95, 1}}, {{100, 1}}, {{50, math.NaN()}}} {
		require.Empty(t, NewEngineFromState(State{ServiceShape: bad}).State().ServiceShape)
	}
}

func seconds(qs []LatencyQuantile) []float64 {
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = q.Seconds
	}
	return out
}

// TestServiceQuantilesValidated: a snapshot's service quantiles must be
// percentiles in (0,100) with positive finite seconds, both ascending; the
// error names the first bad one.
func TestServiceQuantilesValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		qs   []LatencyQuantile
		bad  string
	}{
		{"zero seconds", []LatencyQuantile{{50, 0}}, "snapshot.serviceQuantiles[0]"},
		{"negative seconds", []LatencyQuantile{{50, -1}}, "snapshot.serviceQuantiles[0]"},
		{"NaN seconds", []LatencyQuantile{{50, 0.1}, {90, math.NaN()}}, "snapshot.serviceQuantiles[1]"},
		{"infinite seconds", []LatencyQuantile{{50, 0.1}, {90, math.Inf(1)}}, "snapshot.serviceQuantiles[1]"},
		{"percentile 100", []LatencyQuantile{{100, 0.1}}, "snapshot.serviceQuantiles[0]"},
		{"percentile 0", []LatencyQuantile{{0, 0.1}}, "snapshot.serviceQuantiles[0]"},
		{"seconds falling", []LatencyQuantile{{50, 0.1}, {90, 0.2}, {95, 0.15}}, "snapshot.serviceQuantiles[2]"},
		{"percentiles falling", []LatencyQuantile{{90, 0.1}, {50, 0.2}}, "snapshot.serviceQuantiles[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot(t0, 100, 0.05, 10)
			s.ServiceQuantiles = tc.qs
			_, err := NewEngine().Decide(tailSpec(), s)
			require.ErrorContains(t, err, tc.bad)
		})
	}
}

// TestTailInJSON: the decision's JSON carries the tail model, the quantiles
// used and the service-alone late share.
func TestTailInJSON(t *testing.T) {
	s := snapshot(t0, 100, 0.05, 10)
	s.ServiceQuantiles = lognormalQuantiles(0.05, 1.2, 50, 95, 99)
	d, err := NewEngine().Decide(tailSpec(), s)
	require.NoError(t, err)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var m struct {
		Explanation struct {
			TailModel        string            `json:"tailModel"`
			ServiceQuantiles []LatencyQuantile `json:"serviceQuantiles"`
			ServiceLateShare float64           `json:"serviceLateShare"`
			TailNote         string            `json:"tailNote"`
		} `json:"explanation"`
	}
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, "measured", m.Explanation.TailModel)
	require.Len(t, m.Explanation.ServiceQuantiles, 3)
	require.Equal(t, 99.0, m.Explanation.ServiceQuantiles[2].Percentile)
	require.Positive(t, m.Explanation.ServiceLateShare)
	require.True(t, strings.HasPrefix(m.Explanation.TailNote, "service tail measured"))
}

// TestPodsBand: near the service-time floor the p95 falls slowly with the
// pods, so G can sit inside [1−θ, 1+θ] with far more pods than the target
// needs. Such a count scales down (to no fewer than the target needs, so the
// next cycle does not scale back up); a count within (1−θ)⁻¹ of the need
// does not move.
func TestPodsBand(t *testing.T) {
	const es, lambda = 0.05, 200.0
	spec := tailSpec()
	decide := func(n int32) Decision {
		s := snapshot(t0, lambda, es, n)
		// Less than two leads of history: no jump ratio, so no jump floor,
		// which would raise any count below the need (the band alone here).
		s.ArrivalRates = s.ArrivalRates[len(s.ArrivalRates)-3:]
		s.ServiceSCV, s.ServiceQuantiles = 1.44, lognormalQuantiles(es, 1.2, servicePs...)
		d, err := NewEngine().Decide(spec, s)
		require.NoError(t, err)
		return d
	}
	var banded, kept int
	for n := int32(40); n <= 150; n++ {
		d := decide(n)
		x := d.Explanation
		if x.Normalized < 1-spec.Tolerance || x.Normalized > 1+spec.Tolerance {
			continue
		}
		if strings.Contains(x.Reason, "more than (1−θ)⁻¹") {
			banded++
			require.Less(t, x.Recommendation, n, "n = %d: %s", n, x.Reason)
			next := decide(x.Recommendation)
			require.LessOrEqual(t, next.Explanation.Recommendation, x.Recommendation, "no scale-up right after the scale-down from %d", n)
			continue
		}
		kept++
		require.Equal(t, n, x.Recommendation, "n = %d: %s", n, x.Reason)
	}
	require.Positive(t, banded, "some counts inside the G band are over-provisioned in pods")
	require.Positive(t, kept, "counts close to the need stay")
}

// TestIdlePodsAtTheLatencyFloorScaleDown: a trickle of load on many pods
// whose service p95 alone is just under (1−θ) × the target. G sits just
// under 1−θ and G at λ's upper confidence bound just over it, so the noise
// guard alone would hold every pod for good (the e2e's "scale-down after
// the load" at 0.67/s on 8 pods, G 0.696, at the bound 0.702). The pods
// beyond (1−θ)⁻¹ × what the bound needs are the evidence: every such count
// scales down, and the explanation says why.
func TestIdlePodsAtTheLatencyFloorScaleDown(t *testing.T) {
	const lambda, n = 0.67, int32(8)
	spec := tailSpec()
	spec.Tolerance = 0.3
	decide := func(es float64, pods int32) Explanation {
		s := snapshot(t0, lambda, es, pods)
		s.ServiceQuantiles, s.ServiceSamples = exponentialQuantiles(es, servicePs...), shapeEvidence(spec)
		d, err := NewEngine().Decide(spec, s)
		require.NoError(t, err)
		return d.Explanation
	}
	var gap int
	for es := 0.040; es <= 0.048; es += 0.00002 {
		x := decide(es, n)
		if x.Normalized >= 1-spec.Tolerance {
			continue
		}
		require.Less(t, x.Recommendation, n, "E[S] = %.5f, G = %.4f: %s", es, x.Normalized, x.Reason)
		require.NotContains(t, x.Reason, "no scale-down on noise", "E[S] = %.5f", es)
		next := decide(es, x.Recommendation)
		require.LessOrEqual(t, next.Recommendation, x.Recommendation, "E[S] = %.5f: no scale-up right after the scale-down to %d: %s", es, x.Recommendation, next.Reason)
		if strings.Contains(x.Reason, "near the latency floor") {
			gap++
			require.Contains(t, x.Reason, "more than (1−θ)⁻¹")
		}
	}
	require.Positive(t, gap, "some service times put G below 1−θ and G at λ's upper bound over it")
}
