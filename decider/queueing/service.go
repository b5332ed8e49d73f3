package queueing

import (
	"fmt"
	"math"
	"sort"
)

// ServiceQuantile is one measured point of the service-time distribution: the
// time under which Percentile % of service times fell.
type ServiceQuantile struct {
	Percentile float64 // in (0,100)
	Seconds    float64 // > 0
}

// ServiceShape is a measured service-time distribution relative to its mean:
// the survival P(S > x·E[S]) through the measured quantiles, log-linear
// between them (a piecewise exponential density), from P = 1 at x = 0, and
// beyond the last quantile along the last segment's slope. Log-linear is exact
// for exponential service (whose survival is log-linear everywhere), so the
// calibrated tail reproduces the M/M/c closed form from exponential quantiles;
// for a lognormal it lies within a few percent of the true survival between
// p90 and p99 (where the tail at a target is decided), where a linear
// interpolation would overstate it by up to a third.
//
// A ServiceShape is immutable; the zero value is not valid (use
// NewServiceShape), and a nil *ServiceShape in a Load means exponential.
type ServiceShape struct {
	x []float64 // t/E[S] at the points, ascending, x[0] = 0
	s []float64 // survival at the points, descending, s[0] = 1
	r []float64 // r[i]: survival's log-slope on (x[i], x[i+1]); the last is the tail's
	// m1, m2, m3 are the shape's own first three moments (units of E[S]).
	m1, m2, m3 float64
}

// NewServiceShape builds the shape of the distribution whose quantiles qs were
// measured, with mean E[S] = mean seconds (the same interval's mean: the shape
// is kept relative to it, so a model with another E[S], after a resize or a
// migration, scales it). Quantiles must be ascending in both percentile and
// seconds, with percentiles in (0,100), seconds finite and positive; points
// with the same seconds as the next keep only the higher percentile (a
// quantised histogram). At least one point must remain.
func NewServiceShape(qs []ServiceQuantile, mean float64) (*ServiceShape, error) {
	if !finite(mean) || mean <= 0 {
		return nil, inputErr("service mean", "must be a finite positive number of seconds, got %v", mean)
	}
	if len(qs) == 0 {
		return nil, inputErr("service quantiles", "none given")
	}
	d := &ServiceShape{x: []float64{0}, s: []float64{1}}
	for i, q := range qs {
		if !finite(q.Percentile) || q.Percentile <= 0 || q.Percentile >= 100 {
			return nil, inputErr("service quantiles", "percentile %d is %v, want (0,100)", i, q.Percentile)
		}
		if !finite(q.Seconds) || q.Seconds <= 0 {
			return nil, inputErr("service quantiles", "seconds %d is %v, want a finite positive number", i, q.Seconds)
		}
		if i > 0 && (q.Percentile <= qs[i-1].Percentile || q.Seconds < qs[i-1].Seconds) {
			return nil, inputErr("service quantiles", "point %d (p%v = %vs) is not above point %d (p%v = %vs)",
				i, q.Percentile, q.Seconds, i-1, qs[i-1].Percentile, qs[i-1].Seconds)
		}
		x, s := q.Seconds/mean, 1-q.Percentile/100
		if !finite(x) || x <= 0 {
			return nil, inputErr("service quantiles", "seconds %d over the mean is %v", i, x)
		}
		if n := len(d.x); x == d.x[n-1] {
			d.s[n-1] = s // the same time: keep the higher percentile
			continue
		}
		d.x = append(d.x, x)
		d.s = append(d.s, s)
	}
	if len(d.x) < 2 {
		return nil, inputErr("service quantiles", "no point above zero")
	}
	d.r = make([]float64, len(d.x)-1)
	for i := range d.r {
		d.r[i] = math.Log(d.s[i]/d.s[i+1]) / (d.x[i+1] - d.x[i])
	}
	d.m1, d.m2, d.m3 = d.moment(1), d.moment(2), d.moment(3)
	if !finite(d.m3) || d.m3 <= 0 {
		return nil, inputErr("service quantiles", "the tail beyond the last point is too heavy for a finite third moment")
	}
	return d, nil
}

// moment returns E[X^n] = ∫_0^∞ n·x^{n−1}·S(x) dx for n in 1..3, exactly per
// segment: the antiderivative of x^j·e^{−r(x−a)} is
// −e^{−r(x−a)}·Σ_{i≤j} j!/(j−i)!·x^{j−i}/r^{i+1}.
func (d *ServiceShape) moment(n int) float64 {
	j := n - 1
	anti := func(x, a, r float64) float64 {
		var sum, fact float64 = 0, 1
		for i := 0; i <= j; i++ {
			if i > 0 {
				fact *= float64(j - i + 1)
			}
			sum += fact * math.Pow(x, float64(j-i)) / math.Pow(r, float64(i+1))
		}
		return -math.Exp(-r*(x-a)) * sum
	}
	var m float64
	last := len(d.r) - 1
	for i := 0; i <= last; i++ {
		a, r := d.x[i], d.r[i]
		hi := 0.0 // the tail: the antiderivative vanishes at ∞
		if i < last {
			hi = anti(d.x[i+1], a, r)
		}
		m += d.s[i] * (hi - anti(a, a, r))
	}
	return float64(n) * m
}

// Survival returns P(S > x·E[S]); a nil shape is exponential service, as in a
// Load, e^{−x}.
func (d *ServiceShape) Survival(x float64) float64 {
	if math.IsNaN(x) {
		return math.NaN()
	}
	if x <= 0 {
		return 1
	}
	if d == nil {
		return math.Exp(-x)
	}
	i := d.segment(x)
	return d.s[i] * math.Exp(-d.r[i]*(x-d.x[i]))
}

// segment is the index of the segment holding x > 0: the last i with
// x[i] < x, capped at the tail's.
func (d *ServiceShape) segment(x float64) int {
	i := sort.SearchFloat64s(d.x, x) - 1 // x[i] < x ≤ x[i+1]
	return min(max(i, 0), len(d.r)-1)
}

// Quantile returns x with P(S > x·E[S]) = 1 − p/100, p in (0,100).
func (d *ServiceShape) Quantile(p float64) float64 {
	q := 1 - p/100
	for i := range d.r {
		if i == len(d.r)-1 || d.s[i+1] <= q {
			return d.x[i] + math.Log(d.s[i]/q)/d.r[i]
		}
	}
	return math.NaN() // unreachable: the tail segment always answers
}

// Mean is E[S/E[S]] of the shape itself: 1 when the quantiles and the mean
// agree; how far it is from 1 says how well the shape describes the mean.
func (d *ServiceShape) Mean() float64 { return d.m1 }

// waitSCV is the squared coefficient of variation of the conditional wait W*
// (the wait of those who wait) of an M/G/1 queue at utilisation rho with this
// service shape, from Takács' second moment of the wait:
// E[W*] = m2/(2·m1·(1−ρ)), E[W*²] = 2ρ·E[W*]² + m3/(3·m1·(1−ρ)). It is 1
// for exponential service (m2 = 2, m3 = 6) and above 1 for heavier tails: W*
// then has more short waits and a longer tail than an exponential of the
// same mean.
func (d *ServiceShape) waitSCV(rho float64) float64 {
	w := d.m2 / (2 * d.m1 * (1 - rho))
	return 2*rho - 1 + d.m3/(3*d.m1*(1-rho)*w*w)
}

// String lists the shape's points, for explanations.
func (d *ServiceShape) String() string {
	out := ""
	for i := 1; i < len(d.x); i++ {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("p%.4g = %.3g·E[S]", 100*(1-d.s[i]), d.x[i])
	}
	return out
}

// convolvedTail returns P(W + S > x·E[S]) for W exponential with rate theta
// per E[S] (θ·E[S]) and S of this shape: S(x) + ∫_0^x f_S(u)·e^{−θ(x−u)} du,
// in closed form per segment (the density is exponential on each).
func (d *ServiceShape) convolvedTail(x, theta float64) float64 {
	if x <= 0 {
		return 1
	}
	p := d.Survival(x)
	for i := range d.r {
		a := d.x[i]
		if a >= x {
			break
		}
		b := x
		if i < len(d.r)-1 {
			b = min(d.x[i+1], x)
		}
		r, L, y := d.r[i], b-a, x-a
		// r·s_a·e^{−θy}·∫_0^L e^{(θ−r)v} dv, evaluated without overflow or
		// cancellation on either side of θ = r.
		delta := theta - r
		var v float64
		switch {
		case delta == 0:
			v = math.Exp(-theta*y) * L
		case delta < 0:
			v = math.Exp(-theta*y) * math.Expm1(delta*L) / delta
		default:
			v = math.Exp(-theta*(y-L)-r*L) * -math.Expm1(-delta*L) / delta
		}
		p += r * d.s[i] * v
	}
	return min(max(p, 0), 1)
}

// calibratedTail is P(T > t) with the measured service shape:
//
//	P(T > t) = (1 − C)·P(S > t) + C·P(W* + S > t),
//
// C the probability of waiting (Erlang C; ρ for M/G/1) and W* the conditional
// wait, exponential with mean E[W]/C = κ/θ: the Pollaczek–Khinchine mean at
// k = 1 with κ = (ca² + cs²)/2, Allen–Cunneen's per slot at k > 1. With
// exponential quantiles it is the M/M/c closed form of TailProbability.
func (m Metrics) calibratedTail(t float64) float64 {
	x := t * m.mu
	if m.noWaiting {
		return m.shape.Survival(x)
	}
	c := m.WaitProbability
	conv := m.shape.convolvedTail(x, m.waitRate/m.mu)
	if m.waitP1 > 0 {
		conv = m.waitP1*m.shape.convolvedTail(x, m.waitRate1/m.mu) + (1-m.waitP1)*m.shape.convolvedTail(x, m.waitRate2/m.mu)
	}
	return min(max((1-c)*m.shape.Survival(x)+c*conv, 0), 1)
}

// fitWait gives the conditional wait, of mean 1/waitRate, the squared
// coefficient of variation scv when it is above 1: a hyperexponential with
// balanced means (p1/θ1 = p2/θ2), p1 = (1 + √((scv−1)/(scv+1)))/2,
// θi = 2·pi·waitRate. At or below 1 (exponential or lighter service) the wait
// stays exponential: for a light tail that overstates the wait's tail a
// little, on the safe side.
func (m *Metrics) fitWait(scv float64) {
	if !finite(scv) || scv <= 1 {
		return
	}
	p1 := (1 + math.Sqrt((scv-1)/(scv+1))) / 2
	m.waitP1, m.waitRate1, m.waitRate2 = p1, 2*p1*m.waitRate, 2*(1-p1)*m.waitRate
}

// calibratedPercentile solves calibratedTail(t) = 1 − p/100, bracketed below by
// the service-time percentile (waiting only adds) and above by doubling, then
// by Newton steps on ln P(T > t) (nearly linear in t) kept inside the bracket,
// bisecting when a step would leave it. The tail's slope is exact:
// d/dx P(W* + S > x) = −θ·(P(W* + S > x) − P(S > x)) per exponential phase.
func (m Metrics) calibratedPercentile(p float64) (float64, error) {
	q := 1 - p/100
	lnq := math.Log(q)
	lo := m.shape.Quantile(p) / m.mu
	hi := 2 * lo
	for m.calibratedTail(hi) > q {
		lo = hi
		hi *= 2
		if math.IsInf(hi, 0) {
			return 0, inputErr("percentile", "no finite solution")
		}
	}
	t := hi
	for range 200 {
		pt, slope := m.calibratedTailSlope(t)
		if pt > q {
			lo = t
		} else {
			hi = t
		}
		if hi-lo <= 1e-13*hi {
			break
		}
		next := lo + (hi-lo)/2
		if pt > 0 && slope < 0 {
			n := t - (math.Log(pt)-lnq)*pt/slope
			if math.Abs(n-t) <= 1e-13*t {
				// Converged (quadratically): further steps chase rounding.
				break
			}
			if n > lo && n < hi {
				next = n
			}
		}
		t = next
	}
	return t, nil
}

// calibratedTailSlope returns calibratedTail(t) and its derivative in t.
func (m Metrics) calibratedTailSlope(t float64) (float64, float64) {
	x := t * m.mu
	sv := m.shape.Survival(x)
	dens := sv * m.shape.r[m.shape.segment(x)] // f_S(x) per unit of x
	if m.noWaiting {
		return sv, -dens * m.mu
	}
	c := m.WaitProbability
	var conv, dconv float64
	phase := func(w, rate float64) {
		th := rate / m.mu
		v := m.shape.convolvedTail(x, th)
		conv += w * v
		dconv += w * -th * (v - sv)
	}
	if m.waitP1 > 0 {
		phase(m.waitP1, m.waitRate1)
		phase(1-m.waitP1, m.waitRate2)
	} else {
		phase(1, m.waitRate)
	}
	p := min(max((1-c)*sv+c*conv, 0), 1)
	return p, ((1-c)*-dens + c*dconv) * m.mu
}
