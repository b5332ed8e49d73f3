// Package measure counts what qas-proxy observes of each request: arrivals,
// completions, service and queue time, in-flight time integrals and a latency histogram.
// It is on every request's path, so recording takes no lock except one short critical
// section for the in-flight integral, and allocates nothing.
package measure

import (
	"crypto/rand"
	"encoding/hex"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qas-dev/qas/proxy/stats"
)

// Clock returns the current time; tests inject a fake one.
type Clock func() time.Time

// Recorder holds one proxy process's counters. The zero value is not usable: call New.
type Recorder struct {
	now        Clock
	instanceID string
	start      time.Time
	seq        atomic.Uint64

	concurrencyLimit, queueLimit int

	arrivals, completions atomic.Uint64
	// pulledArrivals counts the arrivals pulled from a front (a subset of
	// arrivals): the per-second series leaves them out.
	pulledArrivals   atomic.Uint64
	queued, rejected atomic.Uint64
	upstreamErrors   atomic.Uint64
	upstreamTimeouts atomic.Uint64
	clientCancels    atomic.Uint64
	codes            [5]atomic.Uint64
	waiting          atomic.Int64

	// Float sums are kept in nanoseconds (service, TTFB, queue wait, latency) so
	// they can be atomic integers; the sum of squares is kept in µs² to stay within
	// uint64 for about 5.8e15 s² of squared service time.
	serviceNanos, ttfbNanos, queueWaitNanos atomic.Uint64
	serviceSqMicros                         atomic.Uint64
	// latencyNanos sums every latency the histogram observes: service plus queue
	// wait does not, for a request relayed from a front (no service here), the
	// time an overflow attempt took before the request queued here, or a request
	// the front gave back and this proxy served.
	latencyNanos atomic.Uint64

	bounds  []float64
	buckets []atomic.Uint64
	// service counts service times in the same buckets.
	service []atomic.Uint64

	// Set when the pooled data plane is configured (sidecar) or in front mode.
	pool  atomic.Pointer[PoolCounters]
	front atomic.Pointer[FrontCounters]
	// Set by CountPerSecond.
	perSecond atomic.Pointer[PerSecond]

	// In-flight integral: guarded by mu, updated at every transition.
	mu            sync.Mutex
	inFlight      int64
	lastChange    time.Time
	inFlightNanos float64 // ∫ in-flight dt, ns
	busyNanos     float64 // time with in-flight > 0, ns

	// refused counts the requests the proxy refused itself, by reason (Refuse):
	// last, so that the counters every request touches keep their layout.
	refused [numRefusals]atomic.Uint64
}

// New returns a Recorder whose clock starts now. limit and queue are the configured
// concurrency limit k and queue bound, reported in snapshots (0 = none).
func New(now Clock, limit, queue int) *Recorder {
	if now == nil {
		now = time.Now
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	t := now()
	r := &Recorder{
		now: now, instanceID: hex.EncodeToString(id), start: t, lastChange: t,
		concurrencyLimit: limit, queueLimit: queue,
		bounds:  stats.DefaultLatencyBounds,
		buckets: make([]atomic.Uint64, len(stats.DefaultLatencyBounds)+1),
		service: make([]atomic.Uint64, len(stats.DefaultLatencyBounds)+1),
	}
	return r
}

// Now returns the recorder's clock reading.
func (r *Recorder) Now() time.Time { return r.now() }

// Arrive counts a request accepted by the proxy and returns its arrival time.
func (r *Recorder) Arrive() time.Time {
	r.arrivals.Add(1)
	return r.now()
}

// ArrivePulled counts a request pulled from a shared front to be served here:
// an arrival, but not one from this pod's clients (its sender counted it as
// its own), so the per-second series leaves it out.
func (r *Recorder) ArrivePulled() time.Time {
	// Arrivals first, and clientArrivals reads the pulled count first: it never
	// sees a pulled count above the arrivals it reads. Between the two adds it
	// takes this arrival for a client's; the per-second counter keeps its
	// cumulative count from falling, so the next second gives it back.
	r.arrivals.Add(1)
	r.pulledArrivals.Add(1)
	return r.now()
}

// clientArrivals is the cumulative count of the arrivals from clients: all of
// them but the pulled ones.
func (r *Recorder) clientArrivals() uint64 {
	pulled := r.pulledArrivals.Load()
	all := r.arrivals.Load()
	return all - min(pulled, all)
}

// StartWaiting and StopWaiting bracket a request's wait for a concurrency slot.
func (r *Recorder) StartWaiting() { r.waiting.Add(1) }

// StopWaiting ends a wait of d; admitted says whether the request got a slot.
func (r *Recorder) StopWaiting(d time.Duration) {
	r.waiting.Add(-1)
	r.queued.Add(1)
	r.queueWaitNanos.Add(uint64(max(d, 0)))
}

// LeaveWaiting ends a wait without counting it: the request left the queue
// untouched to be offered elsewhere (a draining pod's queue pushed to a shared
// front); if it comes back, its whole wait is counted then.
func (r *Recorder) LeaveWaiting() { r.waiting.Add(-1) }

// Reject counts a request turned away because the queue was full. It also completes
// the request, with a 503.
func (r *Recorder) Reject(arrived time.Time) {
	r.rejected.Add(1)
	r.completions.Add(1)
	r.codes[4].Add(1)
	r.observeLatency(r.now().Sub(arrived))
}

// Begin marks the start of service (the request holds a slot and goes upstream) and
// returns the service start time.
func (r *Recorder) Begin() time.Time {
	r.mu.Lock()
	t := r.now()
	r.advance(t)
	r.inFlight++
	r.mu.Unlock()
	return t
}

// advance accumulates the integrals up to t. r.mu must be held.
func (r *Recorder) advance(t time.Time) {
	dt := float64(t.Sub(r.lastChange))
	if dt > 0 {
		r.inFlightNanos += dt * float64(r.inFlight)
		if r.inFlight > 0 {
			r.busyNanos += dt
		}
		r.lastChange = t
	}
}

// Outcome classifies a finished request beyond its status code.
type Outcome uint8

const (
	// OK: the upstream answered (any status).
	OK Outcome = iota
	// UpstreamError: the upstream could not be reached or broke the connection (502).
	UpstreamError
	// UpstreamTimeout: the upstream did not answer in time (504).
	UpstreamTimeout
	// ClientCancel: the client went away before the response ended.
	ClientCancel
)

// End records a request that began service at began and arrived at arrived, with
// time to first byte ttfb (0 if none was sent), status code and outcome.
func (r *Recorder) End(arrived, began time.Time, ttfb time.Duration, code int, outcome Outcome) {
	r.end(arrived, began, ttfb, code, outcome, true)
}

// EndPulled records a request pulled from a shared front and served here (issue
// #20) as End does, except for what its client saw: its client waited at the
// sender, which observes its latency and status code (EndOverflowed), so a
// workload's merged latency histogram and status codes count each request once,
// as its client saw it. Its service time, time in flight, completion and
// upstream failure (outcome) count here, where it was served.
func (r *Recorder) EndPulled(began time.Time, ttfb time.Duration, outcome Outcome) {
	r.end(time.Time{}, began, ttfb, 0, outcome, false)
}

// end records a request's end; client says whether its latency and code are this
// proxy's to observe (not for a pulled request: code is then 0, counted nowhere).
func (r *Recorder) end(arrived, began time.Time, ttfb time.Duration, code int, outcome Outcome, client bool) {
	r.mu.Lock()
	t := r.now()
	r.advance(t)
	r.inFlight--
	r.mu.Unlock()

	service := t.Sub(began)
	r.serviceNanos.Add(uint64(max(service, 0)))
	us := float64(service) / float64(time.Microsecond)
	r.serviceSqMicros.Add(uint64(us * us))
	r.ttfbNanos.Add(uint64(max(ttfb, 0)))
	r.complete(code, outcome)
	// After the completion: a snapshot that reads the service counts before
	// the completions then never sees more service times than completions.
	r.service[r.bucket(service)].Add(1)
	if client {
		r.observeLatency(t.Sub(arrived))
	}
}

// EndOverflowed records a request this proxy sent to a shared front and relayed
// (issue #20): it completes with its status code, outcome and latency (what its
// client felt), but adds no service time and was never in flight here, since the pod
// that pulled it served it and counts its service (as a pulled arrival).
func (r *Recorder) EndOverflowed(arrived time.Time, code int, outcome Outcome) {
	r.complete(code, outcome)
	r.observeLatency(r.now().Sub(arrived))
}

// complete counts a finished request by its status class (none for code 0) and
// outcome, and as a completion.
func (r *Recorder) complete(code int, outcome Outcome) {
	if c := code/100 - 1; c >= 0 && c < 5 {
		r.codes[c].Add(1)
	}
	switch outcome {
	case UpstreamError:
		r.upstreamErrors.Add(1)
	case UpstreamTimeout:
		r.upstreamTimeouts.Add(1)
	case ClientCancel:
		r.clientCancels.Add(1)
	}
	r.completions.Add(1)
}

// observeLatency adds d to the latency histogram and its sum (the sum first: a
// snapshot reads the buckets first, so its sum covers every observation it counts).
func (r *Recorder) observeLatency(d time.Duration) {
	r.latencyNanos.Add(uint64(max(d, 0)))
	r.buckets[r.bucket(d)].Add(1)
}

// bucket is the index of d's bucket: the first bound ≥ d, buckets being (lo, hi].
func (r *Recorder) bucket(d time.Duration) int { return sort.SearchFloat64s(r.bounds, d.Seconds()) }

// InFlight returns the requests being served now.
func (r *Recorder) InFlight() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// Snapshot returns the counters as the /stats document. Each call takes the next
// sequence number.
func (r *Recorder) Snapshot() stats.Snapshot {
	r.mu.Lock()
	t := r.now()
	r.advance(t)
	inFlight, inFlightNanos, busyNanos := r.inFlight, r.inFlightNanos, r.busyNanos
	r.mu.Unlock()

	// Service counts before Completions (End adds them in the other order), so
	// that they never exceed it.
	service := stats.Histogram{Bounds: r.bounds, Counts: make([]uint64, len(r.service))}
	for i := range r.service {
		service.Counts[i] = r.service[i].Load()
	}
	s := stats.Snapshot{
		Version: stats.SchemaVersion, InstanceID: r.instanceID, StartTime: r.start, Time: t,
		Seq:              r.seq.Add(1),
		ConcurrencyLimit: r.concurrencyLimit, QueueLimit: r.queueLimit,
		Completions:         r.completions.Load(),
		ServiceSecondsSum:   float64(r.serviceNanos.Load()) / 1e9,
		ServiceSecondsSumSq: float64(r.serviceSqMicros.Load()) / 1e12,
		TTFBSecondsSum:      float64(r.ttfbNanos.Load()) / 1e9,
		Queued:              r.queued.Load(),
		QueueWaitSecondsSum: float64(r.queueWaitNanos.Load()) / 1e9,
		Rejected:            r.rejected.Load(),
		InFlight:            inFlight,
		Waiting:             max(r.waiting.Load(), 0),
		InFlightSeconds:     inFlightNanos / 1e9,
		BusySeconds:         busyNanos / 1e9,
		UpstreamErrors:      r.upstreamErrors.Load(),
		UpstreamTimeouts:    r.upstreamTimeouts.Load(),
		ClientCancels:       r.clientCancels.Load(),
		Latency:             stats.Histogram{Bounds: r.bounds, Counts: make([]uint64, len(r.buckets))},
		Service:             service,
	}
	for i := range s.Codes {
		s.Codes[i] = r.codes[i].Load()
	}
	for i := range r.buckets {
		s.Latency.Counts[i] = r.buckets[i].Load()
	}
	s.LatencySecondsSum = float64(r.latencyNanos.Load()) / 1e9
	if p := r.pool.Load(); p != nil {
		s.Pool = p.snapshot()
	}
	if f := r.front.Load(); f != nil {
		s.Front = f.snapshot()
	}
	// Before Arrivals: every second counted was counted from arrivals already in it.
	if p := r.perSecond.Load(); p != nil {
		s.ArrivalsPerSecond = p.Snapshot()
	}
	// Arrivals is read last so that completions never exceed it in one snapshot.
	s.Arrivals = max(r.arrivals.Load(), s.Completions)
	if math.IsNaN(s.ServiceSecondsSumSq) {
		s.ServiceSecondsSumSq = 0
	}
	return s
}
