package decide

import (
	"math"
	"time"
)

// The rate mixture (docs/model.md section 2c): arrivals are a Poisson process
// whose rate is drawn afresh each second around its mean λ, λ·V with V of mean 1
// and relative variance cv² (measured from the proxies' per-second counts,
// internal/ratevar; its law: rateMixture). A second is long against a service time of milliseconds,
// so the late share is the quasi-static average, each second's P(T > t) at its
// own rate weighted by its requests: E[V·P(T > t | λV)] / E[V].

const (
	// rateCV2Memory is the pairs of seconds the averaged cv² remembers: the
	// estimate of one pair has a relative spread of order one, so a few hundred
	// pairs (about five minutes of one workload) hold it within about 10 %,
	// and it still follows a change of traffic within minutes.
	rateCV2Memory = 300.0
	// mixMinCV2 is the cv² below which the mixture is not used: at 0.01 the
	// rate of the 99.9th-percentile second is within about a third of the mean
	// and a p95 target needs the same pods as at the mean rate, for a tenth of
	// the evaluations. Poisson traffic averages 0 within about 0.08/m over
	// the memory, m the requests per second: below 0.01 from about 10/s.
	mixMinCV2 = 0.01
)

// mixEdges are the probability bins of V's law: equal below its median, finer
// in the upper tail where the late requests come from.
var mixEdges = []float64{0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1}

// rateMixture returns the law of V, the second's rate over its mean, for a
// relative variance cv2: V = cv²·N with N Poisson of mean 1/cv², the rate of a
// process whose requests come in batches (a logged request that becomes many
// within its second, a client fanning out), mean 1 and variance cv² for any
// cv². Measured against a gamma law of the same variance, the usual choice for a
// doubly stochastic Poisson process, on the matrix of docs/simulation.md: the
// gamma's exponential tail puts about three times the requests in seconds at
// 6× the mean and bought 8–25 % more pods on the batch cells for no cell more
// met. The points of N are grouped into the probability bins of mixEdges, each
// bin with its probability w and V's mean over it v (so Σ w·v = 1 and w·v is the
// bin's share of the requests). Nil below mixMinCV2 (no mixture).
func rateMixture(cv2 float64) []weighted {
	if !(cv2 >= mixMinCV2) || cv2 > maxRateCV2 {
		return nil
	}
	a := 1 / cv2
	var out []weighted
	logP := -a // ln P(N = 0)
	var cum, binP, binV float64
	edge := 1
	const done = 1 - 1e-12
	for n := 0; cum < done; n++ {
		if n > 0 {
			logP += math.Log(a / float64(n))
		}
		p := math.Exp(logP)
		cum += p
		binP += p
		binV += p * cv2 * float64(n)
		if cum >= mixEdges[edge] || cum >= done || (p == 0 && float64(n) > a) {
			if binP > 0 {
				out = append(out, weighted{v: binV / binP, w: binP})
			}
			binP, binV = 0, 0
			for edge < len(mixEdges)-1 && cum >= mixEdges[edge] {
				edge++
			}
			if p == 0 && float64(n) > a {
				break // beyond the mode, the remaining mass underflows
			}
		}
	}
	return out
}

// rateCV2 folds this cycle's measured cv² into the engine's average (pairs
// weighted, forgetting at the rate new pairs come, over rateCV2Memory pairs)
// and returns the average clamped at 0 (the estimate is unbiased, so noise
// makes it slightly negative on Poisson traffic), and whether any was measured.
func (e *Engine) rateCV2(snap Snapshot, fresh bool) (float64, bool) {
	if snap.RateCV2Pairs > 0 && fresh {
		// One snapshot weighs at most the memory, so that the memory holds
		// whatever came before.
		pairs := math.Min(snap.RateCV2Pairs, rateCV2Memory)
		keep := math.Exp(-pairs / rateCV2Memory)
		e.cv2Sum = e.cv2Sum*keep + snap.RateCV2*pairs
		e.cv2Pairs = e.cv2Pairs*keep + pairs
	}
	if e.cv2Pairs <= 0 {
		return 0, false
	}
	return math.Max(0, e.cv2Sum/e.cv2Pairs), true
}

// mixTail is P(T > t) averaged over the seconds' rates, each weighted by its
// requests. A second whose steady state runs late beyond the budget at the
// target is scaled down to its one-second transient's share there
// (second.go), the same factor at every t: exact at the target, where every
// sizing test compares, and a percentile that stays monotone in t.
func (s *sizer) mixTail(lambda, es float64, n int32, t float64) float64 {
	return s.mixTailAt(lambda, es, n, t, true)
}

// mixTailAt is mixTail, each second at its transient where it runs late
// beyond the budget when transient is set, at its steady state otherwise.
func (s *sizer) mixTailAt(lambda, es float64, n int32, t float64, transient bool) float64 {
	return s.mixAverage(lambda, func(rate float64) float64 {
		p := s.tail0(rate, es, n, t)
		if transient {
			p *= s.secondFactor(rate, lambda, es, n)
		}
		return p
	})
}

// steadyTail is tail with every second at its steady state (tail itself at a
// constant rate).
func (s *sizer) steadyTail(lambda, es float64, n int32, t float64) float64 {
	if s.mix != nil && lambda > 0 && es > 0 && n >= 1 {
		return s.mixTailAt(lambda, es, n, t, false)
	}
	return s.tail0(lambda, es, n, t)
}

// mixMean is the mean latency averaged the same way.
func (s *sizer) mixMean(lambda, es float64, n int32) float64 {
	return s.mixAverage(lambda, func(rate float64) float64 { return s.latency0(rate, es, n) })
}

// mixAverage is f of each bin's rate, λ·v, averaged with each bin weighted by
// its requests (w·v).
func (s *sizer) mixAverage(lambda float64, f func(rate float64) float64) float64 {
	var sum, all float64
	for _, b := range s.mix {
		w := b.w * b.v
		if w == 0 {
			continue // seconds without requests weigh nothing (and 0 × +Inf is NaN)
		}
		sum += w * f(lambda*b.v)
		all += w
	}
	return sum / all
}

// mixPercentile is the latency at the target percentile of the mixture: the t
// with mixTail(t) = 1 − p/100, bracketed by doubling from the latency at the
// mean rate, then found by the Illinois method on ln P(T > t), which is
// nearly linear in t beyond the service time, to 0.1 %. +Inf when beyond 10⁴ s
// (a second's rate above the pods' capacity holds its requests without bound).
func (s *sizer) mixPercentile(lambda, es float64, n int32) float64 {
	q := 1 - s.pct/100
	f := func(t float64) float64 { return math.Log(math.Max(s.mixTail(lambda, es, n, t), 1e-300)) - math.Log(q) }
	hi := s.latency0(lambda, es, n)
	if !(hi > 0) || math.IsInf(hi, 1) {
		hi = es
	}
	fhi := f(hi)
	for fhi > 0 {
		hi *= 2
		if hi > 1e4 {
			return math.Inf(1)
		}
		fhi = f(hi)
	}
	lo := hi / 2
	flo := f(lo)
	for flo <= 0 && lo > es*1e-6 {
		hi, fhi = lo, flo
		lo /= 2
		flo = f(lo)
	}
	if flo <= 0 {
		return lo
	}
	// Illinois: regula falsi that halves the weight of an end kept twice.
	side := 0
	for range 100 {
		if hi-lo <= 1e-3*hi {
			break
		}
		m := (lo*fhi - hi*flo) / (fhi - flo)
		if !(m > lo && m < hi) {
			m = (lo + hi) / 2
		}
		fm := f(m)
		if fm > 0 {
			lo, flo = m, fm
			if side == -1 {
				fhi /= 2
			}
			side = -1
		} else {
			hi, fhi = m, fm
			if side == 1 {
				flo /= 2
			}
			side = 1
		}
	}
	return hi
}

// mixMinPods is the fewest pods whose mixture meets goal (the target, or the
// slack over the latency floor when the target is below it): from half the
// pods the mean rate alone needs (the mixture may need fewer where the law of
// the rate is concave, rarely), upwards.
func (s *sizer) mixMinPods(lambda, es float64, fromMean int32) int32 {
	goal := s.target
	if s.pct > 0 {
		if floor := s.load(lambda, es).ServicePercentile(s.pct); goal <= floor {
			goal = floor * infeasibleSlack
		}
		q := 1 - s.pct/100
		return s.searchUp(max(1, fromMean/2), func(m int32) bool { return s.mixTail(lambda, es, m, goal) <= q })
	}
	if goal <= es {
		goal = es * infeasibleSlack
	}
	return s.searchUp(max(1, fromMean/2), func(m int32) bool { return s.mixMean(lambda, es, m) <= goal })
}

// denoiseJumps removes from the history's jump ratios over one lead the part
// of their spread that the seconds' own variability makes: a mean over a lead
// of L seconds whose rates vary with relative variance cv² (independent from
// second to second) is off by about cv²/L relative, so ln J, a ratio of two
// such means, has 2·cv²/L more variance than the rate's real moves over a lead.
// The mixture already prices the seconds; counting them again in the jumps
// would buy the same pods twice. The ratios (ascending) are shrunk towards their
// median in log so that their variance loses that much (all of it at most);
// the order is kept.
func denoiseJumps(ratios []float64, cv2, leadSeconds float64) []float64 {
	if len(ratios) < 3 || !(cv2 > 0) || !(leadSeconds > 0) {
		return ratios
	}
	logs := make([]float64, len(ratios))
	var mean float64
	for i, r := range ratios {
		logs[i] = math.Log(math.Max(r, 1e-9))
		mean += logs[i]
	}
	mean /= float64(len(logs))
	var v float64
	for _, l := range logs {
		v += (l - mean) * (l - mean)
	}
	v /= float64(len(logs) - 1)
	if v <= 0 {
		return ratios
	}
	shrink := math.Sqrt(math.Max(0, 1-2*cv2/leadSeconds/v))
	med := logs[len(logs)/2]
	out := make([]float64, len(ratios))
	for i, l := range logs {
		out[i] = math.Exp(med + (l-med)*shrink)
	}
	return out
}

// maxLevelWindow bounds the level's window: beyond ten minutes a mean is no
// longer the present's.
const maxLevelWindow = 10 * time.Minute

// levelSeconds is the window, in seconds, over which the seconds' own
// variability (relative variance cv2 per second, independent from second to
// second) leaves λ's mean a relative error within the tolerance θ: cv2/θ²
// (+Inf without a tolerance).
func levelSeconds(cv2, theta float64) float64 {
	if !(theta > 0) {
		return math.Inf(1)
	}
	return cv2 / (theta * theta)
}

// levelRate is λ's mean over the level window (levelSeconds), at least one
// step and at most maxLevelWindow, cut to the history there is. The window it
// averaged over is returned; false when that is no longer than one step.
func levelRate(samples []Sample, now time.Time, cv2, theta float64, step time.Duration) (float64, time.Duration, bool) {
	if len(samples) == 0 || !(theta > 0) || step <= 0 {
		return 0, 0, false
	}
	w := time.Duration(math.Min(levelSeconds(cv2, theta), maxLevelWindow.Seconds()) * float64(time.Second)).Round(time.Millisecond)
	if have := now.Sub(samples[0].Time) + step; w > have {
		w = have
	}
	w = w.Truncate(step)
	if w <= step {
		return 0, 0, false
	}
	mean, ok := meanRate(samples, now.Add(-w), now)
	return mean, w, ok
}
