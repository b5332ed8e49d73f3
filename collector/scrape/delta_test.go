package scrape

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/stats"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func snap(at time.Duration, arrivals uint64, mod ...func(*stats.Snapshot)) stats.Snapshot {
	s := stats.Snapshot{
		Version: stats.SchemaVersion, InstanceID: "a", StartTime: t0, Time: t0.Add(at),
		Arrivals: arrivals, Completions: arrivals, ServiceSecondsSum: float64(arrivals) * 0.01,
		ServiceSecondsSumSq: float64(arrivals) * 0.0001, InFlightSeconds: float64(arrivals) * 0.01,
		Latency: stats.Histogram{Bounds: []float64{0.01, 0.1}, Counts: []uint64{arrivals, 0, 0}},
	}
	s.Codes[1] = arrivals
	for _, m := range mod {
		m(&s)
	}
	return s
}

// withService gives a snapshot a service histogram in its latency buckets,
// every one of n requests served within the first.
func withService(n uint64) func(*stats.Snapshot) {
	return func(s *stats.Snapshot) {
		s.Service = stats.Histogram{Bounds: s.Latency.Bounds, Counts: []uint64{n, 0, 0}}
	}
}

// TestDeltaOfTheServiceHistogram: the interval's service histogram is the
// difference of the two documents'; one that falls is a counter decrease, and
// a proxy without one gives none.
func TestDeltaOfTheServiceHistogram(t *testing.T) {
	tg := Target{Namespace: "ns", Pod: "p"}
	iv, reason := Delta(tg, snap(0, 100, withService(100)), snap(5*time.Second, 150, withService(150)))
	require.Empty(t, reason)
	require.Equal(t, []uint64{50, 0, 0}, iv.Service.Counts)
	require.Equal(t, []float64{0.01, 0.1}, iv.Service.Bounds)
	_, reason = Delta(tg, snap(0, 100, withService(100)), snap(5*time.Second, 150, withService(90)))
	require.Equal(t, ReasonCounterDecrease, reason)
	_, reason = Delta(tg, snap(0, 100, withService(100)), snap(5*time.Second, 150))
	require.Equal(t, ReasonBoundsChanged, reason)
	iv, reason = Delta(tg, snap(0, 100), snap(5*time.Second, 150))
	require.Empty(t, reason)
	require.Empty(t, iv.Service.Counts)
}

func TestDelta(t *testing.T) {
	tg := Target{Namespace: "ns", Pod: "p"}
	base := snap(0, 100)
	for _, tc := range []struct {
		name     string
		cur      stats.Snapshot
		reason   string
		arrivals uint64
		seconds  float64
	}{
		{"normal", snap(5*time.Second, 150), "", 50, 5},
		{"no traffic", snap(5*time.Second, 100), "", 0, 5},
		{"new instance id", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.InstanceID = "b" }), ReasonRestart, 0, 0},
		{"new start time", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.StartTime = t0.Add(time.Second) }), ReasonRestart, 0, 0},
		{"arrivals decrease", snap(5*time.Second, 90), ReasonCounterDecrease, 0, 0},
		{"float sum decreases", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.InFlightSeconds = 0.5 }), ReasonCounterDecrease, 0, 0},
		{"code counter decreases", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.Codes[1] = 1 }), ReasonCounterDecrease, 0, 0},
		{"histogram bucket decreases", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.Latency.Counts[0] = 1 }), ReasonCounterDecrease, 0, 0},
		{"bounds changed", snap(5*time.Second, 150, func(s *stats.Snapshot) { s.Latency.Bounds = []float64{0.02, 0.1} }), ReasonBoundsChanged, 0, 0},
		{"bounds count changed", snap(5*time.Second, 150, func(s *stats.Snapshot) {
			s.Latency = stats.Histogram{Bounds: []float64{0.1}, Counts: []uint64{150, 0}}
		}), ReasonBoundsChanged, 0, 0},
		{"same time", snap(0, 150), ReasonTimeNotAdvanced, 0, 0},
		{"service histogram appears", snap(5*time.Second, 150, withService(150)), ReasonBoundsChanged, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv, reason := Delta(tg, base, tc.cur)
			require.Equal(t, tc.reason, reason)
			require.Equal(t, tc.arrivals, iv.Arrivals)
			require.InDelta(t, tc.seconds, iv.Seconds(), 1e-9)
			if reason == "" {
				require.Equal(t, tc.arrivals, iv.Latency.Total())
				require.InDelta(t, float64(tc.arrivals)*0.01, iv.ServiceSecondsSum, 1e-9)
			}
		})
	}
}

func TestTrackerRebasesAcrossRestart(t *testing.T) {
	tr := NewTracker()
	tg := Target{Namespace: "ns", Pod: "p"}
	steps := []struct {
		s        stats.Snapshot
		ok       bool
		reason   string
		arrivals uint64
	}{
		{snap(0, 100), false, ReasonFirst, 0},
		{snap(5*time.Second, 160), true, "", 60},
		// restart: the new process counts from zero; the old baseline must not be used
		{snap(10*time.Second, 7, func(s *stats.Snapshot) { s.InstanceID = "b"; s.StartTime = t0.Add(8 * time.Second) }), false, ReasonRestart, 0},
		{snap(15*time.Second, 27, func(s *stats.Snapshot) { s.InstanceID = "b"; s.StartTime = t0.Add(8 * time.Second) }), true, "", 20},
		// a stale document (time not advanced) keeps the older baseline
		{snap(15*time.Second, 27, func(s *stats.Snapshot) { s.InstanceID = "b"; s.StartTime = t0.Add(8 * time.Second) }), false, ReasonTimeNotAdvanced, 0},
		{snap(20*time.Second, 37, func(s *stats.Snapshot) { s.InstanceID = "b"; s.StartTime = t0.Add(8 * time.Second) }), true, "", 10},
	}
	for i, st := range steps {
		iv, reason, ok := tr.Observe(tg, st.s)
		require.Equal(t, st.ok, ok, "step %d", i)
		require.Equal(t, st.reason, reason, "step %d", i)
		require.Equal(t, st.arrivals, iv.Arrivals, "step %d", i)
	}
	tr.Forget(map[string]bool{})
	_, reason, _ := tr.Observe(tg, snap(30*time.Second, 50))
	require.Equal(t, ReasonFirst, reason, "a forgotten pod starts over")
}

// FuzzDelta checks that any two valid documents give either a reason or an interval
// whose counters are consistent (no underflow wrapped into huge values).
func FuzzDelta(f *testing.F) {
	f.Add(uint64(100), uint64(150), 0.5, 0.7, int64(5e9), "a", "a")
	f.Add(uint64(100), uint64(10), 0.5, 0.1, int64(5e9), "a", "b")
	f.Fuzz(func(t *testing.T, a1, a2 uint64, f1, f2 float64, dt int64, id1, id2 string) {
		if id1 == "" || id2 == "" {
			return
		}
		prev := snap(0, a1, func(s *stats.Snapshot) { s.InstanceID = id1; s.InFlightSeconds = f1 })
		cur := snap(time.Duration(dt), a2, func(s *stats.Snapshot) { s.InstanceID = id2; s.InFlightSeconds = f2 })
		if prev.Validate() != nil || cur.Validate() != nil {
			return
		}
		iv, reason := Delta(Target{}, prev, cur)
		if reason != "" {
			require.Zero(t, iv.Arrivals)
			return
		}
		require.Equal(t, a2-a1, iv.Arrivals)
		require.LessOrEqual(t, iv.Arrivals, a2)
		require.GreaterOrEqual(t, iv.InFlightSeconds, 0.0)
		require.Positive(t, iv.Seconds())
	})
}

// TestTrackerRebasesWhenTheProxyClockStepsBack: a newer document (higher seq) dated
// before the baseline means the proxy's clock stepped back (corrected from ahead): it
// becomes the baseline at once, instead of leaving the pod without intervals until the
// clock catches up with the old baseline. A replayed document (same seq) still keeps
// the older baseline.
func TestTrackerRebasesWhenTheProxyClockStepsBack(t *testing.T) {
	tr := NewTracker()
	tg := Target{Namespace: "ns", Pod: "p"}
	seq := func(n uint64) func(*stats.Snapshot) { return func(s *stats.Snapshot) { s.Seq = n } }
	steps := []struct {
		s        stats.Snapshot
		ok       bool
		reason   string
		arrivals uint64
	}{
		{snap(3*time.Minute, 100, seq(1)), false, ReasonFirst, 0},
		{snap(3*time.Minute+5*time.Second, 110, seq(2)), true, "", 10},
		{snap(3*time.Minute+5*time.Second, 110, seq(2)), false, ReasonTimeNotAdvanced, 0}, // replayed
		{snap(10*time.Second, 120, seq(3)), false, ReasonClockStepped, 0},                 // corrected by -3 min
		{snap(15*time.Second, 125, seq(4)), true, "", 5},
	}
	for i, st := range steps {
		iv, reason, ok := tr.Observe(tg, st.s)
		require.Equal(t, st.ok, ok, "step %d", i)
		require.Equal(t, st.reason, reason, "step %d", i)
		require.Equal(t, st.arrivals, iv.Arrivals, "step %d", i)
	}
}

// TestDeltaCarriesTheQueueGauges: gauges are not differenced; the interval
// carries the newest snapshot's in-flight and waiting counts.
func TestDeltaCarriesTheQueueGauges(t *testing.T) {
	prev := snap(0, 100, func(s *stats.Snapshot) { s.InFlight, s.Waiting = 9, 30 })
	cur := snap(5*time.Second, 150, func(s *stats.Snapshot) { s.InFlight, s.Waiting = 2, 5 })
	iv, reason := Delta(Target{Namespace: "ns", Pod: "p"}, prev, cur)
	require.Empty(t, reason)
	require.Equal(t, int64(2), iv.InFlight)
	require.Equal(t, int64(5), iv.Waiting)
}

func TestDeltaPooledCounters(t *testing.T) {
	prev, cur := pooledSnapshots()
	iv, reason := Delta(Target{}, prev, cur)
	require.Empty(t, reason)
	require.Equal(t, &PoolCounts{OverflowAccepted: 5, OverflowRefused: 1, OverflowTimeout: 0, OverflowError: 2, Pulled: 7, FrontFailures: 1,
		OverflowDecision: stats.Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{6, 2, 0}}}, iv.PoolStats)
	require.Equal(t, &FrontCounts{QueueLength: 4, WaitingPulls: 1, Accepted: 9, RefusedFull: 3, Unauthenticated: 2, Dispatched: 6, Expired: 1,
		QueueWait: stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{3, 4, 0}}}, iv.FrontStats)

	// Other histogram bounds (a proxy upgraded in place) start a new baseline.
	moved := cur
	moved.Pool = &stats.Pool{}
	*moved.Pool = *cur.Pool
	moved.Pool.OverflowDecision = stats.Histogram{Bounds: []float64{0.002, 0.01}, Counts: []uint64{8, 2, 0}}
	_, reason = Delta(Target{}, prev, moved)
	require.Equal(t, ReasonBoundsChanged, reason)

	// A pooled counter that went backwards is a restart in disguise: a new baseline.
	cur.Pool.Pulled = 1
	_, reason = Delta(Target{}, prev, cur)
	require.Equal(t, ReasonCounterDecrease, reason)

	// Without the sections, nothing pooled.
	prev.Pool, prev.Front, cur.Pool, cur.Front = nil, nil, nil, nil
	iv, reason = Delta(Target{}, prev, cur)
	require.Empty(t, reason)
	require.Nil(t, iv.PoolStats)
	require.Nil(t, iv.FrontStats)
}

// TestDeltaLatencySum: the latency sum (absent from older proxies: 0 in both
// documents) is a counter like the others: one that falls starts a new baseline.
func TestDeltaLatencySum(t *testing.T) {
	withSum := func(v float64) func(*stats.Snapshot) { return func(s *stats.Snapshot) { s.LatencySecondsSum = v } }
	_, reason := Delta(Target{}, snap(0, 100, withSum(2)), snap(5*time.Second, 150, withSum(2.5)))
	require.Empty(t, reason)
	_, reason = Delta(Target{}, snap(0, 100), snap(5*time.Second, 150))
	require.Empty(t, reason, "a proxy that sends none")
	_, reason = Delta(Target{}, snap(0, 100, withSum(2)), snap(5*time.Second, 150, withSum(1)))
	require.Equal(t, ReasonCounterDecrease, reason)
}

// TestDeltaDrainAndExpiryCounters: the drain and expiry counters, omitted from
// /stats while zero (and by proxies that predate them), count from 0 when absent,
// give their deltas when present, and any of them going backwards starts a new
// baseline, as the other pooled counters do.
func TestDeltaDrainAndExpiryCounters(t *testing.T) {
	roundTrip := func(s stats.Snapshot) stats.Snapshot {
		var b bytes.Buffer
		require.NoError(t, json.NewEncoder(&b).Encode(s))
		out, err := stats.Decode(&b)
		require.NoError(t, err)
		return out
	}
	prev, cur := pooledSnapshots()
	prev.Front, cur.Front = nil, nil
	old := roundTrip(prev)
	raw, err := json.Marshal(prev.Pool)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "drain_", "omitted while zero")
	require.NotContains(t, string(raw), "expired_")

	cur.Pool.DrainPushed, cur.Pool.DrainKept, cur.Pool.ExpiredRequeued, cur.Pool.ExpiredRelayed = 2, 1, 1, 3
	iv, reason := Delta(Target{}, old, roundTrip(cur))
	require.Empty(t, reason)
	require.Equal(t, [4]uint64{2, 1, 1, 3}, [4]uint64{iv.PoolStats.DrainPushed, iv.PoolStats.DrainKept, iv.PoolStats.ExpiredRequeued, iv.PoolStats.ExpiredRelayed},
		"absent in the baseline: counted from 0")

	next := snap(10*time.Second, 30, func(s *stats.Snapshot) {
		p := *cur.Pool
		p.DrainPushed, p.DrainKept, p.ExpiredRequeued, p.ExpiredRelayed = 3, 4, 2, 3
		s.Pool = &p
	})
	iv, reason = Delta(Target{}, cur, next)
	require.Empty(t, reason)
	require.Equal(t, [4]uint64{1, 3, 1, 0}, [4]uint64{iv.PoolStats.DrainPushed, iv.PoolStats.DrainKept, iv.PoolStats.ExpiredRequeued, iv.PoolStats.ExpiredRelayed})

	for name, lower := range map[string]func(*stats.Pool){
		"drain_pushed":     func(p *stats.Pool) { p.DrainPushed = 1 },
		"drain_kept":       func(p *stats.Pool) { p.DrainKept = 0 },
		"expired_requeued": func(p *stats.Pool) { p.ExpiredRequeued = 0 },
		"expired_relayed":  func(p *stats.Pool) { p.ExpiredRelayed = 2 },
	} {
		t.Run(name, func(t *testing.T) {
			back := next
			p := *next.Pool
			lower(&p)
			back.Pool = &p
			_, reason := Delta(Target{}, cur, back)
			require.Equal(t, ReasonCounterDecrease, reason)
		})
	}
}

func pooledSnapshots() (prev, cur stats.Snapshot) {
	prev = snap(0, 10, func(s *stats.Snapshot) {
		s.Pool = &stats.Pool{OverflowAccepted: 1, OverflowRefused: 1, OverflowError: 1, Pulled: 3, FrontFailures: 2,
			OverflowDecision: stats.Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{2, 1, 0}}}
		s.Front = &stats.Front{QueueLength: 9, Accepted: 1, RefusedFull: 1, Dispatched: 1,
			QueueWait: stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{1, 0, 0}}}
	})
	cur = snap(5*time.Second, 20, func(s *stats.Snapshot) {
		s.Pool = &stats.Pool{OverflowAccepted: 6, OverflowRefused: 2, OverflowError: 3, Pulled: 10, FrontFailures: 3,
			OverflowDecision: stats.Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{8, 3, 0}}}
		s.Front = &stats.Front{QueueLength: 4, WaitingPulls: 1, Accepted: 10, RefusedFull: 4, Unauthenticated: 2, Dispatched: 7, Expired: 1,
			QueueWait: stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{4, 4, 0}}}
	})
	return prev, cur
}
