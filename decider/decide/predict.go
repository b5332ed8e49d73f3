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

// rateForecast is λ predicted a lead ahead: the value, the standard error the
// counts' noise gives it (trend.spread), and the window of samples it was fit
// over.
type rateForecast struct {
	f, se  float64
	window time.Duration
}

// forecast returns λ predicted at now+lead, and whether there were enough
// samples (at least three at distinct times) to fit a line. The forecast is
// never negative.
//
// Two lines are fit: through the whole window, and through the present
// trend, the longest window in whole leads whose samples a line fits within
// their counts' noise (line.fits, at the level conf). Where the whole window's
// line fits, they are the same. Where it does not (a kink, a turn, a step),
// the forecast is the one of the two whose lower confidence bound is lower:
// the scale-up it sizes (engine.go) counts a rise only as far as both prove
// it. So a peak that has turned is not extrapolated by the rise before it:
// on a flash crowd (×5 over five minutes, 2-minute init) the whole window's
// line forecast 104/s a lead ahead when λ had fallen back to 88/s. A lone
// line that does not fit gets the residuals' spread as its noise where that
// is wider than the counts' (trend.spread).
//
// Measured on the 85-cell matrix (2026-11-27): this was cheaper in 34 cells
// by 1–8 % and dearer in one, late shares within 0.2 point. Forecasting from
// the present trend alone, which also extrapolates a young ramp from its
// start, was dearer in 40 cells (median +0.7 %, flash crowds +7–9 %) for
// 0.3–0.45 point fewer late requests on the flash crowds with 2-minute init.
func forecast(method ForecastMethod, samples []Sample, now time.Time, lead, window time.Duration, dispersion, conf float64) (rateForecast, bool) {
	start := now.Add(-window)
	in := func(s Sample) bool { return !s.Time.Before(start) && !s.Time.After(now) }
	n := 0
	for _, s := range samples {
		if in(s) {
			n++
		}
	}
	w := make([]Sample, 0, n) // counted first: one allocation, not one per doubling
	for _, s := range samples {
		if in(s) {
			w = append(w, s)
		}
	}
	if len(w) < 3 || !w[len(w)-1].Time.After(w[0].Time) {
		return rateForecast{}, false
	}
	step := sampleStep(samples)
	xs := make([]float64, len(w))
	whole := fitTrend(w, xs, dispersion, step, conf)
	if whole.fits || lead <= 0 {
		return whole.predict(method, w, now, lead), true
	}
	present, from := whole, 0
	for k := int(window / lead); k >= 1; k-- {
		i := firstFrom(w, now.Add(-time.Duration(k)*lead))
		if i == 0 {
			continue
		}
		if len(w)-i < 3 || !w[len(w)-1].Time.After(w[i].Time) {
			break
		}
		present, from = fitTrend(w[i:], xs, dispersion, step, conf), i
		if present.fits {
			break
		}
	}
	all := whole.predict(method, w, now, lead)
	if from == 0 {
		return all, true
	}
	recent := present.predict(method, w[from:], now, lead)
	z := normalQuantile(conf)
	if all.f-z*all.se < recent.f-z*recent.se {
		return all, true
	}
	return recent, true
}

// trend is the line through some rate samples with what their counts' noise
// says of it, worked out once: whether it fits them (line.fits), and the
// variance of one sample its spread reads: the counts' noise (line.noise), or
// where the line does not fit, the residuals' own variance, rss/(n − 2),
// where that is the larger.
type trend struct {
	line
	fits  bool
	noise float64
}

func fitTrend(w []Sample, xs []float64, dispersion float64, step time.Duration, conf float64) trend {
	l := fitRateLine(w, xs)
	t := trend{line: l, fits: l.fits(dispersion, step, conf)}
	if step > 0 {
		t.noise = l.noise(dispersion, step)
		if !t.fits && l.n > 2 {
			t.noise = math.Max(t.noise, l.rss/(l.n-2))
		}
	}
	return t
}

// predict is the forecast at now + lead of the trend's line through w (or of
// Holt's smoothing over w), with the line's spread there.
func (t trend) predict(method ForecastMethod, w []Sample, now time.Time, lead time.Duration) rateForecast {
	var f float64
	switch method {
	case ForecastLeastSquares:
		f = t.at(now.Add(lead))
	default:
		f = holt(w, now.Add(lead))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		f = 0
	}
	return rateForecast{f: f, se: t.spread(now.Add(lead)), window: now.Sub(w[0].Time)}
}

// firstFrom is the index of the first sample at or after t (len(w) when none).
func firstFrom(w []Sample, t time.Time) int {
	for i, s := range w {
		if !s.Time.Before(t) {
			return i
		}
	}
	return len(w)
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

// value is the fitted line's y at x.
func (f centredFit) value(x float64) float64 { return f.ym + f.slope*(x-f.xm) }

// line is the rate's least-squares line through samples: rate against seconds
// after t0, the first sample's time.
type line struct {
	t0 time.Time
	centredFit
	// rss is the residuals' sum of squares about the line.
	rss float64
}

// fitRateLine fits the line; each sample's time is read once, into xs (a
// scratch of at least len(w), or nil for a new one), and the fit's two passes
// and the residuals' share it: the forecast fits up to six lines a decision
// over one scratch, and reading the times was most of their cost.
func fitRateLine(w []Sample, xs []float64) line {
	t0 := w[0].Time
	if cap(xs) < len(w) {
		xs = make([]float64, len(w))
	}
	xs = xs[:len(w)]
	for i, s := range w {
		xs[i] = s.Time.Sub(t0).Seconds()
	}
	l := line{t0: t0, centredFit: fitCentred(len(w), func(i int) (float64, float64) { return xs[i], w[i].Rate })}
	for i, s := range w {
		r := s.Rate - l.value(xs[i])
		l.rss += r * r
	}
	return l
}

// noise is the variance of one sample's rate that its count's noise gives:
// dispersion × λ̄ / step per second² (λ̄ the samples' mean rate; dispersion 1
// for Poisson counts, never taken below it).
func (l line) noise(dispersion float64, step time.Duration) float64 {
	return math.Max(dispersion, 1) * math.Max(l.ym, 0) / step.Seconds()
}

// fits tells whether the samples' scatter about the line is what their counts'
// noise explains: the residual sum of squares over the noise is χ² with n − 2
// degrees of freedom when the rate is a line, and the line fits when that sum
// is within the χ² quantile at level conf (Wilson–Hilferty). A kink, a turn or
// a step pushes it above. With no noise to measure against (no step, a zero
// rate) any line fits.
func (l line) fits(dispersion float64, step time.Duration, conf float64) bool {
	if step <= 0 || l.n < 3 {
		return true
	}
	v := l.noise(dispersion, step)
	if v <= 0 {
		return l.rss == 0
	}
	return l.rss/v <= chiSquareQuantile(conf, l.n-2)
}

// chiSquareQuantile is the p quantile of χ² with k degrees of freedom by
// Wilson and Hilferty's cube-root approximation (within 1 % of the exact
// quantile at k ≥ 3 for p in [0.5, 0.999]).
func chiSquareQuantile(p, k float64) float64 {
	c := 2 / (9 * k)
	x := 1 - c + normalQuantile(p)*math.Sqrt(c)
	return k * math.Max(x, 0) * x * x
}

// at is the line's value at t.
func (l line) at(t time.Time) float64 { return l.value(t.Sub(l.t0).Seconds()) }

// spread is the standard error of the line's value at t when each sample's
// rate varies by the trend's noise, SE² = noise·(1/n + (t − t̄)²/sxx): the
// spread of the extrapolation that noise alone would give, for Holt's
// smoothing too (whose own spread is wider). 0 with fewer than three samples
// or no step.
func (t trend) spread(at time.Time) float64 {
	if t.n < 3 || t.sxx <= 0 {
		return 0
	}
	d := at.Sub(t.t0).Seconds() - t.xm
	return math.Sqrt(t.noise * (1/t.n + d*d/t.sxx))
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
