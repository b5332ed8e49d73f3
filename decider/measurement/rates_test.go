package measurement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
)

// pts is points at the given offsets (seconds after t0) with the given rates.
func pts(at []float64, rates []float64) []decide.Sample {
	out := make([]decide.Sample, len(at))
	for i := range at {
		out[i] = decide.Sample{Time: t0.Add(time.Duration(at[i] * float64(time.Second))), Rate: rates[i]}
	}
	return out
}

func TestRateWindows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		points []decide.Sample
		window time.Duration
		want   []decide.Sample
	}{
		{
			name:   "three 5 s points make one 15 s window, timed at the newest",
			points: pts([]float64{5, 10, 15, 20, 25, 30}, []float64{1, 2, 3, 4, 5, 6}),
			window: 15 * time.Second,
			want:   pts([]float64{15, 30}, []float64{2, 5}),
		},
		{
			name:   "windows are laid back from the newest point; the oldest may be short",
			points: pts([]float64{5, 10, 15, 20}, []float64{10, 20, 30, 40}),
			window: 15 * time.Second,
			want:   pts([]float64{5, 20}, []float64{10, 30}),
		},
		{
			name:   "a late scrape stays in its window (the middle of its interval decides)",
			points: pts([]float64{5, 10, 15.02, 20, 25, 30}, []float64{6, 6, 6, 12, 12, 12}),
			window: 15 * time.Second,
			want:   pts([]float64{15, 30}, []float64{6, 12}),
		},
		{
			name: "rates are weighted by their intervals: a point after a missed scrape counts twice",
			// 5 s at 10/s, then 10 s (one scrape missed) at 40/s: 450 requests over 15 s.
			points: pts([]float64{5, 10, 20}, []float64{99, 10, 40}),
			window: 15 * time.Second,
			want:   pts([]float64{5, 20}, []float64{99, 30}),
		},
		{
			name:   "a window without a point (the collector down) is left out",
			points: pts([]float64{0, 5, 10, 15, 65, 70, 75}, []float64{1, 1, 1, 1, 3, 3, 3}),
			window: 15 * time.Second,
			// The point at 65 s covers (15, 65]: its middle, 40 s, is in (30, 45].
			want: pts([]float64{0, 15, 45, 75}, []float64{1, 1, 3, 3}),
		},
		{
			name:   "a repeated time has no interval and is not counted",
			points: pts([]float64{5, 10, 10, 15}, []float64{4, 4, 100, 4}),
			window: 15 * time.Second,
			want:   pts([]float64{15}, []float64{4}),
		},
		{
			name:   "a window as long as the points' interval keeps them",
			points: pts([]float64{5, 10, 15}, []float64{1, 2, 3}),
			window: 5 * time.Second,
			want:   pts([]float64{5, 10, 15}, []float64{1, 2, 3}),
		},
		{
			name:   "no window: the points as they are",
			points: pts([]float64{5, 10}, []float64{1, 2}),
			want:   pts([]float64{5, 10}, []float64{1, 2}),
		},
		{
			name:   "one point: as it is",
			points: pts([]float64{5}, []float64{7}),
			window: 15 * time.Second,
			want:   pts([]float64{5}, []float64{7}),
		},
		{name: "none", window: 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RateWindows(tc.points, tc.window)
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				require.True(t, tc.want[i].Time.Equal(got[i].Time), "window %d ends at %s, want %s", i, got[i].Time, tc.want[i].Time)
				require.InDelta(t, tc.want[i].Rate, got[i].Rate, 1e-9, "window %d", i)
			}
		})
	}
}
