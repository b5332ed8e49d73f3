package decide

import "math"

// servicePercentiles are the percentiles the tail's shape is read at from the
// pooled service-time histogram when no quantiles say which: those the
// collector stores (proxy/stats.ServicePercentiles, which a test checks),
// dense in the tail, where a latency target's late share is decided.
var servicePercentiles = []float64{50, 75, 90, 95, 97.5, 99, 99.5, 99.9}

// poolServiceBuckets folds one interval's service-time histogram into the
// pooled one (e.svcHist, each bucket's share of the pooled requests, keyed by
// its upper bound) with the interval's weight in the pooled E[S] estimate: the
// mixture (1 − w)·pooled + w·interval is the intervals' counts added up with
// the older ones decayed as E[S]'s are (service.go). A weight of 1 starts it
// afresh. Buckets are matched by upper bound: the collector leaves out an
// empty bucket below an empty one, so a bucket's count always lies just below
// its own bound, and the bucket under a non-empty one is always written (its
// bound is the non-empty one's lower edge). It returns whether the pooled
// histogram started afresh. An interval that counted nothing changes nothing.
func (e *Engine) poolServiceBuckets(bs []LatencyBucket, weight float64) bool {
	total := 0.0
	for _, b := range bs {
		total += b.Count
	}
	if total <= 0 || weight <= 0 {
		return false
	}
	fresh := len(e.svcHist) == 0 || weight >= 1
	old, w := e.svcHist, math.Min(weight, 1)
	if fresh {
		old, w = nil, 1
	}
	// Both are ascending by bound (the snapshot's is validated so): one merge.
	out := make([]LatencyBucket, 0, len(bs)+len(old))
	i, j := 0, 0
	for i < len(old) || j < len(bs) {
		switch {
		case j == len(bs) || (i < len(old) && old[i].UpperBound < bs[j].UpperBound):
			out = append(out, LatencyBucket{UpperBound: old[i].UpperBound, Count: (1 - w) * old[i].Count})
			i++
		case i == len(old) || bs[j].UpperBound < old[i].UpperBound:
			out = append(out, LatencyBucket{UpperBound: bs[j].UpperBound, Count: w * bs[j].Count / total})
			j++
		default:
			out = append(out, LatencyBucket{UpperBound: bs[j].UpperBound, Count: (1-w)*old[i].Count + w*bs[j].Count/total})
			i, j = i+1, j+1
		}
	}
	e.svcHist = out
	return fresh
}

// bucketsQuantile is the q-quantile (q in (0,1)) of a histogram of shares
// (ascending upper bounds, the last +Inf), with the survival P(X > t)
// interpolated log-linearly inside the bucket that holds it (linearly where
// that bucket holds the rest of the observations), the last finite bound when
// the quantile lies in the +Inf bucket: as the collector reads a quantile from
// the proxies' histogram (proxy/stats.Histogram.TailQuantile), so that the
// pooled histogram and one interval's quantiles agree on one interval. NaN for
// an empty histogram.
func bucketsQuantile(bs []LatencyBucket, q float64) float64 {
	total := 0.0
	for _, b := range bs {
		total += b.Count
	}
	if total <= 0 || !(q > 0 && q < 1) {
		return math.NaN()
	}
	target := 1 - q
	cum, lo := 0.0, 0.0
	for _, b := range bs {
		sLo := 1 - cum/total
		cum += b.Count
		sHi := 1 - cum/total
		if b.Count > 0 && sHi <= target {
			switch {
			case math.IsInf(b.UpperBound, 1):
				return lo
			case cum >= total*(1-1e-12):
				// The bucket holds the rest of the observations: no tail to follow.
				return lo + (b.UpperBound-lo)*(sLo-target)/sLo
			}
			return lo + (b.UpperBound-lo)*math.Log(sLo/target)/math.Log(sLo/sHi)
		}
		if !math.IsInf(b.UpperBound, 1) {
			lo = b.UpperBound
		}
	}
	return lo
}

// validBuckets reports whether bs is a histogram the engine can read: upper
// bounds positive (NaN refused) and strictly ascending, the last +Inf, counts
// finite and ≥ 0.
func validBuckets(bs []LatencyBucket) bool {
	if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].UpperBound, 1) {
		return false
	}
	for i, b := range bs {
		if !(b.UpperBound > 0) || badFloat(b.Count) || b.Count < 0 || (i > 0 && !(b.UpperBound > bs[i-1].UpperBound)) {
			return false
		}
	}
	return true
}
