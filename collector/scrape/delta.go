// Package scrape reads every proxy's /stats document and turns consecutive documents
// into per-interval deltas that stay correct across proxy restarts and counter resets.
package scrape

import (
	"fmt"
	"slices"
	"time"

	"github.com/qas-dev/qas/proxy/stats"
)

// Target is one proxy to scrape and the pod it measures.
type Target struct {
	Namespace, Workload, Pod, Node string
	// URL is the proxy's /stats address.
	URL string
	// Front marks a replica of Workload's pooled front (qas-proxy --mode front), not
	// one of its pods: only its front counters count, toward the workload.
	Front bool
}

// Key identifies a target across cycles.
func (t Target) Key() string { return t.Namespace + "/" + t.Pod }

// Interval is what one pod's proxy measured between two snapshots of the same process.
type Interval struct {
	Target
	// Start and End are the two snapshots' times on the proxy's clock: their difference
	// is the interval's length, whatever that clock's offset.
	Start, End time.Time
	// ScrapedAt is when the collector received the second snapshot, on the collector's
	// clock: the time the interval's points carry, so that one node's clock ahead or
	// behind does not move its pods' points away from the others' (zero: use End).
	ScrapedAt time.Time
	// ClockOffset is the proxy's clock minus the collector's at the second scrape
	// (positive: the proxy is ahead), taken against the middle of the request.
	ClockOffset time.Duration
	// Counters over the interval.
	Arrivals, Completions, Queued, Rejected, Errors5xx          uint64
	ServiceSecondsSum, ServiceSecondsSumSq, QueueWaitSecondsSum float64
	InFlightSeconds, BusySeconds                                float64
	// InFlight and Waiting are the proxy's gauges at End: requests in service
	// and requests waiting for a concurrency slot. A backlog shows in them
	// before it shows in the interval's rates.
	InFlight, Waiting int64
	// Latency is the histogram of the interval's completions; Service that of
	// their service times (empty when the proxy does not measure them).
	Latency, Service stats.Histogram
	// PoolStats and FrontStats are the pooled data plane's counters over the interval (and the
	// front's gauges at End), present when the snapshots carry them (issue #20).
	PoolStats  *PoolCounts
	FrontStats *FrontCounts
	// ArrivalsPerSecond is the second snapshot's series of client arrivals per
	// whole second on the proxy's clock (issue #15); nil when the proxy does not
	// send one or sent an invalid one. It is no delta: its seconds are dated,
	// and the aggregate takes those inside the interval.
	ArrivalsPerSecond *stats.PerSecond
}

// PoolCounts are a sidecar's overflow and pull counts over an interval.
type PoolCounts struct {
	OverflowAccepted, OverflowRefused, OverflowTimeout, OverflowError uint64
	Pulled, FrontFailures                                             uint64
	// DrainPushed and DrainKept split the requests a draining pod offered from its
	// local queue (taken by a front, or served here after all); ExpiredRequeued
	// and ExpiredRelayed split the accepted overflows a front gave back unseen
	// (served here, or its 503 relayed). A proxy that omits them (older, or
	// while they are zero) counts 0.
	DrainPushed, DrainKept, ExpiredRequeued, ExpiredRelayed uint64
	// OverflowDecision is the histogram of the interval's overflow decision times.
	OverflowDecision stats.Histogram
}

// FrontCounts are a front replica's counts over an interval and its gauges at its end.
type FrontCounts struct {
	QueueLength, WaitingPulls                                   int64
	Accepted, RefusedFull, Unauthenticated, Dispatched, Expired uint64
	// QueueWait is the histogram of the interval's waits in the front's queue.
	QueueWait stats.Histogram
}

// histogramDelta is cur minus prev (prev with no bounds counts as empty); ok is false
// when the bounds differ, and sub records a count that went backwards.
func histogramDelta(prev, cur stats.Histogram, sub func(a, b uint64) uint64) (stats.Histogram, bool) {
	out := stats.Histogram{Bounds: cur.Bounds, Counts: make([]uint64, len(cur.Counts))}
	if len(prev.Bounds) == 0 && len(prev.Counts) == 0 {
		copy(out.Counts, cur.Counts)
		return out, true
	}
	if !slices.Equal(prev.Bounds, cur.Bounds) || len(prev.Counts) != len(cur.Counts) {
		return stats.Histogram{}, false
	}
	for i := range cur.Counts {
		out.Counts[i] = sub(cur.Counts[i], prev.Counts[i])
	}
	return out, true
}

// Seconds is the interval's length.
func (iv Interval) Seconds() float64 { return iv.End.Sub(iv.Start).Seconds() }

// Time is the time the interval's points carry: ScrapedAt, or End when it is unknown.
func (iv Interval) Time() time.Time {
	if iv.ScrapedAt.IsZero() {
		return iv.End
	}
	return iv.ScrapedAt
}

// Rebase reasons: why a snapshot starts a new baseline instead of producing an interval.
const (
	ReasonFirst           = "first_snapshot"
	ReasonRestart         = "process_restart"
	ReasonCounterDecrease = "counter_decrease"
	ReasonBoundsChanged   = "histogram_bounds_changed"
	ReasonTimeNotAdvanced = "time_not_advanced"
	// ReasonClockStepped: a newer snapshot (higher seq) of the same process whose time
	// is not after the baseline's: the proxy's clock stepped back (an NTP correction of
	// a clock that was ahead).
	ReasonClockStepped = "clock_stepped_back"
)

// Delta returns the interval from prev to cur, or the reason cur must become the new
// baseline (a restart, a counter that went backwards, changed histogram bounds, a
// clock that did not advance). Both snapshots must be valid (stats.Decode checks).
func Delta(t Target, prev, cur stats.Snapshot) (Interval, string) {
	if cur.InstanceID != prev.InstanceID || !cur.StartTime.Equal(prev.StartTime) {
		return Interval{}, ReasonRestart
	}
	if !cur.Time.After(prev.Time) {
		return Interval{}, ReasonTimeNotAdvanced
	}
	// The service histogram has the latency's buckets when present (stats
	// validates it); within one process it is present in both or neither.
	if len(cur.Service.Counts) != len(prev.Service.Counts) {
		return Interval{}, ReasonBoundsChanged
	}
	iv := Interval{Target: t, Start: prev.Time, End: cur.Time, InFlight: cur.InFlight, Waiting: cur.Waiting,
		ArrivalsPerSecond: cur.ArrivalsPerSecond}
	ok := true
	sub := func(a, b uint64) uint64 {
		if a < b {
			ok = false
			return 0
		}
		return a - b
	}
	subf := func(a, b float64) float64 {
		if a < b {
			ok = false
			return 0
		}
		return a - b
	}
	iv.Arrivals = sub(cur.Arrivals, prev.Arrivals)
	iv.Completions = sub(cur.Completions, prev.Completions)
	iv.Queued = sub(cur.Queued, prev.Queued)
	iv.Rejected = sub(cur.Rejected, prev.Rejected)
	iv.Errors5xx = sub(cur.Codes[4], prev.Codes[4])
	for i := range cur.Codes {
		sub(cur.Codes[i], prev.Codes[i])
	}
	iv.ServiceSecondsSum = subf(cur.ServiceSecondsSum, prev.ServiceSecondsSum)
	iv.ServiceSecondsSumSq = subf(cur.ServiceSecondsSumSq, prev.ServiceSecondsSumSq)
	iv.QueueWaitSecondsSum = subf(cur.QueueWaitSecondsSum, prev.QueueWaitSecondsSum)
	iv.InFlightSeconds = subf(cur.InFlightSeconds, prev.InFlightSeconds)
	iv.BusySeconds = subf(cur.BusySeconds, prev.BusySeconds)
	// Not used (yet), but a counter all the same: one that falls is a restart in
	// disguise. Within one process it is present in both documents or in neither.
	subf(cur.LatencySecondsSum, prev.LatencySecondsSum)
	var same bool
	if iv.Latency, same = histogramDelta(prev.Latency, cur.Latency, sub); !same {
		return Interval{}, ReasonBoundsChanged
	}
	if cur.Pool != nil {
		before := orZero(prev.Pool)
		iv.PoolStats = &PoolCounts{
			OverflowAccepted: sub(cur.Pool.OverflowAccepted, before.OverflowAccepted),
			OverflowRefused:  sub(cur.Pool.OverflowRefused, before.OverflowRefused),
			OverflowTimeout:  sub(cur.Pool.OverflowTimeout, before.OverflowTimeout),
			OverflowError:    sub(cur.Pool.OverflowError, before.OverflowError),
			Pulled:           sub(cur.Pool.Pulled, before.Pulled),
			FrontFailures:    sub(cur.Pool.FrontFailures, before.FrontFailures),
			DrainPushed:      sub(cur.Pool.DrainPushed, before.DrainPushed),
			DrainKept:        sub(cur.Pool.DrainKept, before.DrainKept),
			ExpiredRequeued:  sub(cur.Pool.ExpiredRequeued, before.ExpiredRequeued),
			ExpiredRelayed:   sub(cur.Pool.ExpiredRelayed, before.ExpiredRelayed),
		}
		h, same := histogramDelta(before.OverflowDecision, cur.Pool.OverflowDecision, sub)
		if !same {
			return Interval{}, ReasonBoundsChanged
		}
		iv.PoolStats.OverflowDecision = h
	}
	if cur.Front != nil {
		before := orZero(prev.Front)
		iv.FrontStats = &FrontCounts{
			QueueLength: cur.Front.QueueLength, WaitingPulls: cur.Front.WaitingPulls,
			Accepted:        sub(cur.Front.Accepted, before.Accepted),
			RefusedFull:     sub(cur.Front.RefusedFull, before.RefusedFull),
			Unauthenticated: sub(cur.Front.Unauthenticated, before.Unauthenticated),
			Dispatched:      sub(cur.Front.Dispatched, before.Dispatched),
			Expired:         sub(cur.Front.Expired, before.Expired),
		}
		h, same := histogramDelta(before.QueueWait, cur.Front.QueueWait, sub)
		if !same {
			return Interval{}, ReasonBoundsChanged
		}
		iv.FrontStats.QueueWait = h
	}
	if len(cur.Service.Counts) > 0 {
		if iv.Service, same = histogramDelta(prev.Service, cur.Service, sub); !same {
			return Interval{}, ReasonBoundsChanged
		}
	}
	if !ok {
		return Interval{}, ReasonCounterDecrease
	}
	return iv, ""
}

// orZero is *p, or the zero value when p is nil: a baseline without an optional
// section (pool, front) counts that section from zero.
func orZero[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// Tracker keeps each target's last snapshot and turns new ones into intervals.
type Tracker struct {
	prev map[string]stats.Snapshot
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{prev: map[string]stats.Snapshot{}} }

// Observe records cur for t. It returns the interval since the previous snapshot, or
// ok=false and the reason cur became the new baseline.
func (tr *Tracker) Observe(t Target, cur stats.Snapshot) (iv Interval, reason string, ok bool) {
	prev, seen := tr.prev[t.Key()]
	if !seen {
		tr.prev[t.Key()] = cur
		return Interval{}, ReasonFirst, false
	}
	iv, reason = Delta(t, prev, cur)
	if reason == ReasonTimeNotAdvanced {
		if cur.Seq <= prev.Seq {
			return Interval{}, reason, false // a stale or replayed document: keep the older baseline
		}
		// The proxy served a newer document dated no later: its clock stepped back.
		// Keeping the older baseline would leave the pod without intervals until the
		// clock caught up with it (minutes, for a clock corrected from minutes ahead).
		tr.prev[t.Key()] = cur
		return Interval{}, ReasonClockStepped, false
	}
	tr.prev[t.Key()] = cur
	return iv, reason, reason == ""
}

// Forget drops targets not in keep (pods that went away).
func (tr *Tracker) Forget(keep map[string]bool) {
	for k := range tr.prev {
		if !keep[k] {
			delete(tr.prev, k)
		}
	}
}

// String describes the interval for logs.
func (iv Interval) String() string {
	return fmt.Sprintf("%s %s..%s arrivals=%d completions=%d", iv.Key(), iv.Start.Format(time.RFC3339Nano),
		iv.End.Format(time.RFC3339Nano), iv.Arrivals, iv.Completions)
}
