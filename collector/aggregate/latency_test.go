package aggregate

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/stats"
)

// withLatency is a pod's interval whose latency (and service) histogram is h.
func withLatency(pod string, h stats.Histogram) scrape.Interval {
	iv := interval(5, h.Total(), nil)
	iv.Target = scrape.Target{Namespace: "ns", Workload: "w", Pod: pod}
	iv.Latency = h
	iv.Service = stats.Histogram{Bounds: h.Bounds, Counts: append([]uint64(nil), h.Counts...)}
	iv.Completions = h.Total()
	return iv
}

// TestWorkloadKeepsTheMergedLatencyHistogram: the workload's Latency is the
// pods' histograms added bucket by bucket, the one its percentiles are read
// from, and its Service the pods' service histograms added the same way; a
// front replica's is no part of either.
func TestWorkloadKeepsTheMergedLatencyHistogram(t *testing.T) {
	bounds := []float64{0.0001, 0.2, 60}
	a := withLatency("a", stats.Histogram{Bounds: bounds, Counts: []uint64{1, 2, 3, 4}})
	b := withLatency("b", stats.Histogram{Bounds: bounds, Counts: []uint64{0, 10, 0, 1}})
	b.Service.Counts = []uint64{7, 3, 0, 0} // served faster than its latency
	front := withLatency("front-0", stats.Histogram{Bounds: bounds, Counts: []uint64{100, 100, 100, 100}})
	front.Front = true
	m, err := Workload([]scrape.Interval{a, b, front})
	require.NoError(t, err)
	want := stats.Histogram{Bounds: bounds, Counts: []uint64{1, 12, 3, 5}}
	require.Equal(t, want, m.Latency)
	require.Empty(t, m.LatencySkipped)
	require.Equal(t, Quantile(want, 0.95), m.LatencyP95)
	require.Equal(t, stats.Histogram{Bounds: bounds, Counts: []uint64{8, 5, 3, 4}}, m.Service)
	for i, p := range stats.ServicePercentiles {
		require.Equal(t, m.Service.TailQuantile(p/100), m.ServiceQuantiles[i], "p%v from the histogram kept", p)
	}
	require.Equal(t, []uint64{1, 2, 3, 4}, a.Latency.Counts, "the pods' histograms are not changed")
	require.Equal(t, []uint64{1, 2, 3, 4}, a.Service.Counts, "the pods' histograms are not changed")
	require.NoError(t, m.Check())

	p := Pod(a)
	require.Equal(t, a.Latency, p.Latency)
	require.Equal(t, a.Service, p.Service)

	idle, err := Workload([]scrape.Interval{interval(5, 0, nil)})
	require.NoError(t, err)
	require.Zero(t, idle.Latency.Total())
	require.Zero(t, idle.Service.Total())
}

// TestWorkloadLeavesOutOtherBounds: pods whose histograms have other bounds are
// not mixed in. The bounds kept are those most completions were counted in,
// whatever the order of the pods (before, the first pod's won: a rollout that
// changed the bounds kept the old ones while most traffic had moved), and the
// pods left out are named unless they had no completion to lose.
func TestWorkloadLeavesOutOtherBounds(t *testing.T) {
	oldB, newB := []float64{0.1, 1}, []float64{0.1, 0.2, 1}
	old := func(pod string, n uint64) scrape.Interval {
		return withLatency(pod, stats.Histogram{Bounds: oldB, Counts: []uint64{n, 0, 0}})
	}
	neu := func(pod string, n uint64) scrape.Interval {
		return withLatency(pod, stats.Histogram{Bounds: newB, Counts: []uint64{0, n, 0, 0}})
	}
	for _, tc := range []struct {
		name    string
		ivs     []scrape.Interval
		want    stats.Histogram
		skipped []string
	}{
		{"most completions in the new bounds, old pod first", []scrape.Interval{old("a", 3), neu("b", 10)},
			stats.Histogram{Bounds: newB, Counts: []uint64{0, 10, 0, 0}}, []string{"ns/a"}},
		{"the same, new pod first", []scrape.Interval{neu("b", 10), old("a", 3)},
			stats.Histogram{Bounds: newB, Counts: []uint64{0, 10, 0, 0}}, []string{"ns/a"}},
		{"counts add over pods of one set", []scrape.Interval{old("a", 3), neu("b", 4), old("c", 3)},
			stats.Histogram{Bounds: oldB, Counts: []uint64{6, 0, 0}}, []string{"ns/b"}},
		{"a tie keeps the first pod's", []scrape.Interval{neu("b", 3), old("a", 3)},
			stats.Histogram{Bounds: newB, Counts: []uint64{0, 3, 0, 0}}, []string{"ns/a"}},
		{"an idle pod of other bounds loses nothing", []scrape.Interval{old("a", 0), neu("b", 2)},
			stats.Histogram{Bounds: newB, Counts: []uint64{0, 2, 0, 0}}, nil},
		{"several left out, sorted", []scrape.Interval{old("z", 1), neu("b", 9), old("c", 1)},
			stats.Histogram{Bounds: newB, Counts: []uint64{0, 9, 0, 0}}, []string{"ns/c", "ns/z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Workload(tc.ivs)
			require.NoError(t, err)
			require.Equal(t, tc.want, m.Latency)
			require.Equal(t, tc.skipped, m.LatencySkipped)
			require.Equal(t, Quantile(tc.want, 0.5), m.LatencyP50)
			// The service histograms follow: the same pods, the same buckets.
			require.Equal(t, tc.want, m.Service)
			require.Len(t, m.ServiceQuantiles, len(stats.ServicePercentiles))
			for i, p := range stats.ServicePercentiles {
				require.Equal(t, tc.want.TailQuantile(p/100), m.ServiceQuantiles[i], "p%v", p)
			}
			require.NoError(t, m.Check())
		})
	}
}

// TestMetricsCheckLatencyHistogram: a latency or service histogram the
// workload point could not carry as buckets is an error naming it.
func TestMetricsCheckLatencyHistogram(t *testing.T) {
	histograms := []struct {
		name string
		set  func(*Metrics, stats.Histogram)
	}{
		{"latency histogram", func(m *Metrics, h stats.Histogram) { m.Latency = h }},
		{"service histogram", func(m *Metrics, h stats.Histogram) { m.Service = h }},
	}
	for _, tc := range []struct {
		name string
		h    stats.Histogram
		want string
	}{
		{"counts without the overflow bucket", stats.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{1, 2}}, "2 counts for 2 bounds"},
		{"NaN bound", stats.Histogram{Bounds: []float64{math.NaN()}, Counts: []uint64{1, 2}}, "bound 0 (NaN)"},
		{"infinite bound", stats.Histogram{Bounds: []float64{0.1, math.Inf(1)}, Counts: []uint64{1, 2, 0}}, "bound 1 (+Inf)"},
		{"zero bound", stats.Histogram{Bounds: []float64{0}, Counts: []uint64{1, 2}}, "bound 0 (0)"},
		{"falling bounds", stats.Histogram{Bounds: []float64{1, 0.1}, Counts: []uint64{1, 2, 3}}, "bound 1 (0.1)"},
		{"repeated bound", stats.Histogram{Bounds: []float64{1, 1}, Counts: []uint64{1, 2, 3}}, "bound 1 (1)"},
	} {
		for _, h := range histograms {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				var m Metrics
				h.set(&m, tc.h)
				require.ErrorContains(t, m.Check(), "workload "+h.name)
				require.ErrorContains(t, m.Check(), tc.want)
			})
		}
	}
	require.NoError(t, Metrics{}.Check(), "no histogram")
	for _, h := range histograms {
		for _, good := range []stats.Histogram{{Counts: []uint64{7}}, {Bounds: []float64{0.1}, Counts: []uint64{math.MaxUint64, 0}}} {
			var m Metrics
			h.set(&m, good)
			require.NoError(t, m.Check(), "%s %v", h.name, good)
		}
	}
}
