package stats

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBetween(t *testing.T) {
	prev := valid()
	prev.Latency = Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{8, 1, 0}}
	cur := prev
	cur.Time = prev.Time.Add(10 * time.Second)
	cur.Seq++
	cur.Arrivals, cur.Completions = prev.Arrivals+50, prev.Completions+40
	// 40 completions of 0.05 s and 0.15 s alternately: mean 0.1, variance 0.0025.
	cur.ServiceSecondsSum = prev.ServiceSecondsSum + 4
	cur.ServiceSecondsSumSq = prev.ServiceSecondsSumSq + 20*0.0025 + 20*0.0225
	cur.InFlightSeconds = prev.InFlightSeconds + 4
	cur.BusySeconds = prev.BusySeconds + 3
	cur.Codes = [5]uint64{0, 38, 0, 0, 2}
	cur.Latency = Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{28, 21, 0}}

	w, err := Between(prev, cur)
	require.NoError(t, err)
	require.Equal(t, 10.0, w.Seconds)
	require.Equal(t, 5.0, w.ArrivalRate)
	require.InDelta(t, 0.1, w.ServiceMean, 1e-12)
	require.InDelta(t, 0.0025/0.01, w.ServiceSCV, 1e-9)
	require.InDelta(t, 0.4, w.MeanInFlight, 1e-12)
	require.InDelta(t, 0.3, w.Busy, 1e-12)
	require.Equal(t, uint64(2), w.Errors)
	require.Equal(t, []uint64{20, 20, 0}, w.Latency.Counts)

	restarted := cur
	restarted.InstanceID = "other"
	_, err = Between(prev, restarted)
	require.ErrorIs(t, err, ErrRestart)
	reset := cur
	reset.Arrivals = 1
	reset.Completions = 1
	_, err = Between(prev, reset)
	require.ErrorIs(t, err, ErrRestart)
	_, err = Between(cur, prev)
	require.ErrorIs(t, err, ErrRestart, "counters going backwards is a restart")
	same := prev
	same.Seq++
	_, err = Between(prev, same)
	require.ErrorContains(t, err, "not later")
}

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

func TestHistogramAddSub(t *testing.T) {
	a := Histogram{Bounds: []float64{1}, Counts: []uint64{1, 2}}
	b := Histogram{Bounds: []float64{1}, Counts: []uint64{3, 4}}
	sum, err := a.Add(b)
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 6}, sum.Counts)
	diff, err := sum.Sub(a)
	require.NoError(t, err)
	require.Equal(t, b.Counts, diff.Counts)
	_, err = a.Add(Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 1, 1}})
	require.ErrorContains(t, err, "different buckets")
	_, err = a.Sub(b)
	require.ErrorIs(t, err, ErrRestart)
	empty, err := Histogram{}.Add(a)
	require.NoError(t, err)
	require.Equal(t, a, empty)
}
