package decide

import (
	"math"
	"slices"
	"time"
)

// Holt smoothing constants: responsive enough for a ramp over a few samples,
// damped enough that one noisy sample does not double the forecast.
const (
	holtAlpha = 0.5
	holtBeta  = 0.3
)

// lead returns the predictive lead: the override, or the given percentile
// (nearest rank) of the init-time samples; 0 when there are none.
func lead(p Predictive, samples []time.Duration) time.Duration {
	if p.LeadOverride > 0 {
		return p.LeadOverride
	}
	return percentileDuration(samples, p.InitPercentile)
}

// InitTime is the pod start time the predictive lead uses: the given percentile
// (nearest rank; 0 means DefaultInitPercentile) of the positive init-time
// samples, 0 when there are none. The controller reports it as an observation
// whether or not predictive scaling is on.
func InitTime(samples []time.Duration, percentile float64) time.Duration {
	if percentile == 0 {
		percentile = DefaultInitPercentile
	}
	return percentileDuration(samples, percentile)
}

func percentileDuration(samples []time.Duration, pct float64) time.Duration {
	var v []time.Duration
	for _, s := range samples {
		if s > 0 {
			v = append(v, s)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	rank := int(math.Ceil(pct / 100 * float64(len(v))))
	if rank < 1 {
		rank = 1
	}
	return v[rank-1]
}

// forecast returns λ predicted at now+lead from the samples inside
// [now − window, now], and whether there were enough samples (at least three
// at distinct times) to fit a trend. The forecast is never negative.
func forecast(method ForecastMethod, samples []Sample, now time.Time, lead, window time.Duration) (float64, bool) {
	start := now.Add(-window)
	var w []Sample
	for _, s := range samples {
		if !s.Time.Before(start) && !s.Time.After(now) {
			w = append(w, s)
		}
	}
	if len(w) < 3 || !w[len(w)-1].Time.After(w[0].Time) {
		return 0, false
	}
	var f float64
	switch method {
	case ForecastLeastSquares:
		f = leastSquares(w, now.Add(lead))
	default:
		f = holt(w, now.Add(lead))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		f = 0
	}
	return f, true
}

// leastSquares fits rate = a + b·(t − t̄) with t̄ the mean sample time (centring
// keeps the normal equations well conditioned) and evaluates it at at.
func leastSquares(w []Sample, at time.Time) float64 {
	t0 := w[0].Time
	var st, sx float64
	for _, s := range w {
		st += s.Time.Sub(t0).Seconds()
		sx += s.Rate
	}
	n := float64(len(w))
	tm, xm := st/n, sx/n
	var sxy, sxx float64
	for _, s := range w {
		dt := s.Time.Sub(t0).Seconds() - tm
		sxy += dt * (s.Rate - xm)
		sxx += dt * dt
	}
	b := 0.0
	if sxx > 0 {
		b = sxy / sxx
	}
	return xm + b*(at.Sub(t0).Seconds()-tm)
}

// holt runs Holt's linear smoothing over irregularly spaced samples (trend per
// second) and extrapolates from the last sample to at.
func holt(w []Sample, at time.Time) float64 {
	level := w[0].Rate
	trend := 0.0
	prev := w[0].Time
	for i, s := range w[1:] {
		dt := s.Time.Sub(prev).Seconds()
		if dt <= 0 {
			continue
		}
		if i == 0 {
			trend = (s.Rate - level) / dt
		}
		predicted := level + trend*dt
		newLevel := holtAlpha*s.Rate + (1-holtAlpha)*predicted
		trend = holtBeta*(newLevel-level)/dt + (1-holtBeta)*trend
		level = newLevel
		prev = s.Time
	}
	return level + trend*at.Sub(prev).Seconds()
}

// forecastError is the standard error of a least-squares line's value at
// now + lead through the samples of the forecast's window, when each
// sample's rate carries the noise of its count: dispersion × λ̄ / step per
// second² (λ̄ the window's mean rate; dispersion 1 for Poisson counts). It is
// the spread of the line's extrapolation that noise alone would give, for
// Holt's smoothing too (whose own spread is wider). 0 with fewer than three
// samples.
func forecastError(samples []Sample, now time.Time, lead, window time.Duration, dispersion float64) float64 {
	start := now.Add(-window)
	step := sampleStep(samples)
	var n, st, sy float64
	for _, s := range samples {
		if !s.Time.Before(start) && !s.Time.After(now) {
			n++
			st += s.Time.Sub(now).Seconds()
			sy += s.Rate
		}
	}
	if n < 3 || step <= 0 {
		return 0
	}
	tm := st / n
	var sxx float64
	for _, s := range samples {
		if !s.Time.Before(start) && !s.Time.After(now) {
			dt := s.Time.Sub(now).Seconds() - tm
			sxx += dt * dt
		}
	}
	if sxx <= 0 {
		return 0
	}
	noise := math.Max(dispersion, 1) * math.Max(sy/n, 0) / step.Seconds()
	d := lead.Seconds() - tm
	return math.Sqrt(noise * (1/n + d*d/sxx))
}
