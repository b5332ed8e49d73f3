// Package queueing is the M/M/c mathematics of QAS: Erlang B and C, mean and
// percentile latency, the pooled (one queue, n·k servers) and per-pod (n
// independent M/M/k queues) layouts, the Allen–Cunneen G/G/c correction, and the
// smallest allocation that meets a latency target.
//
// All times are in seconds and rates in per second. Every function validates its
// input and never returns NaN for valid input; an overloaded queue (ρ ≥ 1) is an
// *UnstableError, never a number. See docs/model.md for the derivations.
package queueing

import (
	"errors"
	"fmt"
	"math"
)

// ErrUnstable is matched (errors.Is) by every *UnstableError.
var ErrUnstable = errors.New("queue is unstable (utilisation >= 1)")

// ErrInfeasible means no allocation can meet the target (for example a mean
// target at or below the service time itself).
var ErrInfeasible = errors.New("target cannot be met by any number of servers")

// UnstableError reports an overloaded queue: offered load a = λ·E[S] Erlangs on
// c servers with ρ = a/c ≥ 1, so the queue grows without bound.
type UnstableError struct {
	OfferedLoad float64
	Servers     int
}

func (e *UnstableError) Error() string {
	return fmt.Sprintf("queue is unstable: offered load %.6g Erlangs on %d servers (utilisation %.4g >= 1)",
		e.OfferedLoad, e.Servers, e.OfferedLoad/float64(e.Servers))
}

// Is makes errors.Is(err, ErrUnstable) true.
func (e *UnstableError) Is(target error) bool { return target == ErrUnstable }

// InputError is an invalid parameter, named by Field.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Msg) }

func inputErr(field, format string, args ...any) error {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// MaxServers bounds every search and every server count, so that a bad input
// cannot make the O(c) recursion run for ever.
const MaxServers = 10_000_000

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ErlangB returns the Erlang B blocking probability for offered load a Erlangs
// on c servers, from the recursion B(0)=1, B(n) = a·B(n−1)/(n + a·B(n−1)),
// which is stable for any c (no factorials, every term in (0,1]).
func ErlangB(a float64, c int) (float64, error) {
	if !finite(a) || a < 0 {
		return 0, inputErr("offered load", "must be a finite non-negative number, got %v", a)
	}
	if c < 0 || c > MaxServers {
		return 0, inputErr("servers", "must be in [0, %d], got %d", MaxServers, c)
	}
	return erlangB(a, c), nil
}

func erlangB(a float64, c int) float64 {
	b := 1.0
	for n := 1; n <= c; n++ {
		ab := a * b
		b = ab / (float64(n) + ab)
		if b == 0 { // Underflow: every later term is 0 too.
			return 0
		}
	}
	return b
}

// ErlangC returns the probability that an arrival waits in an M/M/c queue with
// offered load a Erlangs: C = B/(1 − ρ(1 − B)), ρ = a/c. It returns an
// *UnstableError when ρ ≥ 1.
func ErlangC(a float64, c int) (float64, error) {
	b, err := ErlangB(a, c)
	if err != nil {
		return 0, err
	}
	if c == 0 {
		return 0, inputErr("servers", "must be at least 1, got 0")
	}
	rho := a / float64(c)
	if rho >= 1 {
		return 0, &UnstableError{OfferedLoad: a, Servers: c}
	}
	return erlangCFromB(b, rho), nil
}

func erlangCFromB(b, rho float64) float64 {
	cw := b / (1 - rho*(1-b))
	if cw > 1 { // Rounding only; C is a probability.
		cw = 1
	}
	return cw
}

// Load is the traffic one workload offers: arrival rate, mean service time and
// their variability.
type Load struct {
	// ArrivalRate is λ, requests per second, ≥ 0.
	ArrivalRate float64
	// ServiceTime is E[S], seconds, > 0.
	ServiceTime float64
	// ArrivalSCV and ServiceSCV are the squared coefficients of variation of
	// inter-arrival and service times; used only when AllenCunneen is set.
	ArrivalSCV, ServiceSCV float64
	// AllenCunneen scales the M/M/c waiting time by (ca² + cs²)/2.
	AllenCunneen bool
	// Shape, when set, is the measured service-time distribution (relative to
	// its mean, scaled here by ServiceTime): percentiles then use it for the
	// service part of the sojourn time instead of the exponential (service.go).
	// Nil: exponential service, the M/M/c closed form.
	Shape *ServiceShape
}

// Validate reports the first invalid field of l.
func (l Load) Validate() error {
	if !finite(l.ArrivalRate) || l.ArrivalRate < 0 {
		return inputErr("arrival rate", "must be a finite non-negative number, got %v", l.ArrivalRate)
	}
	if !finite(l.ServiceTime) || l.ServiceTime <= 0 {
		return inputErr("service time", "must be a finite positive number of seconds, got %v", l.ServiceTime)
	}
	if l.AllenCunneen {
		if !finite(l.ArrivalSCV) || l.ArrivalSCV < 0 {
			return inputErr("arrival SCV", "must be a finite non-negative number, got %v", l.ArrivalSCV)
		}
		if !finite(l.ServiceSCV) || l.ServiceSCV < 0 {
			return inputErr("service SCV", "must be a finite non-negative number, got %v", l.ServiceSCV)
		}
	}
	if a := l.ArrivalRate * l.ServiceTime; !finite(a) {
		return inputErr("arrival rate", "offered load λ·E[S] overflows")
	}
	return nil
}

// ServicePercentile is the p-th percentile of the service time alone
// (0 < p < 100): the latency floor that no number of servers goes below.
func (l Load) ServicePercentile(p float64) float64 {
	if l.Shape != nil {
		return l.Shape.Quantile(p) * l.ServiceTime
	}
	return -math.Log1p(-p/100) * l.ServiceTime
}

// OfferedLoad is a = λ·E[S] in Erlangs.
func (l Load) OfferedLoad() float64 { return l.ArrivalRate * l.ServiceTime }

// variabilityFactor is the Allen–Cunneen factor (ca² + cs²)/2, 1 for M/M/c.
func (l Load) variabilityFactor() float64 {
	if !l.AllenCunneen {
		return 1
	}
	return (l.ArrivalSCV + l.ServiceSCV) / 2
}

// Metrics are the steady-state measures of one queue.
type Metrics struct {
	Servers int
	// OfferedLoad a = λ·E[S], Erlangs.
	OfferedLoad float64
	// Utilization ρ = a / c.
	Utilization float64
	// WaitProbability is Erlang C, the probability an arrival waits.
	WaitProbability float64
	// MeanQueueLength Lq = λ·Wq.
	MeanQueueLength float64
	// MeanWait Wq = κ·C/(cμ − λ), κ the Allen–Cunneen factor (1 for M/M/c).
	MeanWait float64
	// MeanLatency L = Wq + E[S].
	MeanLatency float64

	mu        float64 // 1/E[S]
	waitRate  float64 // rate of the conditional wait, θ/κ with θ = cμ − λ
	noWaiting bool    // κ = 0 or C = 0: nobody waits
	shape     *ServiceShape
	// With a shape whose conditional wait is more variable than an
	// exponential's, W* is a two-phase hyperexponential of the same mean:
	// rate waitRate1 with probability waitP1, waitRate2 otherwise (waitP1 0:
	// exponential at waitRate).
	waitP1, waitRate1, waitRate2 float64
}

// At returns the metrics of the pooled queue: one queue with c servers.
func (l Load) At(c int) (Metrics, error) {
	if err := l.Validate(); err != nil {
		return Metrics{}, err
	}
	if c < 1 || c > MaxServers {
		return Metrics{}, inputErr("servers", "must be in [1, %d], got %d", MaxServers, c)
	}
	return l.at(c)
}

func (l Load) at(c int) (Metrics, error) {
	a := l.OfferedLoad()
	rho := a / float64(c)
	if rho >= 1 {
		return Metrics{}, &UnstableError{OfferedLoad: a, Servers: c}
	}
	mu := 1 / l.ServiceTime
	cw := erlangCFromB(erlangB(a, c), rho)
	kappa := l.variabilityFactor()
	// θ = cμ − λ, computed as μ(c − a) to avoid cancellation when λ ≈ cμ.
	theta := mu * (float64(c) - a)
	m := Metrics{
		Servers:         c,
		OfferedLoad:     a,
		Utilization:     rho,
		WaitProbability: cw,
		mu:              mu,
		shape:           l.Shape,
	}
	if cw == 0 || kappa == 0 {
		m.noWaiting = true
	} else {
		m.MeanWait = kappa * cw / theta
		m.waitRate = theta / kappa
		if l.Shape != nil {
			m.fitWait(l.Shape.waitSCV(rho))
		}
	}
	m.MeanQueueLength = l.ArrivalRate * m.MeanWait
	m.MeanLatency = m.MeanWait + l.ServiceTime
	return m, nil
}

// PerPod returns the metrics of one of n pods of concurrency k when a Service
// spreads the load evenly: an M/M/k queue fed λ/n.
func (l Load) PerPod(n, k int) (Metrics, error) {
	if err := l.Validate(); err != nil {
		return Metrics{}, err
	}
	if n < 1 || n > MaxServers {
		return Metrics{}, inputErr("pods", "must be in [1, %d], got %d", MaxServers, n)
	}
	if k < 1 || k > MaxServers {
		return Metrics{}, inputErr("concurrency", "must be in [1, %d], got %d", MaxServers, k)
	}
	p := l
	p.ArrivalRate = l.ArrivalRate / float64(n)
	return p.at(k)
}

// Pooled returns the metrics of n pods of concurrency k seen as one queue with
// n·k servers (the thesis' view).
func (l Load) Pooled(n, k int) (Metrics, error) {
	if n < 1 || k < 1 || int64(n)*int64(k) > MaxServers {
		return Metrics{}, inputErr("pods", "pods (%d) × concurrency (%d) must be in [1, %d]", n, k, MaxServers)
	}
	return l.At(n * k)
}

// TailProbability returns P(T > t) for the sojourn time T (wait + service):
//
//	P(T > t) = (1−C)·e^{−μt} + C·(θ·e^{−μt} − μ·e^{−θt})/(θ − μ),
//
// with θ the rate of the conditional wait (cμ − λ, divided by the Allen–Cunneen
// factor). It is evaluated in the equivalent form e^{−μt}·(1 + C·μ·(1 − e^{−δt})/δ),
// δ = θ − μ, with expm1, which is exact at and near θ = μ (where the limit is
// (1 + Cμt)·e^{−μt}) instead of dividing two vanishing differences.
func (m Metrics) TailProbability(t float64) float64 {
	if math.IsNaN(t) {
		return math.NaN()
	}
	if t <= 0 {
		return 1
	}
	mu := m.mu
	if m.shape != nil {
		return m.calibratedTail(t)
	}
	em := math.Exp(-mu * t)
	if m.noWaiting {
		return em
	}
	cw, theta := m.WaitProbability, m.waitRate
	delta := theta - mu
	dt := delta * t
	var p float64
	switch {
	case dt == 0:
		p = em * (1 + cw*mu*t)
	case dt > -1:
		// (1 − e^{−δt})/δ, well conditioned for δt > −1 (no overflow, no cancellation).
		g := -math.Expm1(-dt) / delta
		p = em * (1 + cw*mu*g)
	default:
		// θ well below μ: the wait dominates; use e^{−θt} directly (no overflow).
		et := math.Exp(-theta * t)
		p = em + cw*mu*(et-em)/(mu-theta)
	}
	if p > 1 {
		p = 1
	}
	if p < 0 {
		p = 0
	}
	return p
}

// LatencyPercentile returns the p-th percentile (0 < p < 100) of the sojourn
// time: the t with P(T > t) = 1 − p/100. The tail is monotone, so the root is
// bracketed and then found by bisection, accelerated by Newton steps on
// ln P(T > t) (nearly linear in t) whenever such a step stays inside the
// bracket; the result is exact to a few ulps either way.
func (m Metrics) LatencyPercentile(p float64) (float64, error) {
	if !finite(p) || p <= 0 || p >= 100 {
		return 0, inputErr("percentile", "must be in (0,100), got %v", p)
	}
	if m.mu <= 0 {
		return 0, inputErr("metrics", "zero Metrics value; use Load.At, PerPod or Pooled")
	}
	q := 1 - p/100
	lnq := math.Log(q)
	if m.shape != nil {
		return m.calibratedPercentile(p)
	}
	// The service-time percentile is a lower bound (waiting only adds).
	lo := -math.Log(q) / m.mu
	hi := 2 * lo
	for m.TailProbability(hi) > q {
		lo = hi
		hi *= 2
		if math.IsInf(hi, 0) {
			return 0, inputErr("percentile", "no finite solution")
		}
	}
	t := hi
	for i := 0; i < 200; i++ {
		pt := m.TailProbability(t)
		if pt > q {
			lo = t
		} else {
			hi = t
		}
		if hi-lo <= 4e-16*hi {
			break
		}
		next, newton := lo+(hi-lo)/2, false
		if pt > 0 {
			// Newton on f(t) = ln P(t) − ln q, f' = P'/P, P' = −μP + Cμe^{−θt}.
			d := -m.mu
			if !m.noWaiting {
				d += m.WaitProbability * m.mu * math.Exp(-m.waitRate*t) / pt
			}
			if d < 0 {
				if n := t - (math.Log(pt)-lnq)/d; n > lo && n < hi {
					next, newton = n, true
				}
			}
		}
		if newton && math.Abs(next-t) <= 1e-12*t {
			// Newton converges quadratically: after a step this small the
			// error is far below rounding, and more steps only chase noise.
			t = next
			break
		}
		t = next
	}
	return t, nil
}

// Latency returns the mean latency (percentile 0) or the given percentile.
func (m Metrics) Latency(percentile float64) (float64, error) {
	if percentile == 0 {
		return m.MeanLatency, nil
	}
	return m.LatencyPercentile(percentile)
}

// Layout says how n pods of concurrency k form queues.
type Layout int

const (
	// LayoutPooled is one queue with n·k servers.
	LayoutPooled Layout = iota
	// LayoutPerPod is n independent M/M/k queues with λ/n each.
	LayoutPerPod
)

// String names the layout as decide.ModelKind does.
func (lay Layout) String() string {
	if lay == LayoutPerPod {
		return "per-pod"
	}
	return "pooled"
}

// Pods returns the metrics of n pods of concurrency k in the given layout. For
// the per-pod layout the metrics are those of one pod's queue, which are also the
// workload's (every pod sees the same share).
func (l Load) Pods(n, k int, lay Layout) (Metrics, error) {
	if lay == LayoutPerPod {
		return l.PerPod(n, k)
	}
	return l.Pooled(n, k)
}

// MinServers returns the smallest c whose latency (mean for percentile 0,
// otherwise the percentile) is at most target, searching by exponential then
// binary search on the monotone L(c).
func (l Load) MinServers(target, percentile float64) (int, error) {
	return l.MinPods(1, LayoutPooled, target, percentile)
}

// MinPods returns the smallest number of pods of concurrency k, in the given
// layout, whose latency meets target. It returns ErrInfeasible (wrapped) when
// even unlimited pods cannot: the latency tends to E[S] (mean) or to the
// service-time percentile −ln(1−p)·E[S] as pods are added.
func (l Load) MinPods(k int, lay Layout, target, percentile float64) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	if k < 1 || k > MaxServers {
		return 0, inputErr("concurrency", "must be in [1, %d], got %d", MaxServers, k)
	}
	if !finite(target) || target <= 0 {
		return 0, inputErr("target", "must be a finite positive number of seconds, got %v", target)
	}
	if !finite(percentile) || percentile < 0 || percentile >= 100 {
		return 0, inputErr("percentile", "must be 0 (mean) or in (0,100), got %v", percentile)
	}
	floor := l.ServiceTime
	if percentile > 0 {
		floor = l.ServicePercentile(percentile)
	}
	if target <= floor {
		return 0, fmt.Errorf("%w: latency tends to %.6gs with unlimited servers, target is %.6gs", ErrInfeasible, floor, target)
	}
	// The smallest stable count: n·k > a, per pod and pooled alike.
	a := l.OfferedLoad()
	lo := int(math.Floor(a/float64(k))) + 1
	if lo < 1 {
		lo = 1
	}
	meets := func(n int) (bool, error) {
		if int64(n)*int64(k) > MaxServers {
			return false, fmt.Errorf("%w: more than %d servers needed", ErrInfeasible, MaxServers)
		}
		m, err := l.Pods(n, k, lay)
		if errors.Is(err, ErrUnstable) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		lat, err := m.Latency(percentile)
		if err != nil {
			return false, err
		}
		return lat <= target, nil
	}
	ok, err := meets(lo)
	if err != nil || ok {
		return lo, err
	}
	// Exponential search for an upper bound that meets, then binary search.
	bad, step := lo, 1
	good := 0
	for good == 0 {
		n := lo + step
		ok, err := meets(n)
		if err != nil {
			return 0, err
		}
		if ok {
			good = n
		} else {
			bad = n
			step *= 2
		}
	}
	for good-bad > 1 {
		mid := bad + (good-bad)/2
		ok, err := meets(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, nil
}
