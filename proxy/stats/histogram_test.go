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
