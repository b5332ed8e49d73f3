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
// [now − window, now], the standard error of that prediction that the counts'
// noise alone gives (line.spread, at the counts' index of dispersion), and
// whether there were enough samples (at least three at distinct times) to fit
// a trend. The forecast is never negative.
func forecast(method ForecastMethod, samples []Sample, now time.Time, lead, window time.Duration, dispersion float64) (f, se float64, ok bool) {
	start := now.Add(-window)
	var w []Sample
	for _, s := range samples {
		if !s.Time.Before(start) && !s.Time.After(now) {
			w = append(w, s)
		}
	}
	if len(w) < 3 || !w[len(w)-1].Time.After(w[0].Time) {
		return 0, 0, false
	}
	l := fitRateLine(w)
	switch method {
	case ForecastLeastSquares:
		f = l.at(now.Add(lead))
	default:
		f = holt(w, now.Add(lead))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		f = 0
	}
	return f, l.spread(now.Add(lead), dispersion, sampleStep(samples)), true
}

// centredFit is the least-squares line y = ym + slope·(x − xm) through n
// points, centred on their means (centring keeps the normal equations well
// conditioned); sxx is Σ(x − xm)². The rate's line (fitRateLine) and the
// recurrence's onsets (fitLine) both fit one.
type centredFit struct{ n, xm, ym, sxx, slope float64 }

// fitCentred fits the n points at(0) … at(n−1); the slope is 0 when every x is
// the same.
func fitCentred(n int, at func(i int) (x, y float64)) centredFit {
	f := centredFit{n: float64(n)}
	var sx, sy float64
	for i := range n {
		x, y := at(i)
		sx += x
		sy += y
	}
	f.xm, f.ym = sx/f.n, sy/f.n
	var sxy float64
	for i := range n {
		x, y := at(i)
		dx := x - f.xm
		sxy += dx * (y - f.ym)
		f.sxx += dx * dx
	}
	if f.sxx > 0 {
		f.slope = sxy / f.sxx
	}
	return f
}

// line is the rate's least-squares line through samples: rate against seconds
// after t0, the first sample's time.
type line struct {
	t0 time.Time
	centredFit
}

func fitRateLine(w []Sample) line {
	t0 := w[0].Time
	return line{t0, fitCentred(len(w), func(i int) (float64, float64) { return w[i].Time.Sub(t0).Seconds(), w[i].Rate })}
}

// at is the line's value at t.
func (l line) at(t time.Time) float64 { return l.ym + l.slope*(t.Sub(l.t0).Seconds()-l.xm) }

// spread is the standard error of the line's value at t when each sample's
// rate carries the noise of its count over step: dispersion × λ̄ / step per
// second² (λ̄ the samples' mean rate; dispersion 1 for Poisson counts), so
// SE² = noise·(1/n + (t − t̄)²/sxx). It is the spread of the extrapolation that
// noise alone would give, for Holt's smoothing too (whose own spread is
// wider). 0 with fewer than three samples or no step.
func (l line) spread(t time.Time, dispersion float64, step time.Duration) float64 {
	if l.n < 3 || step <= 0 || l.sxx <= 0 {
		return 0
	}
	noise := math.Max(dispersion, 1) * math.Max(l.ym, 0) / step.Seconds()
	d := t.Sub(l.t0).Seconds() - l.xm
	return math.Sqrt(noise * (1/l.n + d*d/l.sxx))
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
