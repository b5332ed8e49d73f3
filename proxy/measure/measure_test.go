package measure

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/stats"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFake() (*fakeClock, *Recorder) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	return c, New(c.now, 0, 0)
}
func near(t *testing.T, want, got float64) { require.InDelta(t, want, got, 1e-9) }

func TestInFlightIntegralAndBusyTime(t *testing.T) {
	c, r := newFake()
	// Two overlapping requests: A from 1 s to 4 s, B from 2 s to 3 s; idle 0-1 s and 4-6 s.
	c.add(time.Second)
	aArr := r.Arrive()
	aBeg := r.Begin()
	c.add(time.Second)
	bArr := r.Arrive()
	bBeg := r.Begin()
	c.add(time.Second)
	r.End(bArr, bBeg, 10*time.Millisecond, 200, OK)
	c.add(time.Second)
	r.End(aArr, aBeg, 20*time.Millisecond, 200, OK)
	c.add(2 * time.Second)

	s := r.Snapshot()
	require.NoError(t, s.Validate())
	near(t, 4, s.InFlightSeconds) // 1·1 + 2·1 + 1·1
	near(t, 3, s.BusySeconds)
	near(t, 4, s.ServiceSecondsSum)    // 3 s + 1 s
	near(t, 10, s.ServiceSecondsSumSq) // 9 + 1
	near(t, 0.03, s.TTFBSecondsSum)
	require.Equal(t, uint64(2), s.Arrivals)
	require.Equal(t, uint64(2), s.Completions)
	require.Equal(t, uint64(2), s.Codes[1])
	require.Equal(t, int64(0), s.InFlight)
	require.Equal(t, 6.0, s.Time.Sub(s.StartTime).Seconds())
	// Little's law: mean concurrency over the 6 s = 4/6.
	near(t, 4.0/6.0, s.InFlightSeconds/s.Time.Sub(s.StartTime).Seconds())
}

func TestOutcomesAndCodes(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		outcome Outcome
		check   func(*testing.T, *Recorder)
	}{
		{"502", 502, UpstreamError, func(t *testing.T, r *Recorder) { require.Equal(t, uint64(1), r.Snapshot().UpstreamErrors) }},
		{"504", 504, UpstreamTimeout, func(t *testing.T, r *Recorder) { require.Equal(t, uint64(1), r.Snapshot().UpstreamTimeouts) }},
		{"cancel", 499, ClientCancel, func(t *testing.T, r *Recorder) { require.Equal(t, uint64(1), r.Snapshot().ClientCancels) }},
		{"404", 404, OK, func(t *testing.T, r *Recorder) { require.Equal(t, uint64(1), r.Snapshot().Codes[3]) }},
		{"101 upgrade", 101, OK, func(t *testing.T, r *Recorder) { require.Equal(t, uint64(1), r.Snapshot().Codes[0]) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := newFake()
			a := r.Arrive()
			b := r.Begin()
			r.End(a, b, 0, tt.code, tt.outcome)
			tt.check(t, r)
			require.NoError(t, r.Snapshot().Validate())
		})
	}
}

func TestQueueAndRejection(t *testing.T) {
	c, r := newFake()
	a := r.Arrive()
	r.StartWaiting()
	require.Equal(t, int64(1), r.Snapshot().Waiting)
	c.add(250 * time.Millisecond)
	r.StopWaiting(250 * time.Millisecond)
	b := r.Begin()
	c.add(time.Second)
	r.End(a, b, 0, 200, OK)
	rej := r.Arrive()
	r.Reject(rej)

	s := r.Snapshot()
	require.Equal(t, uint64(1), s.Queued)
	near(t, 0.25, s.QueueWaitSecondsSum)
	near(t, 1, s.ServiceSecondsSum) // queue wait is not service time
	require.Equal(t, uint64(1), s.Rejected)
	require.Equal(t, uint64(1), s.Codes[4])
	require.Equal(t, uint64(2), s.Completions)
	require.Equal(t, int64(0), s.Waiting)
}

// TestLatencySum: the latency sum is the sum of every latency the histogram counts,
// exactly: a served request's (its wait, the moment before its slot, and its
// service), a request relayed from a front (no service here), a rejected one, and
// one that came back from the front and was served here (from its first arrival).
// A request pulled from a front is served and completes here, but its latency and
// status code are its sender's to observe.
func TestLatencySum(t *testing.T) {
	c, r := newFake()
	r.EnablePool().Overflow(OverflowAccepted, time.Millisecond)
	served := r.Arrive()
	r.StartWaiting()
	c.add(200 * time.Millisecond)
	r.StopWaiting(200 * time.Millisecond)
	c.add(5 * time.Millisecond) // admitted, not yet in service
	began := r.Begin()
	c.add(time.Second)
	r.End(served, began, 0, 200, OK) // 1.205 s

	relayed := r.Arrive()
	c.add(300 * time.Millisecond)
	r.EndOverflowed(relayed, 200, OK) // 0.3 s, no service here

	rejected := r.Arrive()
	c.add(7 * time.Millisecond)
	r.Reject(rejected) // 7 ms

	back := r.Arrive()
	c.add(40 * time.Millisecond) // at the front, given back unseen
	began = r.Begin()
	c.add(60 * time.Millisecond)
	r.End(back, began, 0, 200, OK) // 0.1 s

	r.Arrive() // pulled from a front: served here, its latency observed at its sender
	began = r.Begin()
	c.add(2 * time.Second)
	r.EndPulled(began, time.Millisecond, UpstreamError)

	s := r.Snapshot()
	require.NoError(t, s.Validate())
	require.Equal(t, uint64(4), s.Latency.Total(), "the pulled request is not observed here")
	near(t, 1.205+0.3+0.007+0.1, s.LatencySecondsSum)
	near(t, 1.06+2, s.ServiceSecondsSum)
	require.Equal(t, uint64(3), s.Service.Total())
	near(t, 0.2, s.QueueWaitSecondsSum)
	require.Equal(t, uint64(5), s.Completions)
	require.Equal(t, uint64(1), s.Codes[4], "the rejected 503; the pulled request's code is its sender's")
	require.Equal(t, uint64(1), s.UpstreamErrors, "the pulled request's upstream failure is here")
	require.Zero(t, s.InFlight)
}

// TestEndPulledOutcomes: a pulled request's upstream failure counts where it was
// served, and it completes and its service time counts either way. (A broken
// relay of its response is the sender's to count: the puller records it as OK,
// TestPulledClientCancelCountedOnce.)
func TestEndPulledOutcomes(t *testing.T) {
	tests := []struct {
		outcome                               Outcome
		wantErrors, wantTimeouts, wantCancels uint64
	}{
		{outcome: OK},
		{outcome: UpstreamError, wantErrors: 1},
		{outcome: UpstreamTimeout, wantTimeouts: 1},
	}
	for _, tt := range tests {
		c, r := newFake()
		r.ArrivePulled()
		began := r.Begin()
		c.add(time.Second)
		r.EndPulled(began, time.Millisecond, tt.outcome)
		s := r.Snapshot()
		require.NoError(t, s.Validate())
		require.Equal(t, [3]uint64{tt.wantErrors, tt.wantTimeouts, tt.wantCancels}, [3]uint64{s.UpstreamErrors, s.UpstreamTimeouts, s.ClientCancels},
			"outcome %d: upstream errors, timeouts, client cancels", tt.outcome)
		require.Equal(t, uint64(1), s.Completions)
		require.Equal(t, uint64(1), s.Service.Total())
		near(t, 1, s.ServiceSecondsSum)
	}
}

func TestHistogramBucketsAreUpperInclusive(t *testing.T) {
	c, r := newFake()
	for _, d := range []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 101 * time.Microsecond, 2 * time.Minute} {
		a := r.Arrive()
		b := r.Begin()
		c.add(d)
		r.End(a, b, 0, 200, OK)
	}
	s := r.Snapshot()
	require.Equal(t, uint64(2), s.Latency.Counts[0], "50µs and exactly 100µs fall in (0, 100µs]")
	require.Equal(t, uint64(1), s.Latency.Counts[1])
	require.Equal(t, uint64(1), s.Latency.Counts[len(s.Latency.Counts)-1], "above the last bound")
	require.Equal(t, uint64(4), s.Latency.Total())
}

// TestServiceHistogram: service times (slot to end, no queue wait) go into
// the service histogram in the latency buckets; a rejected request, never
// served, is in the latency histogram only.
func TestServiceHistogram(t *testing.T) {
	c, r := newFake()
	a := r.Arrive()
	r.StartWaiting()
	c.add(300 * time.Millisecond)
	r.StopWaiting(300 * time.Millisecond)
	b := r.Begin()
	c.add(50 * time.Millisecond)
	r.End(a, b, 0, 200, OK) // latency 350 ms, service 50 ms
	a = r.Arrive()
	b = r.Begin()
	c.add(2 * time.Minute)
	r.End(a, b, 0, 200, OK) // beyond the last bound
	r.Reject(r.Arrive())
	s := r.Snapshot()
	require.NoError(t, s.Validate())
	require.Equal(t, s.Latency.Bounds, s.Service.Bounds)
	require.Equal(t, uint64(2), s.Service.Total())
	require.Equal(t, uint64(3), s.Latency.Total())
	require.Equal(t, uint64(1), s.Service.Counts[sort.SearchFloat64s(s.Service.Bounds, 0.05)], "50 ms of service, not 350 ms of latency")
	require.Equal(t, uint64(1), s.Service.Counts[len(s.Service.Counts)-1])
}

// TestSnapshotsValidUnderConcurrentRequests: snapshots taken while requests
// end on other goroutines always validate (the service histogram never
// counts more than the completions it read).
func TestSnapshotsValidUnderConcurrentRequests(t *testing.T) {
	r := New(nil, 0, 0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				a := r.Arrive()
				r.End(a, r.Begin(), 0, 200, OK)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		s := r.Snapshot()
		require.NoError(t, s.Validate())
		select {
		case <-done:
			require.Equal(t, uint64(8000), r.Snapshot().Service.Total())
			return
		default:
		}
	}
}

func TestSnapshotIdentity(t *testing.T) {
	_, r1 := newFake()
	_, r2 := newFake()
	s1, s2 := r1.Snapshot(), r1.Snapshot()
	require.Equal(t, s1.Seq+1, s2.Seq)
	require.Equal(t, s1.InstanceID, s2.InstanceID)
	require.NotEqual(t, s1.InstanceID, r2.Snapshot().InstanceID, "a restarted proxy has a new instance id")
}

func TestPoolAndFrontCounters(t *testing.T) {
	r := New(nil, 1, 10)
	require.Nil(t, r.Snapshot().Pool, "no pool section unless pooling is configured")
	require.Nil(t, r.Snapshot().Front)

	p := r.EnablePool()
	for range 3 {
		r.Arrive()
	}
	p.Overflow(OverflowAccepted, 2*time.Millisecond)
	p.Overflow(OverflowRefused, time.Millisecond)
	p.Overflow(OverflowTimeout, 25*time.Millisecond)
	p.Pulled()
	p.FrontFailure()
	p.FrontFailure()

	f := r.EnableFront()
	f.Accept()
	f.Accept()
	f.Accept()
	f.RefuseFull()
	f.Unauthenticated()
	f.PullWaiting(1)
	f.Dispatch(10 * time.Millisecond)
	f.Expire(3 * time.Second)

	s := r.Snapshot()
	require.NoError(t, s.Validate())
	require.Equal(t, stats.Pool{OverflowAccepted: 1, OverflowRefused: 1, OverflowTimeout: 1, Pulled: 1, FrontFailures: 2,
		OverflowDecision: s.Pool.OverflowDecision}, *s.Pool)
	require.Equal(t, uint64(3), s.Pool.OverflowDecision.Total())
	require.InDelta(t, 0.025, s.Pool.OverflowDecision.Quantile(1), 1e-9, "the slowest decision is in the (0.02, 0.025] bucket")
	require.Equal(t, stats.Front{QueueLength: 1, WaitingPulls: 1, Accepted: 3, RefusedFull: 1, Unauthenticated: 1, Dispatched: 1, Expired: 1,
		QueueWait: s.Front.QueueWait}, *s.Front)
	require.Equal(t, uint64(2), s.Front.QueueWait.Total())
}

// TestFrontSnapshotConsistentUnderRace: snapshots taken while requests are accepted
// and dispatched concurrently always validate.
func TestFrontSnapshotConsistentUnderRace(t *testing.T) {
	r := New(nil, 1, 10)
	f, p := r.EnableFront(), r.EnablePool()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20000 {
			r.Arrive()
			f.Accept()
			p.Overflow(OverflowAccepted, time.Millisecond)
			f.Dispatch(time.Millisecond)
		}
	}()
	for {
		select {
		case <-done:
			require.NoError(t, r.Snapshot().Validate())
			return
		default:
			require.NoError(t, r.Snapshot().Validate())
		}
	}
}
