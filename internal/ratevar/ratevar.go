// Package ratevar measures how much a workload's arrival rate varies from one
// second to the next beyond the Poisson noise of its counts: the relative
// variance cv² of the per-second rate. The decider models arrivals as a Poisson
// process whose rate is drawn afresh each second (a doubly stochastic process,
// quasi-static against a service time of milliseconds) and averages its latency
// tail over that rate's law (docs/model.md section 2c, "rate mixture").
//
// The estimate uses successive differences, so a trend over seconds or minutes
// does not count: for counts cᵢ of whole seconds with a rate Λᵢ that changes
// slowly except for its second-to-second part, E[(cᵢ − cᵢ₋₁)²]/2 = Var(Λ) + E[c]
// (the Poisson part), hence cv² = (E[(cᵢ − cᵢ₋₁)²]/2 − E[c]) / E[c]².
//
// The proxies count their arrivals per wall-clock second; the collector adds
// the pods' counts of each second (a workload's series, whatever routes the
// requests to its pods) and keeps Sums of the series; the simulator builds the
// same Sums from its own per-second counts. Both turn Sums into cv² with CV2.
package ratevar

import (
	"errors"
	"fmt"
	"math"
)

// Sums are sums over the pairs of successive whole seconds of one arrival
// series: how many pairs, the sum of both seconds' counts over them, and the sum
// of their squared difference. They add across intervals of the same series.
type Sums struct {
	Pairs  uint64 `json:"pairs"`
	Counts uint64 `json:"counts"`
	DiffSq uint64 `json:"diff_sq"`
}

// Missing marks a second whose count is not known (the proxy was not counting,
// or a tick came too late to say which second its arrivals belong to).
const Missing = -1

// Add is s and o together.
func (s Sums) Add(o Sums) Sums {
	return Sums{Pairs: s.Pairs + o.Pairs, Counts: s.Counts + o.Counts, DiffSq: s.DiffSq + o.DiffSq}
}

// Of returns the Sums of a series of per-second counts, oldest first: every pair
// of neighbours that are both known (Missing breaks the chain). A negative count
// other than Missing is an error.
func Of(counts []int64) (Sums, error) {
	var s Sums
	for i, c := range counts {
		if c < Missing {
			return Sums{}, fmt.Errorf("ratevar: count %d of second %d is negative", c, i)
		}
		if i == 0 || c == Missing || counts[i-1] == Missing {
			continue
		}
		p := counts[i-1]
		d := c - p
		s.Pairs++
		s.Counts += uint64(c + p)
		s.DiffSq += uint64(d * d)
	}
	return s, nil
}

// ErrNoArrivals is CV2's error when the sums hold no pair with an arrival: the
// series says nothing about the rate's variance.
var ErrNoArrivals = errors.New("ratevar: no arrivals in the pairs")

// CV2 is the estimated relative variance of the per-second rate beyond Poisson
// noise. It is unbiased but noisy, so it can be negative (noise around 0 on
// Poisson traffic); a consumer averages it over time before clamping it at 0.
func CV2(s Sums) (float64, error) {
	if s.Pairs == 0 || s.Counts == 0 {
		return 0, ErrNoArrivals
	}
	n := float64(s.Pairs)
	mean := float64(s.Counts) / (2 * n)
	v := float64(s.DiffSq) / (2 * n)
	cv2 := (v - mean) / (mean * mean)
	if math.IsNaN(cv2) || math.IsInf(cv2, 0) {
		return 0, fmt.Errorf("ratevar: cv² of %+v is not finite", s)
	}
	return cv2, nil
}
