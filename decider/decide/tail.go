package decide

import (
	"fmt"
	"math"

	"github.com/qas-dev/qas/decider/queueing"
)

// Tail models name how the engine models the service part of the latency tail.
const (
	// TailExponential is the M/M/c closed form: service taken as exponential
	// with the measured mean (the fallback when no service quantiles are
	// measured).
	TailExponential = "exponential"
	// TailMeasured uses the measured service-time quantiles (queueing.ServiceShape).
	TailMeasured = "measured"
)

// serviceShape returns the service-time shape the model uses this cycle, and
// fills the explanation's tail terms. The measured quantiles, relative to the
// same interval's E[S], are averaged with this interval's weight in the
// pooled E[S] estimate (service.go: over the same memory of requests, started
// again with it; a p99 over one scrape interval of a few hundred requests
// moves by tens of percent; averaging quantiles, Vincentisation, keeps the
// shape's meaning), and kept while no quantiles arrive (an idle interval
// says nothing about the shape). Nil: exponential.
//
// The shape is weighed by its evidence: samples is this interval's requests,
// and until the requests measured with these percentiles reach full
// (shapeEvidence), each quantile is the measured one's share, requests ÷
// full, of the way from the exponential's (the tail assumed without
// measurements) to it. A first interval of 150 requests holds 7 beyond p95:
// its p97.5–p99.9 are the few largest service times, tens of percent off, and
// on them a decider just installed ordered three times the pods (capped by
// the scale-up limit at twice) for the minute they took to start.
func (e *Engine) serviceShape(snap Snapshot, es, target, weight, samples, full float64, x *Explanation) *queueing.ServiceShape {
	x.TailModel = TailExponential
	measured := snap.ServiceTime > 0 && weight > 0
	qs, bs := snap.ServiceQuantiles, snap.ServiceBuckets
	restart := false
	if measured && len(qs) > 0 {
		samePs := len(e.shape) == len(qs)
		for i := 0; samePs && i < len(qs); i++ {
			samePs = e.shape[i].Percentile == qs[i].Percentile
		}
		if !samePs || weight >= 1 {
			e.shape = make([]LatencyQuantile, len(qs))
			for i, q := range qs {
				e.shape[i] = LatencyQuantile{Percentile: q.Percentile, Seconds: q.Seconds / snap.ServiceTime}
			}
			// The evidence starts again only where the proxies' percentiles
			// are new (the first shape, or other percentiles). Where the E[S]
			// estimate started again (a CPU change, a shift the CUSUM saw),
			// the shape starts from this interval as it did before the
			// weighing: the exponential is no prior for a tail the proxies
			// have measured.
			restart = !samePs
		} else {
			for i, q := range qs {
				e.shape[i].Seconds += (q.Seconds/snap.ServiceTime - e.shape[i].Seconds) * weight
			}
		}
	}
	if measured && len(bs) > 0 {
		// The first histogram starts the evidence again too: until it holds
		// enough requests it is one interval's.
		if first := len(e.svcHist) == 0; e.poolServiceBuckets(bs, weight) && first {
			restart = true
		}
	}
	if measured && (len(qs) > 0 || len(bs) > 0) {
		if restart {
			e.shapeSamples = 0
		}
		e.shapeSamples += samples
	}
	rel, source := e.shape, "averaged quantiles"
	if h := e.histogramShape(es); h != nil {
		rel, source = h, "pooled histogram"
	}
	if len(rel) == 0 || es <= 0 {
		if es > 0 && target > 0 {
			x.ServiceLateShare = math.Exp(-target / es)
		}
		x.TailNote = "no service-time quantiles measured: service taken as exponential"
		return nil
	}
	w := 1.0
	if full > 0 {
		w = math.Min(e.shapeSamples/full, 1)
	}
	pts := make([]queueing.ServiceQuantile, len(rel))
	for i, q := range rel {
		pts[i] = queueing.ServiceQuantile{Percentile: q.Percentile, Seconds: w*q.Seconds - (1-w)*math.Log1p(-q.Percentile/100)}
	}
	shape, err := queueing.NewServiceShape(pts, 1)
	if err != nil {
		// Averages of valid quantiles are valid; a state restored from
		// elsewhere may not be. Forget it rather than act on it.
		e.shape, e.svcHist, e.shapeSamples = nil, nil, 0
		x.TailNote = "service-time quantiles unusable (" + err.Error() + "): service taken as exponential"
		return nil
	}
	x.TailModel = TailMeasured
	x.ServiceShapeWeight = w
	for _, q := range pts {
		x.ServiceQuantiles = append(x.ServiceQuantiles, LatencyQuantile{Percentile: q.Percentile, Seconds: q.Seconds * es})
	}
	if target > 0 {
		x.ServiceLateShare = shape.Survival(target / es)
		x.TailNote = fmt.Sprintf("service tail measured (%s, from the %s): %.3g%% of service times exceed the target, %.3g%% if exponential",
			shape, source, 100*x.ServiceLateShare, 100*math.Exp(-target/es))
		if w < 1 {
			x.TailNote += fmt.Sprintf("; the measured quantiles weigh %.0f%% against the exponential's: %.0f requests measured, taken in full from %.0f",
				100*w, e.shapeSamples, full)
		}
	}
	return shape
}

// histogramShape is the service-time shape relative to E[S] es read from the
// pooled histogram, at the percentiles of the averaged quantiles (the
// collector's, servicePercentiles when none); nil without a histogram or where
// it cannot give one (a quantile not positive: every request in the first
// bucket's lower part is no shape).
func (e *Engine) histogramShape(es float64) []LatencyQuantile {
	if len(e.svcHist) == 0 || es <= 0 {
		return nil
	}
	ps := servicePercentiles
	if len(e.shape) > 0 {
		ps = make([]float64, len(e.shape))
		for i, q := range e.shape {
			ps[i] = q.Percentile
		}
	}
	out := make([]LatencyQuantile, len(ps))
	for i, p := range ps {
		v := bucketsQuantile(e.svcHist, p/100)
		if !(v > 0) || math.IsInf(v, 0) {
			return nil
		}
		out[i] = LatencyQuantile{Percentile: p, Seconds: v / es}
	}
	return out
}

// shapeEvidence is the requests after which the measured service quantiles
// are taken in full (serviceShape): those that put 1/θ² beyond the SLO's
// percentile (p95 for a mean target), so that the share of service times
// beyond it is known within about θ (relative standard error 1/√count), the
// tolerance the decisions already allow. 0 (taken in full at once) with no
// tolerance.
func shapeEvidence(spec Spec) float64 {
	if spec.Tolerance <= 0 {
		return 0
	}
	return 1 / (spec.Tolerance * spec.Tolerance * (1 - confidence(spec)))
}

// validQuantiles reports whether qs are ascending percentiles in (0,100)
// with finite seconds, ascending, positive when positive is set.
func validQuantiles(qs []LatencyQuantile, positive bool) bool {
	for i, q := range qs {
		if badFloat(q.Percentile) || q.Percentile <= 0 || q.Percentile >= 100 || badFloat(q.Seconds) || q.Seconds < 0 ||
			(positive && q.Seconds == 0) ||
			(i > 0 && (q.Percentile <= qs[i-1].Percentile || q.Seconds < qs[i-1].Seconds)) {
			return false
		}
	}
	return true
}
