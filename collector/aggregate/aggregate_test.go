package aggregate

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/stats"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// interval builds a pod interval from individual service times, so the expected
// moments are computed independently of the code under test.
func interval(seconds float64, arrivals uint64, service []float64) scrape.Interval {
	iv := scrape.Interval{Start: t0, End: t0.Add(time.Duration(seconds * float64(time.Second))),
		Arrivals: arrivals, Completions: uint64(len(service)),
		Latency: stats.Histogram{Bounds: []float64{0.01, 0.02, 0.05}, Counts: make([]uint64, 4)}}
	for _, s := range service {
		iv.ServiceSecondsSum += s
		iv.ServiceSecondsSumSq += s * s
		iv.InFlightSeconds += s // each request is in service for s
		switch {
		case s <= 0.01:
			iv.Latency.Counts[0]++
		case s <= 0.02:
			iv.Latency.Counts[1]++
		case s <= 0.05:
			iv.Latency.Counts[2]++
		default:
			iv.Latency.Counts[3]++
		}
	}
	return iv
}

func TestWorkload(t *testing.T) {
	a := interval(5, 4, []float64{0.01, 0.01, 0.03, 0.03}) // mean 0.02, var 0.0001
	b := interval(10, 2, []float64{0.02, 0.02})            // mean 0.02, var 0
	for _, tc := range []struct {
		name                   string
		ivs                    []scrape.Interval
		lambda, mean, variance float64
		inFlight               float64
	}{
		{"one pod", []scrape.Interval{a}, 0.8, 0.02, 0.0001, 0.08 / 5},
		{"pooled over pods", []scrape.Interval{a, b}, 0.8 + 0.2, 0.02, 0.0001 * 4 / 6, 0.08/5 + 0.04/10},
		{"idle pod", []scrape.Interval{interval(5, 0, nil)}, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Workload(tc.ivs)
			require.NoError(t, err)
			require.InDelta(t, tc.lambda, m.ArrivalRate, 1e-12)
			require.InDelta(t, tc.mean, m.ServiceMean, 1e-12)
			require.InDelta(t, tc.variance, m.ServiceVariance, 1e-12)
			if tc.mean > 0 {
				require.InDelta(t, tc.variance/(tc.mean*tc.mean), m.ServiceSCV, 1e-9)
			}
			require.InDelta(t, tc.inFlight, m.InFlightMean, 1e-12)
			require.Equal(t, len(tc.ivs), m.Pods)
		})
	}
	_, err := Workload(nil)
	require.Error(t, err)
}

// Little's law: when every arrival completes within the interval, the time-average
// in service equals λ·E[S].
func TestLittlesLaw(t *testing.T) {
	service := []float64{0.01, 0.02, 0.03, 0.05, 0.04}
	m := Pod(interval(2, uint64(len(service)), service))
	require.InDelta(t, m.ArrivalRate*m.ServiceMean, m.InFlightMean, 1e-12)
}

func TestQuantile(t *testing.T) {
	h := stats.Histogram{Bounds: []float64{1, 2, 4}, Counts: []uint64{10, 10, 0, 0}}
	for _, tc := range []struct {
		name string
		h    stats.Histogram
		q    float64
		want float64
	}{
		{"first bucket interpolates from 0", h, 0.25, 0.5},
		{"bucket edge", h, 0.5, 1},
		{"second bucket", h, 0.75, 1.5},
		{"max", h, 1, 2},
		{"overflow reports the last bound", stats.Histogram{Bounds: []float64{1}, Counts: []uint64{1, 9}}, 0.95, 1},
		{"empty", stats.Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}, 0.5, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, Quantile(tc.h, tc.q), 1e-12)
		})
	}
}

func TestMergeSkipsOtherBounds(t *testing.T) {
	a := stats.Histogram{Bounds: []float64{1}, Counts: []uint64{1, 2}}
	m := Merge(stats.Histogram{}, a)
	m = Merge(m, a)
	require.Equal(t, []uint64{2, 4}, m.Counts)
	m = Merge(m, stats.Histogram{Bounds: []float64{2}, Counts: []uint64{5, 5}})
	require.Equal(t, []uint64{2, 4}, m.Counts)
	require.Equal(t, []uint64{1, 2}, a.Counts, "merging must not modify its inputs")
}

// FuzzQuantile checks quantiles are monotone in q and within [0, last bound].
func FuzzQuantile(f *testing.F) {
	f.Add(uint64(3), uint64(0), uint64(7), uint64(1), 0.3, 0.9)
	f.Fuzz(func(t *testing.T, c0, c1, c2, c3 uint64, q1, q2 float64) {
		if math.IsNaN(q1) || math.IsNaN(q2) || q1 <= 0 || q2 > 1 || q1 > q2 || c0+c1+c2+c3 > 1<<50 {
			return
		}
		h := stats.Histogram{Bounds: []float64{0.1, 0.2, 0.4}, Counts: []uint64{c0, c1, c2, c3}}
		a, b := Quantile(h, q1), Quantile(h, q2)
		require.LessOrEqual(t, a, b+1e-12)
		require.GreaterOrEqual(t, a, 0.0)
		require.LessOrEqual(t, b, 0.4)
	})
}

func TestMetricsCheckNamesTheField(t *testing.T) {
	ok := Pod(interval(1, 3, []float64{0.01, 0.02}))
	require.NoError(t, ok.Check())
	for _, tc := range []struct {
		name string
		mod  func(*Metrics)
		want string
	}{
		{"infinite rate", func(m *Metrics) { m.ArrivalRate = math.Inf(1) }, "arrival_rate is +Inf"},
		{"NaN scv", func(m *Metrics) { m.ServiceSCV = math.NaN() }, "service_scv is NaN"},
		{"negative in-flight", func(m *Metrics) { m.InFlightMean = -1 }, "in_flight_mean is -1"},
		{"infinite offset", func(m *Metrics) { m.ClockOffset = math.Inf(-1) }, "clock_offset_seconds is -Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok
			tc.mod(&m)
			require.ErrorContains(t, m.Check(), tc.want)
		})
	}
	m := ok
	m.ClockOffset = -180
	require.NoError(t, m.Check(), "a proxy clock behind is a finite offset, not an error")
}

// FuzzValidatedSnapshotsGiveFiniteMetrics: whatever two documents pass
// stats.Snapshot.Validate, the interval between them gives finite pod and workload
// metrics: the parser's bounds are what keep +Inf out of the points.
func FuzzValidatedSnapshotsGiveFiniteMetrics(f *testing.F) {
	f.Add(uint64(10), uint64(20), 1.0, 2.0, 1.0, 4.0, 0.5, 1.5, int64(1), int64(5_000_000_000))
	f.Add(uint64(1), uint64(1<<63), 0.0, 1.7976931348623157e308, 0.0, 1e300, 0.0, 1e308, int64(1), int64(1))
	f.Add(uint64(0), uint64(math.MaxUint64), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, int64(1), int64(5_000_000_000))
	f.Fuzz(func(t *testing.T, a1, a2 uint64, s1, s2, q1, q2, i1, i2 float64, up, dt int64) {
		start := t0
		snap := func(arrivals uint64, sum, sumSq, inFlight float64, at time.Time) stats.Snapshot {
			return stats.Snapshot{Version: stats.SchemaVersion, InstanceID: "x", StartTime: start, Time: at,
				Arrivals: arrivals, Completions: arrivals, ServiceSecondsSum: sum, ServiceSecondsSumSq: sumSq,
				InFlightSeconds: inFlight, BusySeconds: 0,
				Latency: stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{arrivals, 0, 0}}}
		}
		prevAt := start.Add(time.Duration(up))
		p, c := snap(a1, s1, q1, i1, prevAt), snap(a2, s2, q2, i2, prevAt.Add(time.Duration(dt)))
		if p.Validate() != nil || c.Validate() != nil {
			return
		}
		iv, reason := scrape.Delta(scrape.Target{Namespace: "ns", Workload: "w", Pod: "p"}, p, c)
		if reason != "" {
			return
		}
		require.NoError(t, Pod(iv).Check())
		wl, err := Workload([]scrape.Interval{iv, iv})
		require.NoError(t, err)
		require.NoError(t, wl.Check())
	})
}

// TestQueueGauges: the proxies' in-flight and waiting gauges at the interval's
// end reach the pod point as they are and add up over the workload's pods.
func TestQueueGauges(t *testing.T) {
	a := interval(5, 4, []float64{0.01})
	a.InFlight, a.Waiting = 3, 40
	b := interval(5, 4, []float64{0.01})
	b.InFlight, b.Waiting = 1, 0
	p := Pod(a)
	require.Equal(t, 3.0, p.InFlight)
	require.Equal(t, 40.0, p.Waiting)
	m, err := Workload([]scrape.Interval{a, b})
	require.NoError(t, err)
	require.Equal(t, 4.0, m.InFlight)
	require.Equal(t, 40.0, m.Waiting)
}

// TestPooledWorkload: the sidecars' overflow and pull counts add up as rates; a
// front replica adds only its queue and counts, and is no pod of the workload.
func TestPooledWorkload(t *testing.T) {
	// a served 2 requests and relayed 4 from the front (one of them pushed at its
	// drain, one the front's 503 after an expiry); 1 more came back unseen and
	// waits in its queue. b served 1 and relayed 2.
	a := interval(5, 10, []float64{0.01, 0.01})
	a.Completions += 4
	a.PoolStats = &scrape.PoolCounts{OverflowAccepted: 5, OverflowRefused: 1, OverflowTimeout: 1, OverflowError: 1, Pulled: 2, FrontFailures: 1,
		DrainPushed: 1, DrainKept: 2, ExpiredRequeued: 1, ExpiredRelayed: 1}
	b := interval(10, 10, []float64{0.02})
	b.Completions += 2
	b.PoolStats = &scrape.PoolCounts{OverflowAccepted: 2, Pulled: 6, ExpiredRelayed: 3}
	// Decision times: a's 4 within 1 ms, 3 more within 2 ms; b's 2 within 2 ms and 1
	// above: merged, the median is in (1 ms, 2 ms], p95 in the overflow bucket.
	a.PoolStats.OverflowDecision = stats.Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{4, 3, 0}}
	b.PoolStats.OverflowDecision = stats.Histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{0, 2, 1}}
	front := scrape.Interval{Target: scrape.Target{Front: true}, Start: t0, End: t0.Add(5 * time.Second),
		Arrivals: 1000, Completions: 1000, ServiceSecondsSum: 1000, // a front's own request counts must not count
		FrontStats: &scrape.FrontCounts{QueueLength: 7, WaitingPulls: 0, Accepted: 5, RefusedFull: 5, Unauthenticated: 1, Dispatched: 4, Expired: 1}}
	front.FrontStats.QueueWait = stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{4, 0, 0}}
	front2 := front
	front2.FrontStats = &scrape.FrontCounts{QueueLength: 3, WaitingPulls: 2, QueueWait: stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{0, 1, 0}}}
	m, err := Workload([]scrape.Interval{a, b, front, front2})
	require.NoError(t, err)
	require.NoError(t, m.Check())
	require.True(t, m.Pooled)
	require.Equal(t, 2, m.Pods, "fronts are not pods")
	require.Equal(t, 2, m.Fronts)
	require.InDelta(t, (10.0-2)/5+(10.0-6)/10, m.ArrivalRate, 1e-12, "the fronts' counts stay out of λ, and pulls count where they arrived")
	require.InDelta(t, (0.01+0.01+0.02)/3, m.ServiceMean, 1e-12, "the fronts' service times and the relayed completions stay out")
	require.EqualValues(t, 3, m.Served)
	require.EqualValues(t, 2+4+1+2-2-6, m.Completions, "a pulled request completes once")
	require.InDelta(t, 5.0/5+2.0/10, m.OverflowRate, 1e-12)
	require.InDelta(t, (4.0/5+2.0/10)/2, m.OverflowShare, 1e-12, "the request given back and served here is not answered through the front")
	require.InDelta(t, 1.0/5, m.DrainPushedRate, 1e-12)
	require.InDelta(t, 2.0/5, m.DrainKeptRate, 1e-12)
	require.InDelta(t, 1.0/5, m.ExpiredRequeuedRate, 1e-12)
	require.InDelta(t, 1.0/5+3.0/10, m.ExpiredRelayedRate, 1e-12)
	require.InDelta(t, 1.0/5, m.OverflowRefusedRate, 1e-12)
	require.InDelta(t, 2.0/5, m.OverflowFailedRate, 1e-12)
	require.InDelta(t, 2.0/5+6.0/10, m.PulledRate, 1e-12)
	require.InDelta(t, 1.0/5, m.FrontFailureRate, 1e-12)
	require.InDelta(t, 10, m.FrontQueueLength, 1e-12, "summed over replicas")
	require.InDelta(t, 2, m.FrontWaitingPulls, 1e-12)
	require.InDelta(t, 1, m.FrontAcceptedRate, 1e-12)
	require.InDelta(t, 1, m.FrontRefusedFullRate, 1e-12)
	require.InDelta(t, 0.2, m.FrontUnauthenticatedRate, 1e-12)
	require.InDelta(t, 0.2, m.FrontExpiredRate, 1e-12)
	// 10 decisions: 4 ≤ 1 ms, 5 in (1, 2] ms, 1 above; the median (5th) in the second bucket.
	require.Greater(t, m.OverflowDecisionP50, 0.001)
	require.LessOrEqual(t, m.OverflowDecisionP50, 0.002)
	require.InDelta(t, 0.002, m.OverflowDecisionP95, 1e-12, "the overflow bucket reports its lower bound")
	// 5 waits: 4 ≤ 100 ms, 1 in (0.1, 1] s.
	require.LessOrEqual(t, m.FrontQueueWaitP50, 0.1)
	require.Greater(t, m.FrontQueueWaitP95, 0.1)

	plain, err := Workload([]scrape.Interval{interval(5, 10, []float64{0.01})})
	require.NoError(t, err)
	require.False(t, plain.Pooled, "a workload that does not pool")
	require.Zero(t, plain.OverflowShare)
}

// TestServiceQuantiles: the workload's service quantiles come from the pods'
// service histograms merged (not from either pod's alone), at
// stats.ServicePercentiles by TailQuantile; no histogram, or one that counted
// nothing, gives none; Check refuses a broken list.
func TestServiceQuantiles(t *testing.T) {
	bounds := []float64{0.01, 0.02, 0.05}
	a := interval(5, 4, []float64{0.01})
	a.Service = stats.Histogram{Bounds: bounds, Counts: []uint64{90, 10, 0, 0}}
	b := interval(5, 4, []float64{0.01})
	b.Service = stats.Histogram{Bounds: bounds, Counts: []uint64{0, 50, 45, 5}}
	m, err := Workload([]scrape.Interval{a, b})
	require.NoError(t, err)
	merged := stats.Histogram{Bounds: bounds, Counts: []uint64{90, 60, 45, 5}}
	require.Equal(t, merged, m.Service, "the merged histogram, kept for its buckets")
	require.Len(t, m.ServiceQuantiles, len(stats.ServicePercentiles))
	for i, p := range stats.ServicePercentiles {
		require.Equal(t, merged.TailQuantile(p/100), m.ServiceQuantiles[i], "p%v", p)
	}
	require.NotEqual(t, Pod(a).ServiceQuantiles, m.ServiceQuantiles)
	require.NoError(t, m.Check())

	none, err := Workload([]scrape.Interval{interval(5, 0, nil)})
	require.NoError(t, err)
	require.Nil(t, none.ServiceQuantiles, "no service histogram")
	idle := interval(5, 0, nil)
	idle.Service = stats.Histogram{Bounds: bounds, Counts: make([]uint64, 4)}
	require.Nil(t, Pod(idle).ServiceQuantiles, "a histogram that counted nothing")

	for _, tc := range []struct {
		name string
		mod  func(*Metrics)
		want string
	}{
		{"too few", func(m *Metrics) { m.ServiceQuantiles = m.ServiceQuantiles[:3] }, "3 service quantiles"},
		{"NaN", func(m *Metrics) { m.ServiceQuantiles[2] = math.NaN() }, "service quantile p90 is NaN"},
		{"falling", func(m *Metrics) { m.ServiceQuantiles[7] = 0 }, "service quantile p99.9 is 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := m
			bad.ServiceQuantiles = append([]float64(nil), m.ServiceQuantiles...)
			tc.mod(&bad)
			require.ErrorContains(t, bad.Check(), tc.want)
		})
	}
}

// TestServedAndArrivals: E[S] divides by the requests served here: the service
// histogram's count when the proxy measures it, else the completions less the
// rejected and the overflows relayed from a front (accepted less given back and
// served here), never below 0; λ counts a pulled request once, never below 0.
func TestServedAndArrivals(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		arrivals, completions, rej uint64
		service                    []uint64 // the service histogram's counts; nil: not measured
		pool                       *scrape.PoolCounts
		served                     uint64
		lambda                     float64
	}{
		{"service histogram", 10, 10, 2, []uint64{3, 2, 0, 0}, &scrape.PoolCounts{OverflowAccepted: 4}, 5, 10},
		{"no histogram, not pooled", 10, 10, 2, nil, nil, 8, 10},
		{"no histogram, pooled", 10, 10, 1, nil, &scrape.PoolCounts{OverflowAccepted: 4, ExpiredRequeued: 1, Pulled: 3}, 6, 7},
		{"drain push and expiry", 10, 10, 0, nil, &scrape.PoolCounts{OverflowAccepted: 3, DrainPushed: 2, DrainKept: 1, ExpiredRequeued: 1, ExpiredRelayed: 1}, 8, 10},
		{"overflows accepted, not yet completed", 3, 1, 0, nil, &scrape.PoolCounts{OverflowAccepted: 3}, 0, 3},
		{"pull of a request that arrived before", 0, 1, 0, nil, &scrape.PoolCounts{Pulled: 2}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := scrape.Interval{Start: t0, End: t0.Add(time.Second), Arrivals: tc.arrivals, Completions: tc.completions, Rejected: tc.rej,
				ServiceSecondsSum: 0.5, ServiceSecondsSumSq: 0.5, PoolStats: tc.pool}
			if tc.service != nil {
				iv.Service = stats.Histogram{Bounds: []float64{0.01, 0.02, 0.05}, Counts: tc.service}
			}
			m := Pod(iv)
			require.NoError(t, m.Check())
			require.Equal(t, tc.served, m.Served)
			require.InDelta(t, tc.lambda, m.ArrivalRate, 1e-12)
			if tc.served > 0 {
				require.InDelta(t, 0.5/float64(tc.served), m.ServiceMean, 1e-12)
			} else {
				require.Zero(t, m.ServiceMean)
			}
		})
	}
}
