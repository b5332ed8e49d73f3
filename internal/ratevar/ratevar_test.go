package ratevar

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOfSkipsPairsWithAMissingSecond(t *testing.T) {
	tests := []struct {
		name   string
		counts []int64
		want   Sums
	}{
		{"empty", nil, Sums{}},
		{"one second", []int64{5}, Sums{}},
		{"two seconds", []int64{3, 5}, Sums{Pairs: 1, Counts: 8, DiffSq: 4}},
		{"missing breaks the chain", []int64{3, Missing, 5, 9}, Sums{Pairs: 1, Counts: 14, DiffSq: 16}},
		{"zeros count", []int64{0, 0, 2}, Sums{Pairs: 2, Counts: 2, DiffSq: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Of(tt.counts)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestOfRejectsANegativeCount(t *testing.T) {
	_, err := Of([]int64{1, -2, 3})
	require.ErrorContains(t, err, "count -2 of second 1 is negative")
}

func TestCV2WithoutArrivalsIsAnError(t *testing.T) {
	_, err := CV2(Sums{})
	require.ErrorIs(t, err, ErrNoArrivals)
	_, err = CV2(Sums{Pairs: 10})
	require.ErrorIs(t, err, ErrNoArrivals)
}

// poisson draws a Poisson count (Knuth's product method for small means, the
// normal approximation rounded for large ones is not exact enough here).
func poisson(r *rand.Rand, mean float64) int64 {
	var n int64
	for t := r.ExpFloat64(); t < mean; t += r.ExpFloat64() {
		n++
	}
	return n
}

func TestCV2RecoversTheRateVarianceAndIgnoresTrends(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		cv2  float64 // gamma-distributed rate's relative variance; 0: constant rate
		// trend multiplies the mean rate linearly from 1 to trend over the series.
		trend float64
	}{
		{"poisson", 0, 1},
		{"poisson with a 3x trend", 0, 3},
		{"doubly stochastic cv2 0.5", 0.5, 1},
		{"doubly stochastic cv2 2 with a trend", 2, 2},
	}
	const seconds, mean = 20000, 40.0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := make([]int64, seconds)
			for i := range counts {
				m := mean * (1 + (tt.trend-1)*float64(i)/seconds)
				if tt.cv2 > 0 {
					m *= gamma(r, 1/tt.cv2) * tt.cv2
				}
				counts[i] = poisson(r, m)
			}
			s, err := Of(counts)
			require.NoError(t, err)
			got, err := CV2(s)
			require.NoError(t, err)
			// The trend's mean² differs from the mean rate's, so compare against the
			// series' own E[Λ²]-weighted cv² within a tolerance of its noise.
			require.InDelta(t, tt.cv2, got, 0.05+0.1*tt.cv2, "cv² estimate")
		})
	}
}

// gamma draws Gamma(shape, 1) (Marsaglia–Tsang; shape < 1 boosted).
func gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		return gamma(r, shape+1) * math.Pow(r.Float64(), 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		if math.Log(r.Float64()) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

func TestSumsAddAcrossIntervals(t *testing.T) {
	a, err := Of([]int64{1, 2, 3})
	require.NoError(t, err)
	b, err := Of([]int64{3, 7})
	require.NoError(t, err)
	all, err := Of([]int64{1, 2, 3, 7})
	require.NoError(t, err)
	require.Equal(t, all, a.Add(b))
}
