package decide

import (
	"math"

	"github.com/qas-dev/qas/decider/queueing"
)

// A second at a high rate (mixture.go) is not a steady state. The rate
// mixture averages each second's late share at its own rate, and took that
// share from the steady-state model: at a per-server utilisation ρ near or
// above 1 the steady state holds queues that take far longer than a second to
// build (an M/M/1 queue at ρ = 0.9 with 40 ms service relaxes over about 15 s;
// above ρ = 1 it has none and the model counted every request late), while the
// second's excess work is bounded by the second: a second of 28 requests on a
// pod that clears 25 builds about 0.12 s of work, not an unbounded queue. With
// few pods and batched counts (a few logged requests fanned out, so a second
// holds 2–3 batches at once now and then) the steady-state view ordered a
// second pod for seconds that one pod serves with a fraction late.
//
// secondTail0 is the late share of such a second: the queue's work over it
// as a reflected Brownian motion (the heavy-traffic limit of the queue's
// work: drift ρ − 1 seconds of work per second, variance rate
// a·E[S]²·(ca² + cs²)/c² for a arrivals per second on c servers, with the
// closed loop's correction of the variability as in the steady state),
// started from the typical state (the steady state at the mean rate), an
// arrival at u waiting W(u), averaged over the second's arrivals, each then
// served with the measured service shape; plus the requests after it, at the
// mean rate, that wait behind the work it leaves beyond what the typical state
// makes them wait. The mixture takes the smaller of it and the steady state's
// share (secondFactor): the steady state where the queue relaxes within the
// second (low ρ, where the Brownian limit overstates the wait), the second's
// own where it does not. Checked against simulated queues in
// TestTheMixtureAgainstASimulatedQueue (docs/model.md section 2c).
const (
	// secondWaitNodes are the cells of the wait's distribution, up to the
	// target, convolved with the service's survival.
	secondWaitNodes = 8
	// secondLeftNodes are the cells E[W] at the second's end is summed over.
	secondLeftNodes = 8
	// secondRateStep is the step, in ln ρ, of the per-server utilisations the
	// transient is computed at (each rounded up to the next step, cached for
	// the decision): the jump floor asks for hundreds of nearby rates.
	secondRateStep = 0.02
	// secondMinRho is the utilisation below which the steady state is kept
	// without comparison: far from ρ = 1 the queue relaxes within a second.
	secondMinRho = 0.7
)

// secondBelowMinRho is the utilisation below which the rounded one is sure to
// be below secondMinRho: ⌈ln ρ/step⌉ < ln ρ/step + 1.
var secondBelowMinRho = secondMinRho * math.Exp(-secondRateStep)

// secondFactor is the factor a second at rate rate (of mean mean) takes its
// steady-state late share at the target down by: its transient share over the
// steady state's, at most 1; 1 when the steady state is within the budget
// there or the transient does not apply. The per-server utilisations of the
// second and of the mean are rounded up to steps of secondRateStep in ln ρ
// and the factor cached for the decision by them (and, for the pooled layout,
// the pods): the jump floor and the searches over pods ask for hundreds of
// nearby rates, and per-pod queues at the same utilisations are the same
// queue whatever the pods.
func (s *sizer) secondFactor(rate, mean, es float64, n int32) float64 {
	if rate <= 0 || mean <= 0 || es <= 0 || n < 1 || s.target <= 0 || s.pct <= 0 {
		return 1
	}
	// per converts a rate of the workload to a per-server utilisation.
	per := es / float64(int(n)*s.k)
	if rate*per < secondBelowMinRho {
		return 1 // below secondMinRho whichever way it rounds: no logarithm needed
	}
	// The factor depends on what the model is this moment: the closed loop's
	// correction (calibrate tries many) and the percentile (the budget's gate)
	// are part of the key.
	key := secondKey{es: es, bias: s.waitBias, pct: s.pct}
	if s.layout != queueing.LayoutPerPod {
		key.n = n
	}
	key.rho = math.Ceil(math.Log(rate*per) / secondRateStep)
	if key.rho < math.Log(secondMinRho)/secondRateStep {
		return 1 // far from saturation: the steady state within the second
	}
	if mean*per >= 1 {
		// Overloaded on average (a jump the floor prices, sustained for a
		// lead): no typical state to return to, the steady state stands.
		return 1
	}
	key.mean = math.Ceil(math.Log(mean*per) / secondRateStep)
	if f, ok := s.seconds[key]; ok {
		return f
	}
	f := 1.0
	r := math.Exp(key.rho*secondRateStep) / per
	if steady := s.tail0(r, es, n, s.target); steady > 1-s.pct/100 {
		if q, ok := s.secondTail0(r, math.Exp(key.mean*secondRateStep)/per, es, n, s.target); ok && q < steady {
			f = q / steady
		}
	}
	if s.seconds == nil {
		s.seconds = map[secondKey]float64{}
	}
	s.seconds[key] = f
	return f
}

type secondKey struct {
	rho, mean, es, bias, pct float64
	n                        int32
}

// secondTail0 is P(T > t) for a one-second stretch at rate rate on n pods
// whose mean rate is mean; ok is false when the comparison does not apply
// (per-server ρ below secondMinRho).
func (s *sizer) secondTail0(rate, mean, es float64, n int32, t float64) (float64, bool) {
	a, c := rate, float64(int(n)*s.k)
	if s.layout == queueing.LayoutPerPod {
		a, c = rate/float64(n), float64(s.k)
	}
	rho := a * es / c
	if rho < secondMinRho {
		return 0, false
	}
	l := s.load(rate, es)
	kappa := 1 + orOne(s.snap.ServiceSCV)
	if l.AllenCunneen {
		kappa = l.ArrivalSCV + l.ServiceSCV
	}
	drift := rho - 1
	sigma2 := a * es * es * kappa / (c * c)
	service := func(x float64) float64 { return s.shape.Survival(x / es) }
	// The queue enters the second in its typical state, the steady state at
	// the mean rate: idle with probability 1 − C, else holding an exponential
	// wait of mean E[W]/C (two Gauss–Laguerre nodes).
	starts := []weighted{{v: 0, w: 1}}
	if mm, err := s.load(mean, es).Pods(int(n), s.k, s.layout); err == nil && mm.WaitProbability > 0 && mm.MeanWait > 0 {
		c0, w0 := mm.WaitProbability, mm.MeanWait/mm.WaitProbability
		starts = []weighted{{v: 0, w: 1 - c0}}
		for i, x := range laguerreNodes {
			starts = append(starts, weighted{v: x * w0, w: c0 * laguerreWeights[i]})
		}
	}
	x0 := 0.0
	for _, st := range starts {
		x0 += st.w * st.v
	}
	lateAt := func(u, x0, drift, v float64) float64 {
		// P(W(u) + S > t) = P(W(u) > t) + Σ P(W(u) in the cell)·P(S > t − w).
		p := rbmSurvival(t, u, x0, drift, v)
		h := t / secondWaitNodes
		prev := rbmSurvival(0, u, x0, drift, v)
		p += (1 - prev) * service(t)
		for j := 1; j <= secondWaitNodes; j++ {
			w := float64(j) * h
			sv := rbmSurvival(w, u, x0, drift, v)
			p += (prev - sv) * service(t-(w-h/2))
			prev = sv
		}
		return p
	}
	var late float64
	for i, u := range legendreNodes {
		for _, st := range starts {
			late += legendreWeights[i] * st.w * lateAt(u, st.v, drift, sigma2)
		}
	}
	// The second's excess work outlasts it: the arrivals after it, at the
	// mean rate, wait behind what is left (its mean, drained at the mean
	// rate's drift). Their lateness beyond the typical state's is this
	// second's doing, counted against its requests.
	am := mean
	if s.layout == queueing.LayoutPerPod {
		am = mean / float64(n)
	}
	rhoM := am * es / c
	if rhoM < 1 && am > 0 {
		var left float64 // E[W(1)]
		h := 4 * (t + math.Sqrt(sigma2) + x0 + math.Max(drift, 0))
		h /= secondLeftNodes
		for j := range secondLeftNodes {
			for _, st := range starts {
				left += st.w * h * rbmSurvival((float64(j)+0.5)*h, 1, st.v, drift, sigma2)
			}
		}
		if left > x0 {
			vm := am * es * es * kappa / (c * c)
			span := math.Min((left-x0)/(1-rhoM)+1, 30)
			var extra float64
			for i, u := range legendreNodes {
				extra += legendreWeights[i] * (lateAt(u*span, left, rhoM-1, vm) - lateAt(u*span, x0, rhoM-1, vm))
			}
			late += math.Max(extra*span, 0) * am / a
		}
	}
	return min(max(late, 0), 1), true
}

// rbmSurvival is P(W(u) > x) for a reflected Brownian motion started at x0
// with drift m and variance rate v:
// 1 − Φ((x − x0 − m·u)/√(v·u)) + e^{2·m·x/v}·Φ((−x − x0 − m·u)/√(v·u)).
func rbmSurvival(x, u, x0, m, v float64) float64 {
	if x < 0 {
		return 1
	}
	sd := math.Sqrt(v * u)
	if !(sd > 0) {
		if x0 > x {
			return 1
		}
		return 0
	}
	a := 0.5 * math.Erfc((x-x0-m*u)/(sd*math.Sqrt2))
	z := (-x - x0 - m*u) / sd
	var b float64
	if e := 2 * m * x / v; z > -8 && e < 700 {
		b = math.Exp(e) * 0.5 * math.Erfc(-z/math.Sqrt2)
	} else {
		b = math.Exp(e + logNormalCDF(z))
	}
	return min(max(a+b, 0), 1)
}

// logNormalCDF is ln Φ(z), accurate far in the lower tail (where Φ underflows
// and the reflection term's exponential overflows).
func logNormalCDF(z float64) float64 {
	if z > -8 {
		return math.Log(0.5 * math.Erfc(-z/math.Sqrt2))
	}
	// Mills ratio: Φ(z) ≈ φ(z)/|z|·(1 − 1/z² + 3/z⁴).
	return -z*z/2 - math.Log(-z*math.Sqrt(2*math.Pi)) + math.Log1p(-1/(z*z)+3/(z*z*z*z))
}

// laguerreNodes and laguerreWeights are the two-point Gauss–Laguerre rule:
// ∫₀^∞ f(x)·e^{−x} dx ≈ Σ wᵢ·f(xᵢ); legendreNodes and legendreWeights the
// three-point Gauss–Legendre rule on [0, 1].
var (
	laguerreNodes   = []float64{2 - math.Sqrt2, 2 + math.Sqrt2}
	laguerreWeights = []float64{(2 + math.Sqrt2) / 4, (2 - math.Sqrt2) / 4}
	legendreNodes   = []float64{(1 - 0.7745966692) / 2, 0.5, (1 + 0.7745966692) / 2}
	legendreWeights = []float64{5.0 / 18, 8.0 / 18, 5.0 / 18}
)
