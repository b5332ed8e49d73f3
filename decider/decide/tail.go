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
func (e *Engine) serviceShape(snap Snapshot, es, target, weight float64, x *Explanation) *queueing.ServiceShape {
	x.TailModel = TailExponential
	if qs := snap.ServiceQuantiles; len(qs) > 0 && snap.ServiceTime > 0 && weight > 0 {
		same := len(e.shape) == len(qs) && weight < 1
		for i := 0; same && i < len(qs); i++ {
			same = e.shape[i].Percentile == qs[i].Percentile
		}
		if !same {
			e.shape = make([]LatencyQuantile, len(qs))
			for i, q := range qs {
				e.shape[i] = LatencyQuantile{Percentile: q.Percentile, Seconds: q.Seconds / snap.ServiceTime}
			}
		} else {
			for i, q := range qs {
				e.shape[i].Seconds += (q.Seconds/snap.ServiceTime - e.shape[i].Seconds) * weight
			}
		}
	}
	if len(e.shape) == 0 || es <= 0 {
		if es > 0 && target > 0 {
			x.ServiceLateShare = math.Exp(-target / es)
		}
		x.TailNote = "no service-time quantiles measured: service taken as exponential"
		return nil
	}
	pts := make([]queueing.ServiceQuantile, len(e.shape))
	for i, q := range e.shape {
		pts[i] = queueing.ServiceQuantile{Percentile: q.Percentile, Seconds: q.Seconds}
	}
	shape, err := queueing.NewServiceShape(pts, 1)
	if err != nil {
		// Averages of valid quantiles are valid; a state restored from
		// elsewhere may not be. Forget it rather than act on it.
		e.shape = nil
		x.TailNote = "service-time quantiles unusable (" + err.Error() + "): service taken as exponential"
		return nil
	}
	x.TailModel = TailMeasured
	for _, q := range e.shape {
		x.ServiceQuantiles = append(x.ServiceQuantiles, LatencyQuantile{Percentile: q.Percentile, Seconds: q.Seconds * es})
	}
	if target > 0 {
		x.ServiceLateShare = shape.Survival(target / es)
		x.TailNote = fmt.Sprintf("service tail measured (%s): %.3g%% of service times exceed the target, %.3g%% if exponential",
			shape, 100*x.ServiceLateShare, 100*math.Exp(-target/es))
	}
	return shape
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
