package queueing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// expQuantiles are the exact quantiles of an exponential service time of mean es.
func expQuantiles(es float64, ps ...float64) []ServiceQuantile {
	out := make([]ServiceQuantile, len(ps))
	for i, p := range ps {
		out[i] = ServiceQuantile{Percentile: p, Seconds: -math.Log1p(-p/100) * es}
	}
	return out
}

// lognormal is the lognormal service time of mean es and SCV cv².
type lognormal struct{ mu, sigma float64 }

func newLognormal(es, cv float64) lognormal {
	s2 := math.Log1p(cv * cv)
	return lognormal{mu: math.Log(es) - s2/2, sigma: math.Sqrt(s2)}
}

func (l lognormal) survival(t float64) float64 {
	return 0.5 * math.Erfc((math.Log(t)-l.mu)/(l.sigma*math.Sqrt2))
}

func (l lognormal) quantile(p float64) float64 {
	return math.Exp(l.mu + l.sigma*math.Sqrt2*math.Erfinv(2*p/100-1))
}

func (l lognormal) quantiles(ps ...float64) []ServiceQuantile {
	out := make([]ServiceQuantile, len(ps))
	for i, p := range ps {
		out[i] = ServiceQuantile{Percentile: p, Seconds: l.quantile(p)}
	}
	return out
}

// TestCalibratedTailIsTheClosedFormForExponentialService: from the quantiles
// of an exponential service time the calibrated tail must be the M/M/c (and
// Allen–Cunneen) closed form, pooled and per pod, at every t and percentile.
func TestCalibratedTailIsTheClosedFormForExponentialService(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lambda    float64
		es        float64
		pods, k   int
		ac        bool
		ca2, cs2  float64
		pooled    bool
		quantiles []float64
	}{
		{name: "M/M/1 at ρ 0.5", lambda: 12.5, es: 0.04, pods: 1, k: 1, quantiles: []float64{50, 90, 95, 99}},
		{name: "M/M/1 at ρ 0.95", lambda: 23.75, es: 0.04, pods: 1, k: 1, quantiles: []float64{50, 90, 95, 99}},
		{name: "per pod, 10 pods k 1 at ρ 0.7", lambda: 175, es: 0.04, pods: 10, k: 1, quantiles: []float64{50, 90, 95, 99}},
		{name: "pooled 40 servers at ρ 0.9", lambda: 900, es: 0.04, pods: 10, k: 4, pooled: true, quantiles: []float64{50, 90, 95, 99}},
		{name: "Allen–Cunneen cs² 2.44", lambda: 15, es: 0.04, pods: 1, k: 1, ac: true, ca2: 1, cs2: 2.44, quantiles: []float64{50, 90, 95, 99}},
		{name: "θ = μ exactly (c 2, λ = μ)", lambda: 25, es: 0.04, pods: 1, k: 2, quantiles: []float64{50, 90, 95, 99}},
		{name: "one quantile only", lambda: 18, es: 0.1, pods: 2, k: 1, quantiles: []float64{95}},
		{name: "low quantiles only", lambda: 18, es: 0.1, pods: 2, k: 1, quantiles: []float64{10, 25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape, err := NewServiceShape(expQuantiles(tc.es, tc.quantiles...), tc.es)
			require.NoError(t, err)
			lay := LayoutPerPod
			if tc.pooled {
				lay = LayoutPooled
			}
			base := Load{ArrivalRate: tc.lambda, ServiceTime: tc.es, AllenCunneen: tc.ac, ArrivalSCV: tc.ca2, ServiceSCV: tc.cs2}
			cal := base
			cal.Shape = shape
			mExp, err := base.Pods(tc.pods, tc.k, lay)
			require.NoError(t, err)
			mCal, err := cal.Pods(tc.pods, tc.k, lay)
			require.NoError(t, err)
			for _, x := range []float64{0.01, 0.3, 1, 2.5, 5, 10, 30, 80} {
				want, got := mExp.TailProbability(x*tc.es), mCal.TailProbability(x*tc.es)
				require.InDelta(t, want, got, 1e-12+1e-9*want, "P(T > %v·E[S])", x)
			}
			for _, p := range []float64{50, 90, 95, 99, 99.9} {
				want, err := mExp.LatencyPercentile(p)
				require.NoError(t, err)
				got, err := mCal.LatencyPercentile(p)
				require.NoError(t, err)
				require.InDelta(t, want, got, 1e-9*want, "p%v", p)
			}
			for _, target := range []float64{6.25, 10} {
				for _, p := range []float64{95, 99} {
					want, err := base.MinPods(tc.k, lay, target*tc.es, p)
					require.NoError(t, err)
					got, err := cal.MinPods(tc.k, lay, target*tc.es, p)
					require.NoError(t, err)
					require.Equal(t, want, got, "pods for p%v ≤ %v·E[S]", p, target)
				}
			}
		})
	}
}

// TestShapeFollowsALognormal: through p50, p90, p95 and p99 of a lognormal
// (cv 1.2) the log-linear shape stays within 12 % of its true survival from
// p50 to p99 and within 35 % to p99.5 (the extrapolated tail, exponential,
// is lighter than the lognormal's and understates it more the further out),
// and its
// quantiles are the measured ones.
func TestShapeFollowsALognormal(t *testing.T) {
	ln := newLognormal(0.04, 1.2)
	shape, err := NewServiceShape(ln.quantiles(50, 90, 95, 99), 0.04)
	require.NoError(t, err)
	for _, p := range []float64{50, 90, 95, 99} {
		require.InDelta(t, ln.quantile(p)/0.04, shape.Quantile(p), 1e-12)
	}
	for _, tc := range []struct {
		from, to, tol float64
	}{{50, 99, 0.12}, {99, 99.5, 0.35}} {
		for p := tc.from; p <= tc.to; p += (tc.to - tc.from) / 50 {
			tt := ln.quantile(p)
			want := ln.survival(tt)
			require.InDelta(t, want, shape.Survival(tt/0.04), tc.tol*want, "at p%v", p)
		}
	}
	require.InDelta(t, 1, shape.Mean(), 0.1, "the shape's own mean is near the measured one")
}

// TestConvolvedTailAgainstQuadrature checks the closed-form convolution with
// an exponential wait against a fine numerical integral, for wait rates
// below, at and above each segment's rate.
func TestConvolvedTailAgainstQuadrature(t *testing.T) {
	ln := newLognormal(1, 1.2)
	shape, err := NewServiceShape(ln.quantiles(50, 90, 95, 99), 1)
	require.NoError(t, err)
	thetas := []float64{0.05, 0.5, 3}
	thetas = append(thetas, shape.r...) // δ = 0 on a segment
	for _, theta := range thetas {
		for _, x := range []float64{0.2, 1, 3, 8, 20} {
			// P(W + S > x) = P(S > x) + ∫_0^x f_S(u)·e^{−θ(x−u)} du, f_S = −S'.
			const n = 200000
			h := x / n
			want := shape.Survival(x)
			for i := range n {
				u := (float64(i) + 0.5) * h
				f := (shape.Survival(u-h/2) - shape.Survival(u+h/2)) / h
				want += f * math.Exp(-theta*(x-u)) * h
			}
			require.InDelta(t, want, shape.convolvedTail(x, theta), 1e-6+1e-5*want, "θ %v, x %v", theta, x)
		}
	}
}

// TestHeavierTailNeedsMorePods: a lognormal cv 1.2 service time has more
// requests over a p95 target of 6.25·E[S] than an exponential one of the same
// mean; the calibrated model sees it and needs more pods.
func TestHeavierTailNeedsMorePods(t *testing.T) {
	ln := newLognormal(0.04, 1.2)
	shape, err := NewServiceShape(ln.quantiles(50, 90, 95, 99), 0.04)
	require.NoError(t, err)
	base := Load{ArrivalRate: 200, ServiceTime: 0.04, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 1.44}
	cal := base
	cal.Shape = shape
	nExp, err := base.MinPods(1, LayoutPerPod, 0.25, 95)
	require.NoError(t, err)
	nCal, err := cal.MinPods(1, LayoutPerPod, 0.25, 95)
	require.NoError(t, err)
	require.Greater(t, nCal, nExp)
	// The floor is the measured service percentile, not −ln(1−p)·E[S].
	require.InDelta(t, ln.quantile(99), cal.ServicePercentile(99), 1e-12)
	_, err = cal.MinPods(1, LayoutPerPod, 0.99*ln.quantile(99), 99)
	require.ErrorIs(t, err, ErrInfeasible)
}

func TestServiceShapeInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		qs   []ServiceQuantile
		mean float64
	}{
		{"no quantiles", nil, 1},
		{"zero mean", []ServiceQuantile{{95, 1}}, 0},
		{"NaN mean", []ServiceQuantile{{95, 1}}, math.NaN()},
		{"infinite mean", []ServiceQuantile{{95, 1}}, math.Inf(1)},
		{"percentile 0", []ServiceQuantile{{0, 1}}, 1},
		{"percentile 100", []ServiceQuantile{{100, 1}}, 1},
		{"NaN percentile", []ServiceQuantile{{math.NaN(), 1}}, 1},
		{"zero seconds", []ServiceQuantile{{50, 0}}, 1},
		{"negative seconds", []ServiceQuantile{{50, -1}}, 1},
		{"infinite seconds", []ServiceQuantile{{50, math.Inf(1)}}, 1},
		{"percentiles not ascending", []ServiceQuantile{{95, 1}, {90, 2}}, 1},
		{"seconds falling", []ServiceQuantile{{90, 2}, {95, 1}}, 1},
		{"seconds over a tiny mean overflow", []ServiceQuantile{{90, 1e300}}, 1e-300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServiceShape(tc.qs, tc.mean)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
		})
	}
	// Equal seconds keep the higher percentile.
	d, err := NewServiceShape([]ServiceQuantile{{90, 1}, {95, 1}, {99, 2}}, 1)
	require.NoError(t, err)
	require.InDelta(t, 0.05, d.Survival(1), 1e-15)
	require.Equal(t, "p95 = 1·E[S], p99 = 2·E[S]", d.String())
}

// FuzzServiceShape: no input panics; an accepted shape has a survival that
// falls from 1, quantiles that invert it, and tails in [0,1] that fall in t.
func FuzzServiceShape(f *testing.F) {
	f.Add(50.0, 0.03, 95.0, 0.12, 99.0, 0.23, 0.04, 0.5)
	f.Add(10.0, 1e-9, 20.0, 1e-9, 99.99, 1e9, 1.0, 3.0)
	f.Fuzz(func(t *testing.T, p1, s1, p2, s2, p3, s3, mean, x float64) {
		d, err := NewServiceShape([]ServiceQuantile{{p1, s1}, {p2, s2}, {p3, s3}}, mean)
		if err != nil {
			return
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		sv := d.Survival(x)
		require.False(t, math.IsNaN(sv))
		require.GreaterOrEqual(t, sv, 0.0)
		require.LessOrEqual(t, sv, 1.0)
		require.LessOrEqual(t, d.Survival(math.Abs(x)+1), d.Survival(math.Abs(x))+1e-15)
		for _, p := range []float64{p1, p2, p3} {
			q := d.Quantile(p)
			require.False(t, math.IsNaN(q), "quantile p%v", p)
		}
		m, err := Load{ArrivalRate: 0.5 / mean, ServiceTime: mean, Shape: d}.At(1)
		if err != nil {
			return
		}
		a, b := m.TailProbability(math.Abs(x)*mean), m.TailProbability((math.Abs(x)+1)*mean)
		require.False(t, math.IsNaN(a) || math.IsNaN(b))
		require.LessOrEqual(t, b, a+1e-12)
		// The percentile solves the tail: P(T > t95) = 5 %.
		t95, err := m.LatencyPercentile(95)
		require.NoError(t, err)
		require.InDelta(t, 0.05, m.TailProbability(t95), 1e-9)
	})
}

// TestShapeMomentsAndWaitVariability: the shape's moments are exact for
// exponential quantiles (1, 2, 6), so the conditional wait stays exponential
// (SCV 1) at every utilisation; a lognormal cv 1.2's shape has a wait more
// variable than exponential, increasingly so at low utilisation, and the
// hyperexponential fit keeps the wait's mean.
func TestShapeMomentsAndWaitVariability(t *testing.T) {
	exp, err := NewServiceShape(expQuantiles(1, 50, 90, 95, 99), 1)
	require.NoError(t, err)
	require.InDelta(t, 1, exp.m1, 1e-12)
	require.InDelta(t, 2, exp.m2, 1e-11)
	require.InDelta(t, 6, exp.m3, 1e-10)
	for _, rho := range []float64{0.01, 0.3, 0.9, 0.999} {
		require.InDelta(t, 1, exp.waitSCV(rho), 1e-9, "ρ %v", rho)
	}
	ln := newLognormal(0.05, 1.2)
	shape, err := NewServiceShape(ln.quantiles(50, 90, 95, 99), 0.05)
	require.NoError(t, err)
	// The extrapolated tail is lighter than the lognormal's: the second
	// moment is below 1 + cv² = 2.44 but well above the exponential's 2.
	require.Greater(t, shape.m2, 2.1)
	require.Less(t, shape.m2, 2.44)
	lo, hi := shape.waitSCV(0.1), shape.waitSCV(0.8)
	require.Greater(t, hi, 1.0)
	require.Greater(t, lo, hi)
	l := Load{ArrivalRate: 6, ServiceTime: 0.05, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 1.44, Shape: shape}
	m, err := l.At(1)
	require.NoError(t, err)
	require.Positive(t, m.waitP1)
	require.InDelta(t, 1/m.waitRate, m.waitP1/m.waitRate1+(1-m.waitP1)/m.waitRate2, 1e-12)
}

// TestNilShapeIsExponential: a nil shape, a Load's exponential service, has
// the exponential survival, 1 at and below 0, and passes NaN through.
func TestNilShapeIsExponential(t *testing.T) {
	var d *ServiceShape
	for _, x := range []float64{1e-9, 0.5, 1, 3, 20} {
		require.Equal(t, math.Exp(-x), d.Survival(x), "x %v", x)
	}
	require.Equal(t, 1.0, d.Survival(0))
	require.Equal(t, 1.0, d.Survival(-1))
	require.True(t, math.IsNaN(d.Survival(math.NaN())))
}
