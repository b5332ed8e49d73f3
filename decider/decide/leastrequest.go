package decide

import (
	"math"

	"github.com/qas-dev/qas/decider/queueing"
)

// Least-request balancing (Envoy's LEAST_REQUEST with its default two
// choices, Istio, Linkerd) sends each request to the less loaded of two pods
// drawn at random: the power of two choices. Its queues are far better
// balanced than random routing's, but not one pooled queue: simulated at fixed
// pod counts (decider/evaluate/sim TestLeastRequestModel), the pooled
// M/M/(n·k) model gives 0.51–0.90 of the simulated p95 for k = 1, so sizing
// with it buys too few pods. For k = 1 the engine uses the mean-field model of
// the power of two choices instead (Vvedenskaya, Dobrushin and Karpelevich
// 1996; Mitzenmacher 2001), with the balancer's two draws as they are made:
// independent, so with n pods both are the same pod with probability 1/n and
// the arrival joins it whatever it holds. The pod an arrival joins then holds
// at least i requests with probability J(s_i) = s_i/n + (1 − 1/n)·s_i², s_i the
// share of pods holding at least i, and flow balance gives s_{i+1} = ρ·J(s_i):
// an arrival finds i requests ahead with probability J(s_i) − J(s_{i+1}). With
// one pod that is its M/M/1 queue exactly; as n grows it tends to the
// mean-field limit s_i = ρ^(2^i − 1). It then waits for those i services
// (exponential, as the pooled tail assumes), each stretched by the wait's
// variability factor κ (Allen–Cunneen and the closed loop's correction, as for
// the other layouts), and is served: its own service has the measured shape
// (tail.go) when the proxies report service-time quantiles. Taken as
// exponential there, it left out the heavier tail of lognormal service at
// the target (2.6 % of 50 ms cv 1.2 services exceed 200 ms, 1.8 % of
// exponential ones) wherever the arrival waits: 0.79–0.97 of the simulated
// p95 for that service (n ≥ 4, ρ 0.2–0.7), 0.81–0.99 with the shape
// (decider/evaluate/sim TestLeastRequestModelMeasuredShape). Taking the pods as independent is still
// optimistic with few of them (a pair of pods is often both busy), so the
// engine takes the larger of it and the pooled model's latency: within
// 0.78–0.99 of the simulated p95 for n ≥ 2 (that test's table; 0.70–0.98
// before the draws of the same pod were counted), the closed loop correcting
// the rest. With k > 1 a pod's slots hide most of the imbalance and the engine
// keeps the pooled model.

// leastRequestTerms caps the queue lengths summed: s_i falls doubly
// exponentially (ρ = 0.999 gives s_14 < 1e−7).
const leastRequestTerms = 64

// leastRequestNodes is the number of Simpson intervals of the convolution of
// the wait with the request's own service.
const leastRequestNodes = 64

// leastRequest is the power-of-two-choices model of n single-slot pods.
type leastRequest struct {
	rho, mu, kappa float64
	// shape is the measured service-time distribution relative to E[S], for
	// the request's own service (nil: exponential).
	shape *queueing.ServiceShape
	// ahead[i] is the probability an arrival finds i requests ahead of it.
	ahead []float64
}

// newLeastRequest returns the model, or false when the pods are saturated
// (ρ ≥ 1) or the input is degenerate.
func newLeastRequest(lambda, es, kappa float64, n int32, shape *queueing.ServiceShape) (leastRequest, bool) {
	if es <= 0 || n < 1 || lambda < 0 {
		return leastRequest{}, false
	}
	rho := lambda * es / float64(n)
	if rho >= 1 {
		return leastRequest{}, false
	}
	m := leastRequest{rho: rho, mu: 1 / es, kappa: math.Max(kappa, 0), shape: shape}
	// The balancer draws its two pods independently (Envoy's LEAST_REQUEST):
	// with n pods both draws are the same pod with probability 1/n, and the
	// arrival then joins it whatever it holds.
	same := 1 / float64(n)
	joins := func(s float64) float64 { return same*s + (1-same)*s*s }
	// j is J(s_i), the chance that the pod joined holds at least i; s_0 = 1:
	// every pod holds at least 0 requests.
	j := joins(1)
	for i := 0; i < leastRequestTerms; i++ {
		next := joins(rho * j)
		m.ahead = append(m.ahead, j-next)
		j = next
		if j < 1e-15 {
			break
		}
	}
	return m, true
}

// waitTail is P(W > t) for the wait W: the sum of the i services ahead, each
// exponential with rate μ/κ.
func (m leastRequest) waitTail(t float64) float64 {
	if m.kappa == 0 || t < 0 {
		return 0
	}
	x := m.mu / m.kappa * t
	// Erlang(i) tail: e^{−x} Σ_{j<i} x^j/j!, built term by term.
	var p, term, sum float64
	term = math.Exp(-x)
	for i := 1; i < len(m.ahead); i++ {
		sum += term
		p += m.ahead[i] * sum
		term *= x / float64(i)
	}
	return math.Min(p, 1)
}

// waitDensity is the density of W at w ≥ 0 (its atom at 0 excluded; at 0 the
// limit from above).
func (m leastRequest) waitDensity(w float64) float64 {
	if m.kappa == 0 || w < 0 {
		return 0
	}
	nu := m.mu / m.kappa
	x := nu * w
	// Erlang(i) density: ν e^{−x} x^{i−1}/(i−1)!.
	var f float64
	term := nu * math.Exp(-x)
	for i := 1; i < len(m.ahead); i++ {
		f += m.ahead[i] * term
		term *= x / float64(i)
	}
	return f
}

// service is P(S > u) for the request's own service: the measured shape's
// survival, or exponential with rate μ when none was measured (nil).
func (m leastRequest) service(u float64) float64 {
	return m.shape.Survival(u * m.mu)
}

// tail is P(T > t) for the sojourn T = W + S, S the request's own service:
// P(W > t) + P(W = 0)·P(S > t) + ∫₀ᵗ f_W(w)·P(S > t − w) dw (Simpson's rule).
func (m leastRequest) tail(t float64) float64 {
	if t <= 0 {
		return 1
	}
	if m.kappa == 0 {
		return m.service(t)
	}
	p := m.waitTail(t) + m.ahead[0]*m.service(t)
	if len(m.ahead) > 1 {
		h := t / leastRequestNodes
		var integral float64
		for j := 0; j <= leastRequestNodes; j++ {
			w := float64(j) * h
			f := m.waitDensity(w) * m.service(t-w)
			switch {
			case j == 0 || j == leastRequestNodes:
				integral += f
			case j%2 == 1:
				integral += 4 * f
			default:
				integral += 2 * f
			}
		}
		p += integral * h / 3
	}
	return math.Min(math.Max(p, 0), 1)
}

// mean is E[T] = E[S] + κ·E[i]/μ, E[i] = Σ_{i≥1} i·P(i ahead).
func (m leastRequest) mean() float64 {
	var ei float64
	for i, a := range m.ahead {
		ei += float64(i) * a
	}
	return (1 + m.kappa*ei) / m.mu
}

// latency is the mean (pct 0) or the pct-th percentile of the sojourn time,
// by bisection on the monotone tail from the service time's own percentile
// (waiting only adds to it).
func (m leastRequest) latency(pct float64) float64 {
	if pct <= 0 {
		return m.mean()
	}
	q := 1 - pct/100
	lo := -math.Log(q) / m.mu
	if m.shape != nil {
		lo = m.shape.Quantile(pct) / m.mu
	}
	hi := 2 * lo
	for m.tail(hi) > q {
		lo, hi = hi, 2*hi
		if math.IsInf(hi, 0) {
			return math.Inf(1)
		}
	}
	for hi-lo > 1e-9*hi {
		mid := (lo + hi) / 2
		if m.tail(mid) > q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
