// Package aggregate turns per-pod intervals into the quantities the queueing model
// uses: λ, E[S], its variance and SCV, average in-flight, queue wait, errors and
// latency percentiles from merged histogram deltas, per pod and per workload.
package aggregate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

// Metrics are the derived quantities of one pod or one workload over an interval.
type Metrics struct {
	// Time is when the interval ended on the collector's clock (scrape.Interval.Time;
	// for a workload, the newest of its pods').
	Time time.Time
	// ProxyTime is when it ended on the proxy's clock (a pod's only).
	ProxyTime time.Time
	// ClockOffset is the proxy's clock minus the collector's, in s; for a workload, the
	// offset of largest magnitude among its pods.
	ClockOffset float64
	// ArrivalRate λ in requests per second; ErrorRate in 5xx per second. On the
	// pooled data plane a request pulled from a front is counted as an arrival by
	// its sender and again by the pod that pulled it: λ is the proxies' arrivals
	// less their pulls, so each request counts once, where it first arrived
	// (docs/pooling.md, "Accounting").
	ArrivalRate, ErrorRate float64
	// ServiceMean E[S] and ServiceVariance in s and s²; ServiceSCV = Var/E[S]².
	// They are over the served requests (Served): those that held a slot here,
	// local or pulled, not the ones rejected with a full queue nor the ones a
	// sender relayed from a front (the puller counts their service). All zero
	// when none was served.
	ServiceMean, ServiceVariance, ServiceSCV float64
	// QueueWaitMean is the mean wait for a proxy slot per queued request, in s.
	QueueWaitMean float64
	// InFlightMean is ΔInFlightSeconds/Δt: time-average requests in service.
	InFlightMean float64
	// BusyRatio is the share of time with at least one request in flight.
	BusyRatio float64
	// InFlight and Waiting are the proxies' gauges at the interval's end,
	// summed over pods: requests in service and waiting for a slot.
	InFlight, Waiting float64
	// LatencyP50/P95/P99 in s from the histogram; NaN-free: 0 when empty.
	LatencyP50, LatencyP95, LatencyP99 float64
	// Latency is the merged latency histogram they are taken from: the
	// interval's completions per bucket (Counts has one more entry than Bounds,
	// the last above the last bound). Empty when no pod sent one.
	Latency stats.Histogram
	// LatencySkipped names the pods (namespace/pod) whose latency histograms
	// were left out of Latency, the percentiles, Service and ServiceQuantiles because
	// their bucket bounds differ from the ones kept (latencyBounds: those most
	// of the interval's completions were counted in): counts of different
	// buckets cannot be added. Only pods with completions are named. The
	// collector logs them.
	LatencySkipped []string
	// ServiceQuantiles are the service time's quantiles at
	// stats.ServicePercentiles, in s, from the merged service histograms
	// (stats.Histogram.TailQuantile); nil when no served request completed or
	// no proxy measures them.
	ServiceQuantiles []float64
	// Service is the merged service histogram they are taken from: the served
	// requests' service times per bucket, in Latency's bounds (a proxy counts
	// them in its latency buckets), over the same pods (those of LatencySkipped
	// left out). Empty when no pod sent one.
	Service stats.Histogram
	// Completions counts the requests that completed, each once: a pulled
	// request completes at its puller and at its sender, and counts at the
	// sender. Served counts the completions that have a service time here.
	Completions, Served uint64
	Pods                int
	// Pooled is true when a pod or front of the interval reported the pooled data
	// plane (issue #20); the fields below are then meaningful.
	Pooled bool
	// The sidecars' overflow per second: accepted by the front (OverflowRate),
	// refused, failed (timeout or error); requests pulled; front replicas marked
	// suspect. OverflowShare is the share of arrivals answered through the front:
	// (OverflowRate − ExpiredRequeuedRate) / ArrivalRate (0 without arrivals).
	OverflowRate, OverflowRefusedRate, OverflowFailedRate, PulledRate, FrontFailureRate float64
	OverflowShare                                                                       float64
	// Per second: requests of a draining pod's local queue offered to a front and
	// taken by it (a subset of OverflowRate) or served by the pod after all;
	// accepted overflows a front gave back unseen and the sender served itself
	// (served locally after all) or answered with the front's 503.
	DrainPushedRate, DrainKeptRate, ExpiredRequeuedRate, ExpiredRelayedRate float64
	// The fronts' queue and waiting pulls at the interval's end, summed over
	// replicas, and their counts per second; Fronts is the replicas in the interval.
	FrontQueueLength, FrontWaitingPulls                                                 float64
	FrontAcceptedRate, FrontRefusedFullRate, FrontUnauthenticatedRate, FrontExpiredRate float64
	Fronts                                                                              int
	// The overflow decision time (the extra hop's cost, issue #20's ≤ 1 ms at p50)
	// and the wait in the front's queue, from the merged histograms, in s; 0 when
	// none was observed.
	OverflowDecisionP50, OverflowDecisionP95, FrontQueueWaitP50, FrontQueueWaitP95 float64

	// ArrivalRateSums are the ratevar.Sums of the workload's arrivals per whole
	// second over the cycle (issue #15): the pods' counts added second by second
	// (see arrivalSeries for which seconds). ArrivalRateCV2 is their
	// ratevar.CV2, the relative variance of the per-second rate beyond Poisson
	// noise (unbiased, so it may be slightly negative); it is meaningful only
	// when ArrivalRateCV2Valid, and 0 otherwise. ArrivalRateCarry is what the
	// next cycle needs of this one (WorkloadAfter). A workload's only.
	ArrivalRateSums  ratevar.Sums
	ArrivalRateCV2   float64
	ArrivalRateCarry RateCarry

	decisions, queueWaits stats.Histogram
}

// ArrivalRateCV2Valid says whether ArrivalRateCV2 is an estimate: the cycle had
// a pair of successive seconds known at every pod, with an arrival in it.
func (m Metrics) ArrivalRateCV2Valid() bool {
	return m.ArrivalRateSums.Pairs > 0 && m.ArrivalRateSums.Counts > 0
}

// Pod derives one pod's metrics from its interval.
func Pod(iv scrape.Interval) Metrics {
	m := combine(iv.Time(), []scrape.Interval{iv})
	m.ProxyTime = iv.End
	return m
}

// Workload derives a workload's metrics from its pods' intervals of one cycle. Rates
// add up (each pod's count over its own interval length); E[S] and its variance are
// pooled over all completions; the histograms are merged before taking percentiles.
func Workload(ivs []scrape.Interval) (Metrics, error) {
	return WorkloadAfter(ivs, NoCarry)
}

// RateCarry is what a workload's cycle leaves to the next one for its
// per-second arrival series: the newest second it counted, that second's
// summed count (ratevar.Missing: not known) and the pods it summed.
type RateCarry struct {
	Second, Count int64
	Pods          string
}

// NoCarry is the carry of a workload's first cycle: no second counted yet.
var NoCarry = RateCarry{Second: math.MinInt64, Count: ratevar.Missing}

// WorkloadAfter is Workload after a previous cycle that left prev (its
// ArrivalRateCarry): the per-second arrival series counts only the seconds
// after prev.Second, so that no second is counted in two cycles whatever pods
// each had, and when its first second is the next one, summed over the same
// pods, the pair they make counts too (no pair is lost between cycles).
func WorkloadAfter(ivs []scrape.Interval, prev RateCarry) (Metrics, error) {
	if len(ivs) == 0 {
		return Metrics{}, errors.New("aggregate: no intervals")
	}
	end := ivs[0].Time()
	for _, iv := range ivs {
		if iv.Time().After(end) {
			end = iv.Time()
		}
	}
	m := combine(end, ivs)
	first, counts := arrivalSeries(ivs, prev.Second)
	m.ArrivalRateCarry = prev
	if len(counts) == 0 {
		return m, nil
	}
	pods := podKeys(ivs)
	series := counts
	if prev.Second != math.MinInt64 && first == prev.Second+1 && prev.Count != ratevar.Missing && prev.Pods == pods {
		series = append([]int64{prev.Count}, counts...)
	}
	sums, err := ratevar.Of(series)
	if err != nil {
		return Metrics{}, fmt.Errorf("aggregate: arrivals per second: %w", err)
	}
	m.ArrivalRateSums = sums
	if m.ArrivalRateCV2Valid() {
		if m.ArrivalRateCV2, err = ratevar.CV2(sums); err != nil {
			return Metrics{}, fmt.Errorf("aggregate: arrivals per second: %w", err)
		}
	}
	m.ArrivalRateCarry = RateCarry{Second: first + int64(len(counts)) - 1, Count: counts[len(counts)-1], Pods: pods}
	return m, nil
}

// podKeys names the pods (not the fronts) of a cycle, sorted: a pair of
// seconds from two cycles is a pair of the same series only over the same pods.
func podKeys(ivs []scrape.Interval) string {
	var keys []string
	for _, iv := range ivs {
		if !iv.Front {
			keys = append(keys, iv.Key())
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, "\x00")
}

// staleAfter is how far, in seconds, the previous cycle's last second may lie
// beyond this cycle's and still be taken as counted (arrivalSeries): far more
// than the clock offsets between honest proxies.
const staleAfter = 60

// arrivalSeries is the workload's arrivals per whole second over a cycle: the
// sum, second by second, of its pods' arrivals_per_second counts (a front
// replica is no pod: it counts nothing here), oldest first from the Unix second
// first, Missing where a pod's count is. The seconds are those that
//
//   - end inside every pod's interval on that pod's clock (Start < s+1 ≤ End):
//     each second belongs to the interval it ends in, so a pod's consecutive
//     intervals share none and lose none (the one in progress at a scrape is
//     the next cycle's, whose series holds it whole), and two cycles that
//     share a pod never both count a second. A pod whose interval began
//     later than the others' (its series starts later, or it was rebased)
//     narrows the cycle to its own interval: the sum never leaves out the
//     arrivals of a pod of the cycle. (A pod still without an interval, in
//     its first cycle, is in no sum: that cycle's seconds after it started
//     miss its arrivals, a step that successive differences count once.);
//   - began after the Unix second after (the previous cycle's last), for the
//     cycles that share no pod (every pod replaced, or scraped late). A
//     last second more than staleAfter ahead of every pod's interval is from
//     a clock since stepped back, and ignored: it would hold the series back
//     for as long;
//   - are known (not Missing) at every pod: a second some pod did not count
//     is a hole in the sum, so it is Missing.
//
// Without a series from every pod there is none. WorkloadAfter joins the pair
// of seconds that spans two cycles.
func arrivalSeries(ivs []scrape.Interval, after int64) (first int64, counts []int64) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	pods := 0
	for _, iv := range ivs {
		if iv.Front {
			continue
		}
		if iv.ArrivalsPerSecond == nil {
			return 0, nil
		}
		pods++
		// The second in progress at Start ends inside the interval: it is this
		// interval's (the previous one stopped at the second before it).
		lo = max(lo, iv.Start.Unix(), iv.ArrivalsPerSecond.StartUnix())
		hi = min(hi, iv.End.Unix()-1, iv.ArrivalsPerSecond.EndUnix)
	}
	if pods == 0 {
		return 0, nil
	}
	if after < hi+staleAfter {
		lo = max(lo, after+1)
	}
	if lo > hi {
		return 0, nil
	}
	counts = make([]int64, hi-lo+1)
	for _, iv := range ivs {
		if iv.Front {
			continue
		}
		for i := range counts {
			c := iv.ArrivalsPerSecond.At(lo + int64(i))
			if c == ratevar.Missing || counts[i] == ratevar.Missing {
				counts[i] = ratevar.Missing
				continue
			}
			counts[i] += c
		}
	}
	return lo, counts
}

func combine(end time.Time, ivs []scrape.Interval) Metrics {
	m := Metrics{Time: end}
	var n, served, queued, pulled uint64
	var sum, sumSq, wait, pulledRate float64
	var merged, service stats.Histogram
	pods := 0
	for _, iv := range ivs {
		if !iv.Front {
			pods++
		}
	}
	m.Pods = pods
	bounds, skipped := latencyBounds(ivs)
	m.LatencySkipped = skipped
	for _, iv := range ivs {
		if iv.Front {
			// A front replica is no pod of the workload: only its queue counts.
			m.addFront(iv)
			continue
		}
		m.addPool(iv)
		if off := iv.ClockOffset.Seconds(); math.Abs(off) > math.Abs(m.ClockOffset) {
			m.ClockOffset = off
		}
		dt := iv.Seconds()
		if iv.PoolStats != nil {
			pulled += iv.PoolStats.Pulled
		}
		if dt > 0 {
			m.ArrivalRate += float64(iv.Arrivals) / dt
			if iv.PoolStats != nil {
				pulledRate += float64(iv.PoolStats.Pulled) / dt
			}
			m.ErrorRate += float64(iv.Errors5xx) / dt
			m.InFlightMean += iv.InFlightSeconds / dt
			m.BusyRatio += iv.BusySeconds / dt / float64(pods)
		}
		m.InFlight += float64(iv.InFlight)
		m.Waiting += float64(iv.Waiting)
		n += iv.Completions
		served += servedIn(iv)
		queued += iv.Queued
		sum += iv.ServiceSecondsSum
		sumSq += iv.ServiceSecondsSumSq
		wait += iv.QueueWaitSecondsSum
		if inBounds(iv.Latency, bounds) {
			merged = Merge(merged, iv.Latency)
			service = Merge(service, iv.Service)
		}
	}
	// A pull is counted when the puller has served it, after its arrival there:
	// over one interval the difference is off by at most the pulls in service at
	// its two ends, and over consecutive intervals it counts each request once.
	m.ArrivalRate = math.Max(0, m.ArrivalRate-pulledRate)
	m.Completions = n - min(pulled, n)
	m.Served = served
	if served > 0 {
		m.ServiceMean = sum / float64(served)
		m.ServiceVariance = math.Max(0, sumSq/float64(served)-m.ServiceMean*m.ServiceMean)
		if m.ServiceMean > 0 {
			m.ServiceSCV = m.ServiceVariance / (m.ServiceMean * m.ServiceMean)
		}
	}
	if queued > 0 {
		m.QueueWaitMean = wait / float64(queued)
	}
	m.Latency, m.Service = merged, service
	m.LatencyP50 = Quantile(merged, 0.50)
	m.LatencyP95 = Quantile(merged, 0.95)
	m.LatencyP99 = Quantile(merged, 0.99)
	if m.ArrivalRate > 0 {
		m.OverflowShare = math.Min(1, math.Max(0, m.OverflowRate-m.ExpiredRequeuedRate)/m.ArrivalRate)
	}
	m.OverflowDecisionP50, m.OverflowDecisionP95 = Quantile(m.decisions, 0.50), Quantile(m.decisions, 0.95)
	m.FrontQueueWaitP50, m.FrontQueueWaitP95 = Quantile(m.queueWaits, 0.50), Quantile(m.queueWaits, 0.95)
	m.decisions, m.queueWaits = stats.Histogram{}, stats.Histogram{}
	if service.Total() > 0 {
		m.ServiceQuantiles = make([]float64, len(stats.ServicePercentiles))
		for i, p := range stats.ServicePercentiles {
			m.ServiceQuantiles[i] = service.TailQuantile(p / 100)
		}
	}
	return m
}

// servedIn is the number of iv's completions that were served here (held a slot):
// the service histogram's count, which counts exactly the service times summed,
// when the proxy measures it. Without it (a proxy from before it), the
// completions less those that had no service time here: the 503s of a full queue
// and the accepted overflows relayed from a front, that is the accepted ones
// less those the front gave back unseen and the sender served itself
// (docs/pooling.md, "Accounting"); an overflow completes after its acceptance, so
// that count can fall short in one interval, never below 0.
func servedIn(iv scrape.Interval) uint64 {
	if len(iv.Service.Counts) > 0 {
		return iv.Service.Total()
	}
	n := float64(iv.Completions) - float64(iv.Rejected)
	if p := iv.PoolStats; p != nil {
		n -= float64(p.OverflowAccepted) - float64(p.ExpiredRequeued)
	}
	return uint64(math.Max(0, n))
}

// addPool adds a sidecar's overflow counts.
func (m *Metrics) addPool(iv scrape.Interval) {
	dt := iv.Seconds()
	if iv.PoolStats == nil || dt <= 0 {
		return
	}
	m.Pooled = true
	p := iv.PoolStats
	m.OverflowRate += float64(p.OverflowAccepted) / dt
	m.OverflowRefusedRate += float64(p.OverflowRefused) / dt
	m.OverflowFailedRate += float64(p.OverflowTimeout+p.OverflowError) / dt
	m.PulledRate += float64(p.Pulled) / dt
	m.FrontFailureRate += float64(p.FrontFailures) / dt
	m.DrainPushedRate += float64(p.DrainPushed) / dt
	m.DrainKeptRate += float64(p.DrainKept) / dt
	m.ExpiredRequeuedRate += float64(p.ExpiredRequeued) / dt
	m.ExpiredRelayedRate += float64(p.ExpiredRelayed) / dt
	m.decisions = Merge(m.decisions, p.OverflowDecision)
}

// addFront adds a front replica's queue and counts.
func (m *Metrics) addFront(iv scrape.Interval) {
	if off := iv.ClockOffset.Seconds(); math.Abs(off) > math.Abs(m.ClockOffset) {
		m.ClockOffset = off
	}
	m.Fronts++
	m.Pooled = true
	f := iv.FrontStats
	dt := iv.Seconds()
	if f == nil || dt <= 0 {
		return
	}
	m.FrontQueueLength += float64(max(f.QueueLength, 0))
	m.FrontWaitingPulls += float64(max(f.WaitingPulls, 0))
	m.FrontAcceptedRate += float64(f.Accepted) / dt
	m.FrontRefusedFullRate += float64(f.RefusedFull) / dt
	m.FrontUnauthenticatedRate += float64(f.Unauthenticated) / dt
	m.FrontExpiredRate += float64(f.Expired) / dt
	m.queueWaits = Merge(m.queueWaits, f.QueueWait)
}

// Check returns an error naming the first quantity that is not a finite number ≥ 0
// (ClockOffset may be negative), or nil. Validated /stats documents cannot produce one,
// but the points written from these metrics must never carry one: InfluxDB cannot
// store it.
func (m Metrics) Check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"arrival_rate", m.ArrivalRate}, {"error_rate", m.ErrorRate}, {"service_mean_seconds", m.ServiceMean},
		{"service_variance", m.ServiceVariance}, {"service_scv", m.ServiceSCV}, {"queue_wait_mean_seconds", m.QueueWaitMean},
		{"in_flight_mean", m.InFlightMean}, {"busy_ratio", m.BusyRatio}, {"latency_p50_seconds", m.LatencyP50},
		{"latency_p95_seconds", m.LatencyP95}, {"latency_p99_seconds", m.LatencyP99},
		{"overflow_rate", m.OverflowRate}, {"overflow_share", m.OverflowShare}, {"overflow_refused_rate", m.OverflowRefusedRate},
		{"overflow_failed_rate", m.OverflowFailedRate}, {"pulled_rate", m.PulledRate}, {"front_failure_rate", m.FrontFailureRate},
		{"drain_pushed_rate", m.DrainPushedRate}, {"drain_kept_rate", m.DrainKeptRate},
		{"expired_requeued_rate", m.ExpiredRequeuedRate}, {"expired_relayed_rate", m.ExpiredRelayedRate},
		{"front_queue_length", m.FrontQueueLength}, {"front_waiting_pulls", m.FrontWaitingPulls},
		{"front_accepted_rate", m.FrontAcceptedRate}, {"front_refused_full_rate", m.FrontRefusedFullRate},
		{"front_unauthenticated_rate", m.FrontUnauthenticatedRate}, {"front_expired_rate", m.FrontExpiredRate},
		{"overflow_decision_p50_seconds", m.OverflowDecisionP50}, {"overflow_decision_p95_seconds", m.OverflowDecisionP95},
		{"front_queue_wait_p50_seconds", m.FrontQueueWaitP50}, {"front_queue_wait_p95_seconds", m.FrontQueueWaitP95},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("aggregate: %s is %v, want a finite number ≥ 0", f.name, f.v)
		}
	}
	if n := len(m.ServiceQuantiles); n != 0 && n != len(stats.ServicePercentiles) {
		return fmt.Errorf("aggregate: %d service quantiles, want %d", n, len(stats.ServicePercentiles))
	}
	for i, v := range m.ServiceQuantiles {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (i > 0 && v < m.ServiceQuantiles[i-1]) {
			return fmt.Errorf("aggregate: service quantile p%v is %v, want a finite number ≥ 0 and ≥ the one below", stats.ServicePercentiles[i], v)
		}
	}
	for _, h := range []struct {
		name string
		h    stats.Histogram
	}{{"workload latency histogram", m.Latency}, {"workload service histogram", m.Service}} {
		if err := checkHistogram(h.name, h.h); err != nil {
			return err
		}
	}
	if math.IsNaN(m.ClockOffset) || math.IsInf(m.ClockOffset, 0) {
		return fmt.Errorf("aggregate: clock_offset_seconds is %v, want a finite number", m.ClockOffset)
	}
	// An unbiased estimate, so it may be below 0, but never non-finite in a point.
	if math.IsNaN(m.ArrivalRateCV2) || math.IsInf(m.ArrivalRateCV2, 0) {
		return fmt.Errorf("aggregate: arrival_rate_cv2 is %v, want a finite number", m.ArrivalRateCV2)
	}
	return nil
}

// Merge adds b's counts to a's. A histogram with other bounds than the first one is
// left out (the scraper rebases on changed bounds, so within a cycle they agree unless
// proxies run with different bounds; those are then not merged). For the latency
// and service histograms combine does not leave that to the order of the pods:
// it chooses the bounds first and names the pods it leaves out (latencyBounds).
func Merge(a, b stats.Histogram) stats.Histogram {
	merged, err := a.Add(b)
	if err != nil {
		return a
	}
	return merged
}

// Quantile estimates the q-quantile of h as stats.Histogram.Quantile does (linear
// inside the bucket; the overflow bucket reports the last bound, a lower bound of the
// truth), but returns 0 for an empty histogram so that metrics stay NaN-free.
func Quantile(h stats.Histogram, q float64) float64 {
	v := h.Quantile(q)
	if math.IsNaN(v) {
		return 0
	}
	return v
}
