package measure

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/qas-dev/qas/proxy/stats"
)

// PoolCounters count a sidecar's use of the pooled data plane (stats.Pool). All
// methods are safe for concurrent use and allocate nothing.
type PoolCounters struct {
	accepted, refused, timeouts, errors atomic.Uint64
	pulled, frontFailures               atomic.Uint64
	drainPushed, drainKept              atomic.Uint64
	requeued, relayed                   atomic.Uint64
	decision                            histogram
}

// OverflowOutcome says how one overflow attempt ended.
type OverflowOutcome uint8

const (
	// OverflowAccepted: the front took the request.
	OverflowAccepted OverflowOutcome = iota
	// OverflowRefused: the front answered no.
	OverflowRefused
	// OverflowTimeout: no decision within the deadline.
	OverflowTimeout
	// OverflowError: connect or protocol failure before a decision.
	OverflowError
)

// Overflow records one overflow attempt that took d to decide.
func (p *PoolCounters) Overflow(o OverflowOutcome, d time.Duration) {
	switch o {
	case OverflowAccepted:
		p.accepted.Add(1)
	case OverflowRefused:
		p.refused.Add(1)
	case OverflowTimeout:
		p.timeouts.Add(1)
	default:
		p.errors.Add(1)
	}
	p.decision.observe(d)
}

// Pulled counts a request pulled from a front to be served here.
func (p *PoolCounters) Pulled() { p.pulled.Add(1) }

// DrainPushed counts a request of a draining pod's local queue that a front
// accepted and kept (it is counted in OverflowAccepted too); DrainKept one that
// was offered and is served here after all.
func (p *PoolCounters) DrainPushed() { p.drainPushed.Add(1) }

// DrainKept: see DrainPushed.
func (p *PoolCounters) DrainKept() { p.drainKept.Add(1) }

// Expired counts an accepted overflow that the front gave up unseen (no pod's app
// saw it): requeued if the sender served it locally, else the front's 503 was
// relayed to the client.
func (p *PoolCounters) Expired(requeued bool) {
	if requeued {
		p.requeued.Add(1)
	} else {
		p.relayed.Add(1)
	}
}

// FrontFailure counts a front replica marked suspect.
func (p *PoolCounters) FrontFailure() { p.frontFailures.Add(1) }

func (p *PoolCounters) snapshot() *stats.Pool {
	// The histogram is read before the counters it is bounded by (Overflow writes it
	// after them), so a snapshot never holds more decisions than attempts.
	decision := p.decision.snapshot()
	// Read before the accepted count they are subsets of (written after it).
	drainPushed, requeued, relayed := p.drainPushed.Load(), p.requeued.Load(), p.relayed.Load()
	return &stats.Pool{
		DrainPushed: drainPushed, DrainKept: p.drainKept.Load(), ExpiredRequeued: requeued, ExpiredRelayed: relayed,
		OverflowAccepted: p.accepted.Load(), OverflowRefused: p.refused.Load(),
		OverflowTimeout: p.timeouts.Load(), OverflowError: p.errors.Load(),
		Pulled: p.pulled.Load(), FrontFailures: p.frontFailures.Load(),
		OverflowDecision: decision,
	}
}

// FrontCounters count a front replica's shared queues (stats.Front).
type FrontCounters struct {
	queueLength, waitingPulls                                   atomic.Int64
	accepted, refusedFull, unauthenticated, dispatched, expired atomic.Uint64
	queueWait                                                   histogram
}

// Accept counts a request taken into a queue; the queue length rises by one.
func (f *FrontCounters) Accept() {
	f.accepted.Add(1)
	f.queueLength.Add(1)
}

// RefuseFull counts a request refused because its queue was full.
func (f *FrontCounters) RefuseFull() { f.refusedFull.Add(1) }

// Unauthenticated counts an overflow request or pull refused with 403.
func (f *FrontCounters) Unauthenticated() { f.unauthenticated.Add(1) }

// Dispatch counts a queued request handed to a pull after waiting d.
func (f *FrontCounters) Dispatch(d time.Duration) {
	f.queueLength.Add(-1)
	f.dispatched.Add(1)
	f.queueWait.observe(d)
}

// Expire counts a queued request that waited d, past the maximum wait, or whose
// sender went away before a pull took it.
func (f *FrontCounters) Expire(d time.Duration) {
	f.queueLength.Add(-1)
	f.expired.Add(1)
	f.queueWait.observe(d)
}

// PullWaiting adds delta (+1 or -1) to the pulls waiting for a request.
func (f *FrontCounters) PullWaiting(delta int64) { f.waitingPulls.Add(delta) }

func (f *FrontCounters) snapshot() *stats.Front {
	// Read in the reverse order of the writes (a request is counted accepted before it
	// leaves, and leaves before its wait is observed), so a snapshot never shows a
	// request leaving before it was accepted; the clamps below cover the gauges.
	s := &stats.Front{QueueWait: f.queueWait.snapshot()}
	s.QueueLength, s.WaitingPulls = max(f.queueLength.Load(), 0), max(f.waitingPulls.Load(), 0)
	s.RefusedFull, s.Unauthenticated = f.refusedFull.Load(), f.unauthenticated.Load()
	s.Expired = f.expired.Load()
	s.Dispatched = f.dispatched.Load()
	s.Accepted = f.accepted.Load()
	left := s.Dispatched + s.Expired
	s.Accepted = max(s.Accepted, left)
	s.QueueLength = min(s.QueueLength, int64(s.Accepted-left))
	s.QueueWait = capHistogram(s.QueueWait, left)
	return s
}

// histogram is a lock-free bucketed histogram.
type histogram struct {
	bounds  []float64
	buckets []atomic.Uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, buckets: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(d time.Duration) {
	h.buckets[sort.SearchFloat64s(h.bounds, d.Seconds())].Add(1)
}

func (h *histogram) snapshot() stats.Histogram {
	out := stats.Histogram{Bounds: h.bounds, Counts: make([]uint64, len(h.buckets))}
	for i := range h.buckets {
		out.Counts[i] = h.buckets[i].Load()
	}
	return out
}

// capHistogram trims observations beyond limit from the top bucket down: they are
// ones whose counter had not yet been read when the histogram was, a race the
// document must not show.
func capHistogram(h stats.Histogram, limit uint64) stats.Histogram {
	total := h.Total()
	for i := len(h.Counts) - 1; i >= 0 && total > limit; i-- {
		cut := min(h.Counts[i], total-limit)
		h.Counts[i] -= cut
		total -= cut
	}
	return h
}

// EnablePool makes snapshots carry pool counters and returns them.
func (r *Recorder) EnablePool() *PoolCounters {
	p := &PoolCounters{decision: newHistogram(stats.DefaultDecisionBounds)}
	r.pool.Store(p)
	return p
}

// EnableFront makes snapshots carry front counters and returns them.
func (r *Recorder) EnableFront() *FrontCounters {
	f := &FrontCounters{queueWait: newHistogram(stats.DefaultLatencyBounds)}
	r.front.Store(f)
	return f
}
