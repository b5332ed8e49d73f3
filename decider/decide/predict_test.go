package decide

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForecastFitsThePresentTrend: where the whole window's line does not fit
// the rates within their counts' noise, the forecast is the lower-bounded of
// that line and the present trend's (the longest window, in whole leads, that
// a line fits). Rates every 5 s, a lead of a minute, a window of ten.
func TestForecastFitsThePresentTrend(t *testing.T) {
	const step = 5 * time.Second
	lead, window := time.Minute, 10*time.Minute
	// series builds ten minutes of rates from rate(seconds before now).
	series := func(rate func(ago float64) float64) []Sample {
		var s []Sample
		for ago := 600; ago >= 0; ago -= int(step.Seconds()) {
			s = append(s, Sample{Time: t0.Add(-time.Duration(ago) * time.Second), Rate: rate(float64(ago))})
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		rate   func(ago float64) float64
		window time.Duration // the forecast's
		lo, hi float64       // its value's range
		// the whole window's line forecasts above hi (a turn it extrapolates
		// past) or the present one would forecast above hi (a rise the whole
		// window does not prove)
		wholeAbove, presentAbove bool
	}{
		{
			// Up from 20/s to 60/s over four minutes, down to 40/s over the
			// last two: the rise must not be extrapolated past the turn.
			name: "a peak that has turned", rate: func(ago float64) float64 {
				switch {
				case ago > 360:
					return 20
				case ago > 120:
					return 20 + 40*(360-ago)/240
				default:
					return 60 - 20*(120-ago)/120
				}
			},
			window: 2 * time.Minute, lo: 30 - 1e-9, hi: 30 + 1e-9, wholeAbove: true,
		},
		{
			// 20/s for eight minutes, then +0.5/s each second: 80/s now and
			// 110/s a lead ahead on the present line; the whole window proves
			// less of the rise, and its line governs.
			name: "a ramp two minutes old", rate: func(ago float64) float64 { return 20 + 0.5*math.Max(120-ago, 0) },
			window: window, lo: 40, hi: 80, presentAbove: true,
		},
		{
			name: "a straight line", rate: func(ago float64) float64 { return 80 - 0.05*ago },
			window: window, lo: 83 - 1e-9, hi: 83 + 1e-9,
		},
	} {
		s := series(tc.rate)
		fc, ok := forecast(ForecastLeastSquares, s, t0, lead, window, 1, 0.95)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.window, fc.window, tc.name)
		require.GreaterOrEqual(t, fc.f, tc.lo, tc.name)
		require.LessOrEqual(t, fc.f, tc.hi, tc.name)
		if tc.wholeAbove {
			require.Greater(t, fitRateLine(s, nil).at(t0.Add(lead)), tc.hi+10, "%s: the whole window's line", tc.name)
		}
		if tc.presentAbove {
			i := firstFrom(s, t0.Add(-2*time.Minute))
			require.True(t, fitRateLine(s[i:], nil).fits(1, step, 0.95), tc.name)
			require.Greater(t, fitRateLine(s[i:], nil).at(t0.Add(lead)), tc.hi+10, "%s: the present line", tc.name)
		}
	}
}

// TestFlatNoiseFitsALine: on a flat λ with Poisson counts (and with counts in
// batches of 20 at their dispersion) a line fits the whole window in about
// the level's share of draws: the χ² test of line.fits is calibrated.
func TestFlatNoiseFitsALine(t *testing.T) {
	const (
		rate, draws, conf = 20.0, 2000, 0.95
		step              = 5 * time.Second
	)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, batch := range []float64{1, 20} {
		fits := 0
		for range draws {
			if fitRateLine(flatRates(rng, rate, batch, step), nil).fits(batch, step, conf) {
				fits++
			}
		}
		require.InDelta(t, conf, float64(fits)/draws, 0.02, "batch %v: share of draws a line fits", batch)
	}
}

// flatRates is 46 samples of a flat λ (rate), step apart and ending at t0,
// each its Poisson count of batches of batch requests over step.
func flatRates(rng *rand.Rand, rate, batch float64, step time.Duration) []Sample {
	var s []Sample
	for i := 45; i >= 0; i-- {
		count := batch * float64(poissonCount(rng, rate*step.Seconds()/batch))
		s = append(s, Sample{Time: t0.Add(-time.Duration(i) * step), Rate: count / step.Seconds()})
	}
	return s
}

// TestChiSquareQuantile against tabulated quantiles.
func TestChiSquareQuantile(t *testing.T) {
	for _, tc := range []struct{ p, k, want float64 }{
		{0.95, 3, 7.815}, {0.95, 10, 18.307}, {0.95, 43, 59.304}, {0.99, 20, 37.566}, {0.5, 30, 29.336},
	} {
		require.InEpsilon(t, tc.want, chiSquareQuantile(tc.p, tc.k), 0.01, "p %v, k %v", tc.p, tc.k)
	}
}

// TestTurnedPeakIsNotExtrapolated: λ rose from 100/s to 400/s and has fallen
// to 300/s over the last minute (one sample per 15 s, lead a minute). The
// whole window's line still rises; the decision's forecast is the last
// minute's falling line, its explanation names that window, and the scale-up
// sizes for no more than λ now.
func TestTurnedPeakIsNotExtrapolated(t *testing.T) {
	spec := baseSpec()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: time.Minute}
	s := snapshot(t0, 0, 0.01, 40)
	for i := range s.ArrivalRates {
		ago := t0.Sub(s.ArrivalRates[i].Time).Seconds()
		if ago > 60 {
			s.ArrivalRates[i].Rate = 400 - 300*(ago-60)/240
		} else {
			s.ArrivalRates[i].Rate = 300 + 100*ago/60
		}
	}
	whole := fitRateLine(s.ArrivalRates, nil).at(t0.Add(time.Minute))
	require.Greater(t, whole, 300.0, "the whole window's line rises past the turn")
	d, err := NewEngine().Decide(spec, s)
	require.NoError(t, err)
	x := d.Explanation
	require.Equal(t, time.Minute, x.ForecastWindow)
	require.InDelta(t, 200, x.ForecastArrivalRate, 1e-9)
	require.InDelta(t, 300, x.ArrivalRate, 1e-9)
	require.InDelta(t, 300, x.SizingArrivalRate, 1e-9)
}
