package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{0.1, 0.2, 0.4}, Counts: []uint64{50, 40, 10, 0}}
	tests := []struct {
		q, want float64
	}{
		{0.5, 0.1},   // exactly the first bucket's top
		{0.25, 0.05}, // halfway through the first bucket
		{0.7, 0.15},  // halfway through the second
		{0.95, 0.3},  // halfway through the third
		{1, 0.4},
	}
	for _, tt := range tests {
		require.InDelta(t, tt.want, h.Quantile(tt.q), 1e-12, "q=%v", tt.q)
	}
	over := Histogram{Bounds: []float64{0.1}, Counts: []uint64{0, 5}}
	require.Equal(t, 0.1, over.Quantile(0.9), "beyond the last bound reports the bound")
	require.True(t, math.IsNaN(Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}.Quantile(0.5)))
	require.True(t, math.IsNaN(h.Quantile(1.5)))
}

func TestHistogramAdd(t *testing.T) {
	a := Histogram{Bounds: []float64{1}, Counts: []uint64{1, 2}}
	b := Histogram{Bounds: []float64{1}, Counts: []uint64{3, 4}}
	sum, err := a.Add(b)
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 6}, sum.Counts)
	require.Equal(t, []uint64{1, 2}, a.Counts, "Add does not change its operands")
	_, err = a.Add(Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 1, 1}})
	require.ErrorContains(t, err, "different buckets")
	_, err = a.Add(Histogram{Bounds: []float64{2}, Counts: []uint64{1, 1}})
	require.ErrorContains(t, err, "different buckets", "same length, other bounds")
	empty, err := Histogram{}.Add(a)
	require.NoError(t, err)
	require.Equal(t, a, empty)
}

func TestTailQuantile(t *testing.T) {
	h := Histogram{Bounds: []float64{0.1, 0.2, 0.4}, Counts: []uint64{50, 40, 8, 2}}
	for _, tc := range []struct {
		name    string
		q, want float64
	}{
		{"the first bucket's top", 0.5, 0.1},
		{"inside the first bucket: survival from 1 to 0.5", 0.25, 0.1 * math.Log(1/0.75) / math.Log(2)},
		{"inside the second: survival from 0.5 to 0.1", 0.8, 0.1 + 0.1*math.Log(0.5/0.2)/math.Log(5)},
		{"the third bucket's top", 0.98, 0.4},
		{"beyond the last bound", 0.99, 0.4},
		{"q = 1", 1, 0.4},
	} {
		require.InDelta(t, tc.want, h.TailQuantile(tc.q), 1e-12, tc.name)
	}
	// An exponential's survival at the bounds gives back its quantiles exactly.
	bounds := []float64{0.05, 0.1, 0.2, 0.4, 0.8}
	counts := make([]uint64, len(bounds)+1)
	prev := uint64(0)
	for i, b := range bounds {
		cdf := uint64(math.Round(1e12 * (1 - math.Exp(-b/0.1))))
		counts[i] = cdf - prev
		prev = cdf
	}
	counts[len(bounds)] = 1e12 - prev
	e := Histogram{Bounds: bounds, Counts: counts}
	for _, q := range []float64{0.3, 0.5, 0.9, 0.95, 0.99} {
		require.InDelta(t, -0.1*math.Log(1-q), e.TailQuantile(q), 1e-9, "q=%v", q)
	}
	all := Histogram{Bounds: []float64{0.1, 0.2}, Counts: []uint64{0, 10, 0}}
	require.InDelta(t, 0.15, all.TailQuantile(0.5), 1e-12, "a bucket holding everything is linear")
	require.True(t, math.IsNaN(Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}.TailQuantile(0.5)))
	require.True(t, math.IsNaN(h.TailQuantile(-0.1)))
	require.True(t, math.IsNaN(h.TailQuantile(math.NaN())))
}
