package policy

import "math"

// Capacity is the oracle's own sizing rule, independent of decider/queueing:
// pods behind a Service with random routing each see Poisson arrivals at λ/n
// (a random split of a Poisson stream is Poisson), served as an M/G/k queue.
// The response time R = W + S, with S drawn from the true service-time
// distribution (given as equally weighted quantiles) and W, the wait, 0 with
// probability 1−C and otherwise exponential with rate (kμ−λ/n)·2/(1+cs²): the
// M/M/k waiting time (Erlang C probability C) with its mean scaled by the
// Allen–Cunneen factor (1+cs²)/2. A pod count meets the target when
// P(R > T) ≤ Budget(): 1 − p, or, when the service time alone already misses
// the target for more than that share (no pod count can meet it), the share of
// requests whose service time misses it plus 1 − p of the others (see Budget).
//
// Pooled is the same rule for requests that wait in one queue in front of all
// the pods and go to a free place (Knative's activator): one M/G/(n·k) queue
// fed λ, Erlang C for n·k servers.
type Capacity struct {
	MeanService float64 // E[S] seconds
	ServiceSCV  float64 // cs²
	// ServiceQuantiles are equally weighted points of the true service-time
	// distribution (e.g. its quantiles at (i+½)/N).
	ServiceQuantiles []float64
	K                int
	// Sharing is processor sharing among the K full-speed places of a pod:
	// then R = S × (1 + C/(K − a)) (C the Erlang C probability, a the
	// offered load), the mean response time of a request of size S in
	// M/G/1-PS (S/(1−ρ)) extended to K places, its spread given S ignored.
	Sharing bool
	// Pooled sizes for one queue in front of all pods (not with Sharing).
	Pooled bool
	Target float64 // seconds
	// Percentile is in (0,100), or 0 for a mean-latency target (seed 003's
	// Equations 7–8): then a pod count meets the target when the mean
	// response time E[S] + E[W] (MeanLatency) is within it.
	Percentile float64
	Max        int
	budget     float64   // Budget, once computed (it is never 0)
	perPod     float64   // PerPodRate, once computed
	limits     []float64 // Pooled: limits[n−1] is the largest rate n pods meet the target at
}

// Tail is P(R > t) with n pods at rate lambda; 1 when unstable.
func (c *Capacity) Tail(lambda float64, n int, t float64) float64 {
	servers := c.K
	a := lambda / float64(n) * c.MeanService // offered load per pod, Erlangs
	if c.Pooled && !c.Sharing {
		servers, a = n*c.K, lambda*c.MeanService
	}
	k := float64(servers)
	if a >= k {
		return 1
	}
	pw := 0.0
	if a > 0 {
		pw = erlangC(servers, a)
	}
	if c.Sharing {
		slow := 1 + pw/(k-a)
		over := 0
		for _, s := range c.ServiceQuantiles {
			if s*slow > t {
				over++
			}
		}
		return float64(over) / float64(len(c.ServiceQuantiles))
	}
	theta := (k - a) / c.MeanService * 2 / (1 + c.ServiceSCV)
	sum := 0.0
	for _, s := range c.ServiceQuantiles {
		if s > t {
			sum++
		} else {
			sum += pw * math.Exp(-theta*(t-s))
		}
	}
	return sum / float64(len(c.ServiceQuantiles))
}

// MeanLatency is E[R] with n pods at rate lambda: E[S] + C/(kμ − λ/n) ×
// (1 + cs²)/2 (M/M/k's mean wait with the Allen–Cunneen factor), or with
// Sharing E[S] × (1 + C/(K − a)); +Inf when unstable.
func (c *Capacity) MeanLatency(lambda float64, n int) float64 {
	servers := c.K
	a := lambda / float64(n) * c.MeanService
	if c.Pooled && !c.Sharing {
		servers, a = n*c.K, lambda*c.MeanService
	}
	k := float64(servers)
	if a >= k {
		return math.Inf(1)
	}
	pw := 0.0
	if a > 0 {
		pw = erlangC(servers, a)
	}
	if c.Sharing {
		return c.MeanService * (1 + pw/(k-a))
	}
	return c.MeanService + pw*c.MeanService/(k-a)*(1+c.ServiceSCV)/2
}

// ServiceTail is P(S > t) for the service time alone (at full speed): the
// share of requests over t however many pods run.
func (c *Capacity) ServiceTail(t float64) float64 {
	over := 0
	for _, s := range c.ServiceQuantiles {
		if s > t {
			over++
		}
	}
	if len(c.ServiceQuantiles) == 0 {
		return 0
	}
	return float64(over) / float64(len(c.ServiceQuantiles))
}

// Feasible reports whether enough pods can meet the target: the service time
// alone exceeds it for less than 1 − p of requests.
func (c *Capacity) Feasible() bool {
	if c.Percentile == 0 {
		return c.MeanService < c.Target
	}
	return c.ServiceTail(c.Target) < 1-c.Percentile/100
}

// Budget is the largest share of requests over the target that counts as
// meeting the SLO: 1 − p. When the target is infeasible (Feasible is false) no
// pod count gets there, and the budget becomes s + (1 − p)(1 − s), s =
// P(S > T): the requests that cannot make it, plus 1 − p of those that can
// (P(R > T | S ≤ T) ≤ 1 − p). Without it the pods needed would be unbounded and
// the demand curve would sit at the replica cap.
func (c *Capacity) Budget() float64 {
	if c.budget > 0 {
		return c.budget
	}
	q := 1 - c.Percentile/100
	if c.Percentile == 0 {
		// A mean target has no share of late requests; this is only what
		// the report prints beside it (every request may be late).
		q = 1
	}
	c.budget = q
	if !c.Feasible() {
		s := c.ServiceTail(c.Target)
		c.budget = s + q*(1-s)
	}
	return c.budget
}

// Meets reports whether n pods meet the target at rate lambda: P(R > T) is
// within Budget.
func (c *Capacity) Meets(lambda float64, n int) bool {
	if c.Percentile == 0 {
		return c.MeanLatency(lambda, n) <= c.meanTarget()
	}
	return c.Tail(lambda, n, c.Target) <= c.Budget()
}

// meanTarget is the mean target, or when E[S] alone exceeds it (no pod
// count can meet it) E[S] plus the target's own room over no wait: a finite
// demand, as Budget gives for a percentile.
func (c *Capacity) meanTarget() float64 {
	if c.MeanService < c.Target {
		return c.Target
	}
	return c.MeanService + c.Target
}

// Clone returns a copy that is safe to use on another goroutine.
func (c *Capacity) Clone() *Capacity {
	c.PerPodRate()
	d := *c
	d.limits = append([]float64(nil), c.limits...)
	return &d
}

// PooledClone is Clone sizing for one queue in front of all pods (Pooled);
// c itself is not changed.
func (c *Capacity) PooledClone() *Capacity {
	d := c.Clone()
	d.Pooled = true
	return d
}

// PerPodRate is the largest arrival rate per pod at which the target is met.
// Tail depends on λ and n only through the load per pod λ/n, and more load
// per pod is never faster, so n pods meet the target at λ exactly when
// λ/n ≤ PerPodRate. Found once, by bisection below the stability limit
// K/E[S] (a Capacity is not safe for concurrent use: Clone it).
func (c *Capacity) PerPodRate() float64 {
	if c.perPod > 0 {
		return c.perPod
	}
	c.perPod = c.largestRate(1, 100)
	return c.perPod
}

// Pods is the fewest pods (≥ 1, ≤ Max) that meet the target at rate lambda:
// ⌈λ / PerPodRate⌉, or when Pooled the fewest n whose limit (the largest
// rate n pods meet the target at, found by bisection once per n) is at least
// λ.
func (c *Capacity) Pods(lambda float64) int {
	if c.Pooled && !c.Sharing {
		return c.pooledPods(lambda)
	}
	r := c.PerPodRate()
	if lambda <= 0 {
		return max(1, min(1, c.Max))
	}
	if r <= 0 {
		return max(c.Max, 1)
	}
	return int(max(1, min(float64(max(c.Max, 1)), math.Ceil(lambda/r))))
}

func (c *Capacity) pooledPods(lambda float64) int {
	top := max(c.Max, 1)
	for n := 1; n < top; n++ {
		if lambda <= c.limit(n) {
			return n
		}
	}
	return top
}

// limit is the largest rate n pooled pods meet the target at.
func (c *Capacity) limit(n int) float64 {
	for len(c.limits) < n {
		c.limits = append(c.limits, c.largestRate(len(c.limits)+1, 60))
	}
	return c.limits[n-1]
}

// largestRate is the largest arrival rate at which n pods meet the target,
// found by bisection in steps steps below the stability limit n·K/E[S].
func (c *Capacity) largestRate(n, steps int) float64 {
	lo, hi := 0.0, float64(n*c.K)/c.MeanService
	for range steps {
		mid := (lo + hi) / 2
		if c.Meets(mid, n) && mid*c.MeanService < float64(n*c.K) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// erlangC is the probability of waiting in M/M/k with offered load a (< k),
// by the stable Erlang-B recursion.
func erlangC(k int, a float64) float64 {
	b := 1.0
	for i := 1; i <= k; i++ {
		b = a * b / (float64(i) + a*b)
	}
	rho := a / float64(k)
	return b / (1 - rho + rho*b)
}
