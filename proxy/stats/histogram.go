package stats

import (
	"errors"
	"math"
)

// Add returns the bucket-wise sum of h and o (merging pods); the bounds must match.
func (h Histogram) Add(o Histogram) (Histogram, error) {
	if len(o.Counts) == 0 {
		return h, nil
	}
	if len(h.Counts) == 0 {
		return Histogram{Bounds: o.Bounds, Counts: append([]uint64(nil), o.Counts...)}, nil
	}
	if !sameBuckets(h, o) {
		return Histogram{}, errors.New("stats: histograms have different buckets")
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i] + o.Counts[i]
	}
	return out, nil
}

// Quantile estimates the q-quantile (q in [0,1]) by linear interpolation inside the
// bucket that holds it, as Prometheus' histogram_quantile does. It returns NaN for an
// empty histogram and the last bound when the quantile lies beyond it.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Total()
	if total == 0 || math.IsNaN(q) || q < 0 || q > 1 {
		return math.NaN()
	}
	rank := q * float64(total)
	var cum uint64
	for i, c := range h.Counts {
		if float64(cum+c) >= rank && c > 0 {
			if i == len(h.Bounds) {
				return h.Bounds[len(h.Bounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			return lo + (h.Bounds[i]-lo)*(rank-float64(cum))/float64(c)
		}
		cum += c
	}
	return h.Bounds[len(h.Bounds)-1]
}

// sameBuckets reports whether h and o have identical bounds (and so bucket counts).
func sameBuckets(h, o Histogram) bool {
	if len(h.Bounds) != len(o.Bounds) || len(h.Counts) != len(o.Counts) {
		return false
	}
	for i := range h.Bounds {
		if h.Bounds[i] != o.Bounds[i] {
			return false
		}
	}
	return true
}

// ServicePercentiles are the percentiles of service time the collector stores
// and the decider's tail model reads (docs/model.md section 1): dense in the
// tail, where a latency target's late share is decided.
var ServicePercentiles = []float64{50, 75, 90, 95, 97.5, 99, 99.5, 99.9}

// TailQuantile estimates the q-quantile (q in [0,1]) with the survival
// P(X > t) interpolated log-linearly inside the bucket that holds it (linearly
// in the first bucket when it holds every observation), the last bound when
// the quantile lies beyond it, and NaN for an empty histogram. Log-linear is
// exact for an exponential tail and close for the tails of service times,
// whose survival falls by a factor per bucket rather than by a constant; a
// linear interpolation overstates the quantiles of a falling tail.
func (h Histogram) TailQuantile(q float64) float64 {
	total := h.Total()
	if total == 0 || math.IsNaN(q) || q < 0 || q > 1 {
		return math.NaN()
	}
	target := 1 - q // the survival at the quantile
	var cum uint64
	for i, c := range h.Counts {
		sLo := 1 - float64(cum)/float64(total)
		cum += c
		sHi := 1 - float64(cum)/float64(total)
		if c == 0 || sHi > target {
			continue
		}
		if i == len(h.Bounds) {
			return h.Bounds[len(h.Bounds)-1]
		}
		lo := 0.0
		if i > 0 {
			lo = h.Bounds[i-1]
		}
		if sHi <= 0 || target <= 0 {
			// The bucket holds the rest of the observations: no tail to follow.
			return lo + (h.Bounds[i]-lo)*(sLo-target)/sLo
		}
		return lo + (h.Bounds[i]-lo)*math.Log(sLo/target)/math.Log(sLo/sHi)
	}
	return h.Bounds[len(h.Bounds)-1]
}
