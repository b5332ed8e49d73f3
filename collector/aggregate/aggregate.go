// Package aggregate turns per-pod intervals into the quantities the queueing model
// uses: λ, E[S], its variance and SCV, average in-flight, queue wait, errors and
// latency percentiles from merged histogram deltas, per pod and per workload.
package aggregate

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/stats"
)

// Metrics are the derived quantities of one pod or one workload over an interval.
type Metrics struct {
	Time time.Time
	// ArrivalRate λ in requests per second; ErrorRate in 5xx per second.
	ArrivalRate, ErrorRate float64
	// ServiceMean E[S] and ServiceVariance in s and s²; ServiceSCV = Var/E[S]².
	// All zero when nothing completed.
	ServiceMean, ServiceVariance, ServiceSCV float64
	// QueueWaitMean is the mean wait for a proxy slot per queued request, in s.
	QueueWaitMean float64
	// InFlightMean is ΔInFlightSeconds/Δt: time-average requests in service.
	InFlightMean float64
	// BusyRatio is the share of time with at least one request in flight.
	BusyRatio float64
	// LatencyP50/P95/P99 in s from the histogram; NaN-free: 0 when empty.
	LatencyP50, LatencyP95, LatencyP99 float64
	Completions                        uint64
	Pods                               int
}

// Pod derives one pod's metrics from its interval.
func Pod(iv scrape.Interval) Metrics {
	return combine(iv.End, []scrape.Interval{iv})
}

// Workload derives a workload's metrics from its pods' intervals of one cycle. Rates
// add up (each pod's count over its own interval length); E[S] and its variance are
// pooled over all completions; the histograms are merged before taking percentiles.
func Workload(ivs []scrape.Interval) (Metrics, error) {
	if len(ivs) == 0 {
		return Metrics{}, errors.New("aggregate: no intervals")
	}
	end := ivs[0].End
	for _, iv := range ivs {
		if iv.End.After(end) {
			end = iv.End
		}
	}
	return combine(end, ivs), nil
}

func combine(end time.Time, ivs []scrape.Interval) Metrics {
	m := Metrics{Time: end, Pods: len(ivs)}
	var n, queued uint64
	var sum, sumSq, wait float64
	var merged stats.Histogram
	for _, iv := range ivs {
		dt := iv.Seconds()
		if dt > 0 {
			m.ArrivalRate += float64(iv.Arrivals) / dt
			m.ErrorRate += float64(iv.Errors5xx) / dt
			m.InFlightMean += iv.InFlightSeconds / dt
			m.BusyRatio += iv.BusySeconds / dt / float64(len(ivs))
		}
		n += iv.Completions
		queued += iv.Queued
		sum += iv.ServiceSecondsSum
		sumSq += iv.ServiceSecondsSumSq
		wait += iv.QueueWaitSecondsSum
		merged = Merge(merged, iv.Latency)
	}
	m.Completions = n
	if n > 0 {
		m.ServiceMean = sum / float64(n)
		m.ServiceVariance = math.Max(0, sumSq/float64(n)-m.ServiceMean*m.ServiceMean)
		if m.ServiceMean > 0 {
			m.ServiceSCV = m.ServiceVariance / (m.ServiceMean * m.ServiceMean)
		}
	}
	if queued > 0 {
		m.QueueWaitMean = wait / float64(queued)
	}
	m.LatencyP50 = Quantile(merged, 0.50)
	m.LatencyP95 = Quantile(merged, 0.95)
	m.LatencyP99 = Quantile(merged, 0.99)
	return m
}

// Merge adds b's counts to a's. Histograms with other bounds than a's first one are
// left out (the scraper rebases on changed bounds, so within a cycle they agree
// unless proxies run with different bounds; those are then not merged).
func Merge(a, b stats.Histogram) stats.Histogram {
	if len(b.Counts) == 0 {
		return a
	}
	if len(a.Counts) == 0 {
		return stats.Histogram{Bounds: b.Bounds, Counts: append([]uint64(nil), b.Counts...)}
	}
	if len(a.Bounds) != len(b.Bounds) {
		return a
	}
	for i := range a.Bounds {
		if a.Bounds[i] != b.Bounds[i] {
			return a
		}
	}
	for i := range b.Counts {
		a.Counts[i] += b.Counts[i]
	}
	return a
}

// Quantile estimates the q-quantile (0<q≤1) of h, interpolating linearly inside the
// bucket that holds it (the first bucket starts at 0). Values in the overflow bucket
// are reported as the last bound: a lower bound of the truth. It returns 0 for an
// empty histogram.
func Quantile(h stats.Histogram, q float64) float64 {
	total := h.Total()
	if total == 0 || len(h.Bounds) == 0 {
		return 0
	}
	rank := q * float64(total)
	i := sort.Search(len(h.Counts), func(i int) bool {
		var c uint64
		for _, v := range h.Counts[:i+1] {
			c += v
		}
		return float64(c) >= rank
	})
	if i >= len(h.Bounds) {
		return h.Bounds[len(h.Bounds)-1]
	}
	var below uint64
	for _, v := range h.Counts[:i] {
		below += v
	}
	lo := 0.0
	if i > 0 {
		lo = h.Bounds[i-1]
	}
	hi := h.Bounds[i]
	if h.Counts[i] == 0 {
		return hi
	}
	return lo + (hi-lo)*(rank-float64(below))/float64(h.Counts[i])
}
