package decide

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/stats"
)

// TestServicePercentilesAreTheCollectors: the histogram's shape is read at
// the percentiles the collector stores.
func TestServicePercentilesAreTheCollectors(t *testing.T) {
	require.Equal(t, stats.ServicePercentiles, servicePercentiles)
}

// proxyHistogram draws n service times into the proxies' default buckets.
func proxyHistogram(rng *rand.Rand, n int, draw func(*rand.Rand) float64) stats.Histogram {
	h := stats.Histogram{Bounds: stats.DefaultLatencyBounds, Counts: make([]uint64, len(stats.DefaultLatencyBounds)+1)}
	for range n {
		v := draw(rng)
		i := 0
		for i < len(h.Bounds) && v > h.Bounds[i] {
			i++
		}
		h.Counts[i]++
	}
	return h
}

// asBuckets is h as the collector stores it and the store reads it back: an
// empty bucket below an empty one left out, the +Inf bucket always there.
func asBuckets(h stats.Histogram) []LatencyBucket {
	var out []LatencyBucket
	for i, c := range h.Counts {
		if i == len(h.Bounds) {
			out = append(out, LatencyBucket{UpperBound: math.Inf(1), Count: float64(c)})
			break
		}
		if c > 0 || h.Counts[i+1] > 0 {
			out = append(out, LatencyBucket{UpperBound: h.Bounds[i], Count: float64(c)})
		}
	}
	return out
}

func exponentialDraw(es float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return r.ExpFloat64() * es }
}

func lognormalDraw(es, cv float64) func(*rand.Rand) float64 {
	s2 := math.Log1p(cv * cv)
	mu, sigma := math.Log(es)-s2/2, math.Sqrt(s2)
	return func(r *rand.Rand) float64 { return math.Exp(mu + sigma*r.NormFloat64()) }
}

// TestBucketsQuantileIsTheProxys: read from the buckets the collector stores
// (empty ones left out, counts as shares or counts), a quantile is the one the
// collector computes from the proxies' whole histogram, so one interval's
// pooled histogram and its stored quantiles agree.
func TestBucketsQuantileIsTheProxys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name string
		h    stats.Histogram
	}{
		{"exponential 50 ms, 10 requests", proxyHistogram(rng, 10, exponentialDraw(0.05))},
		{"exponential 50 ms, 5000 requests", proxyHistogram(rng, 5000, exponentialDraw(0.05))},
		{"lognormal 40 ms cv 1.2, 300 requests", proxyHistogram(rng, 300, lognormalDraw(0.04, 1.2))},
		{"one request", proxyHistogram(rng, 1, exponentialDraw(0.05))},
		{"beyond the last bound", proxyHistogram(rng, 20, func(*rand.Rand) float64 { return 1e6 })},
		{"some beyond the last bound", proxyHistogram(rng, 200, func(r *rand.Rand) float64 {
			if r.IntN(100) == 0 {
				return 1e6
			}
			return r.ExpFloat64() * 0.05
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := asBuckets(tc.h)
			shares := make([]LatencyBucket, len(bs))
			for i, b := range bs {
				shares[i] = LatencyBucket{UpperBound: b.UpperBound, Count: b.Count / float64(tc.h.Total())}
			}
			for _, p := range append([]float64{1, 10}, servicePercentiles...) {
				want := tc.h.TailQuantile(p / 100)
				require.InDelta(t, want, bucketsQuantile(bs, p/100), 1e-12*math.Max(want, 1), "p%v from counts", p)
				require.InDelta(t, want, bucketsQuantile(shares, p/100), 1e-9*math.Max(want, 1), "p%v from shares", p)
			}
		})
	}
	require.True(t, math.IsNaN(bucketsQuantile(nil, 0.5)))
	require.True(t, math.IsNaN(bucketsQuantile([]LatencyBucket{{UpperBound: math.Inf(1)}}, 0.5)))
	require.True(t, math.IsNaN(bucketsQuantile([]LatencyBucket{{UpperBound: 1, Count: 1}, {UpperBound: math.Inf(1)}}, 1)))
}

// TestPooledHistogramResolvesTheTailAtAnyRate: at 2 requests a second (ten
// per 5 s interval) the averaged quantiles cannot see a tail that one
// interval does not hold: a p99.9 over ten requests is about their largest,
// so the averaged shape put next to no exponential service times over 4 E[S]
// (the truth: e⁻⁴ = 1.8 %). The intervals' histograms added up resolve it,
// and a lognormal's too, at any rate; with the quantiles alone (a collector
// from before the buckets) the bias is what it was.
func TestPooledHistogramResolvesTheTailAtAnyRate(t *testing.T) {
	spec := tailSpec()
	const es, target = 0.05, 0.2
	s2 := math.Log1p(1.2 * 1.2)
	lognormalLate := 0.5 * math.Erfc((math.Log(target)-(math.Log(es)-s2/2))/math.Sqrt(2*s2))
	for _, tc := range []struct {
		name  string
		draw  func(*rand.Rand) float64
		truth float64
	}{
		{"exponential", exponentialDraw(es), math.Exp(-target / es)},
		{"lognormal cv 1.2", lognormalDraw(es, 1.2), lognormalLate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(withBuckets bool) Explanation {
				rng := rand.New(rand.NewPCG(7, 11))
				e := NewEngine()
				var x Explanation
				for i := range 3000 {
					h := proxyHistogram(rng, 10, tc.draw)
					qs := make([]LatencyQuantile, len(servicePercentiles))
					for j, p := range servicePercentiles {
						qs[j] = LatencyQuantile{Percentile: p, Seconds: h.TailQuantile(p / 100)}
					}
					s := snapshot(t0.Add(time.Duration(i)*5*time.Second), 2, es, 1)
					// The interval's own mean would move E[S] by ±30 %; the
					// shape is the question here.
					s.ServiceSCV, s.ServiceSamples, s.ServiceQuantiles = 1, 10, qs
					if withBuckets {
						s.ServiceBuckets = asBuckets(h)
					}
					d, err := e.Decide(spec, s)
					require.NoError(t, err)
					x = d.Explanation
				}
				return x
			}
			pooled := run(true)
			require.Equal(t, 1.0, pooled.ServiceShapeWeight)
			require.Contains(t, pooled.TailNote, "from the pooled histogram")
			require.InDelta(t, tc.truth, pooled.ServiceLateShare, 0.15*tc.truth, "the pooled histogram's late share of service times")
			averaged := run(false)
			require.Contains(t, averaged.TailNote, "from the averaged quantiles")
			require.Less(t, averaged.ServiceLateShare, 0.5*tc.truth, "the averaged quantiles of ten requests miss the tail")
		})
	}
}

// TestServiceHistogramIsPooledAsEofS: each interval's histogram weighs its
// share of the pooled requests, as its quantiles and E[S] do; buckets are
// matched by upper bound (one the collector left out is empty); an idle
// interval keeps the histogram, the E[S] estimate starting again starts it
// again, and the State keeps it.
func TestServiceHistogramIsPooledAsEofS(t *testing.T) {
	spec := tailSpec()
	e := NewEngine()
	const n = 1500.0
	at := func(i int, es float64, bs []LatencyBucket) Decision {
		s := snapshot(t0.Add(time.Duration(i)*5*time.Second), 100, es, 30)
		s.ServiceSamples, s.ServiceBuckets = n, bs
		d, err := e.Decide(spec, s)
		require.NoError(t, err)
		return d
	}
	inf := math.Inf(1)
	at(0, 0.05, []LatencyBucket{{0.05, 600}, {0.1, 600}, {0.2, 300}, {inf, 0}})
	require.Equal(t, []LatencyBucket{{0.05, 0.4}, {0.1, 0.4}, {0.2, 0.2}, {inf, 0}}, e.State().serviceHistogram())
	require.Equal(t, []float64{0.05, 0.1, 0.2}, e.State().ServiceHistogramBounds, "JSON names no +Inf: the bounds are the finite ones")
	w := n / (n*math.Exp(-n/serviceMemory(1)) + n)
	// The 0.05 bucket left out (empty below an empty one), a new one at 0.4.
	d := at(1, 0.05, []LatencyBucket{{0.1, 0}, {0.2, 750}, {0.4, 750}, {inf, 0}})
	got := e.State().serviceHistogram()
	want := []LatencyBucket{{0.05, 0.4 * (1 - w)}, {0.1, 0.4 * (1 - w)}, {0.2, 0.2*(1-w) + 0.5*w}, {0.4, 0.5 * w}, {inf, 0}}
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].UpperBound, got[i].UpperBound)
		require.InDelta(t, want[i].Count, got[i].Count, 1e-12)
	}
	require.Contains(t, d.Explanation.TailNote, "from the pooled histogram")
	// The shape shown is the pooled histogram's, at the collector's percentiles.
	for i, q := range d.Explanation.ServiceQuantiles {
		require.Equal(t, servicePercentiles[i], q.Percentile)
		require.InDelta(t, bucketsQuantile(got, q.Percentile/100), q.Seconds, 1e-9)
	}
	// Idle: kept.
	at(2, 0.05, nil)
	require.Equal(t, got, e.State().serviceHistogram())
	// Restored from the state through JSON, as the controller saves it, with
	// its evidence.
	saved, err := json.Marshal(e.State())
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(saved, &back))
	restored := NewEngineFromState(back)
	require.Equal(t, got, restored.State().serviceHistogram())
	require.Equal(t, e.State().ServiceShapeSamples, restored.State().ServiceShapeSamples)
	// E[S] doubles for three intervals: the estimate starts again, and the
	// histogram with it.
	for i := 3; i < 6; i++ {
		d = at(i, 0.1, []LatencyBucket{{0.1, 1000}, {0.2, 500}, {inf, 0}})
	}
	require.Contains(t, d.Explanation.ServiceNote, "started again")
	require.Equal(t, []LatencyBucket{{0.1, 2.0 / 3}, {0.2, 1.0 / 3}, {inf, 0}}, e.State().serviceHistogram())
	// Shares not one more than the bounds are no histogram.
	require.Empty(t, NewEngineFromState(State{ServiceHistogramBounds: []float64{0.1}, ServiceHistogramShares: []float64{1}}).State().ServiceHistogramShares)
	// A broken histogram in a state is not restored, nor taken in a snapshot.
	for _, bad := range [][]LatencyBucket{
		{{0.1, 1}},                     // no +Inf
		{{0.2, 1}, {0.1, 1}, {inf, 0}}, // descending
		{{0.1, math.NaN()}, {inf, 0}},  // NaN
		{{0.1, -1}, {inf, 2}},          // negative
		{{math.NaN(), 1}, {inf, 0}},    // NaN bound
		{{0, 1}, {inf, 0}},             // bound 0
		{{0.1, math.Inf(1)}, {inf, 0}}, // infinite count
		{{0.1, 1}, {inf, 0}, {inf, 0}}, // +Inf twice
	} {
		var st State
		for i, b := range bad {
			if i < len(bad)-1 {
				st.ServiceHistogramBounds = append(st.ServiceHistogramBounds, b.UpperBound)
			}
			st.ServiceHistogramShares = append(st.ServiceHistogramShares, b.Count)
		}
		if math.IsInf(bad[len(bad)-1].UpperBound, 1) { // (a state's last bucket is +Inf by its form)
			require.Empty(t, NewEngineFromState(st).State().ServiceHistogramShares, "%v", bad)
		}
		s := snapshot(t0, 100, 0.05, 30)
		s.ServiceBuckets = bad
		_, err := NewEngine().Decide(spec, s)
		require.ErrorContains(t, err, "snapshot.serviceBuckets", "%v", bad)
	}
}
