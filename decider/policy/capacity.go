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
// P(R > T) ≤ 1 − p.
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
	Sharing    bool
	Target     float64 // seconds
	Percentile float64 // (0,100)
	Max        int
	cache      map[float64]int
}

// Tail is P(R > t) with n pods at rate lambda; 1 when unstable.
func (c *Capacity) Tail(lambda float64, n int, t float64) float64 {
	k := float64(c.K)
	a := lambda / float64(n) * c.MeanService // offered load per pod, Erlangs
	if a >= k {
		return 1
	}
	pw := 0.0
	if a > 0 {
		pw = erlangC(c.K, a)
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

// Meets reports whether n pods meet the target at rate lambda.
func (c *Capacity) Meets(lambda float64, n int) bool {
	return c.Tail(lambda, n, c.Target) <= 1-c.Percentile/100
}

// Pods is the fewest pods (≥ 1, ≤ Max) that meet the target at rate lambda,
// memoised per rate (a Capacity is not safe for concurrent use).
func (c *Capacity) Pods(lambda float64) int {
	if n, ok := c.cache[lambda]; ok {
		return n
	}
	if c.cache == nil {
		c.cache = map[float64]int{}
	}
	n := c.pods(lambda)
	c.cache[lambda] = n
	return n
}

func (c *Capacity) pods(lambda float64) int {
	lo := max(1, int(math.Ceil(lambda*c.MeanService/float64(c.K))))
	for n := lo; n < c.Max; n++ {
		if c.Meets(lambda, n) {
			return n
		}
	}
	return c.Max
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
