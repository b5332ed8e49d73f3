package measurement

import (
	"time"

	"github.com/qas-dev/qas/decider/decide"
)

// The decider's defaults, which the controller (qas-decider run's --interval,
// --window and --rate-window) and the simulator's qas both take, so that what
// is evaluated is what runs.
const (
	// DefaultInterval is how often the decider decides: every scrape of the
	// collector's default 5 s.
	DefaultInterval = 5 * time.Second
	// DefaultWindow is how much λ history each decision reads: the forecast's
	// input and the jumps over one lead the scale-down's margin and the jump
	// floor price. Six hours, not one: the jumps are weighed by how often the
	// history shows them, and an hour (240 of the engine's 15 s windows) can
	// price no jump rarer than once an hour. A rare spike weighed at least
	// 1/240 for the hour after it, so the margin held up to five times the
	// pods while nothing came, then dropped to the calm's pods the moment it
	// left the window, often just before the next (docs/model.md section 2c,
	// "Round twenty-nine").
	DefaultWindow = 6 * time.Hour
	// DefaultRateWindow is the engine's long λ window, the cycle λ is read
	// over: three of the collector's default 5 s points. The newest point
	// alone is the fast path's short window (Workload.ShortArrivalRate), so
	// the engine sees a burst in one scrape and reads the count dispersion
	// from the short window's difference to the long one (docs/model.md
	// section 2b).
	DefaultRateWindow = 15 * time.Second
)

// RateWindows is the λ history the engine reads: the collector's points (each
// the rate over the interval since the point before it, oldest first) merged
// into windows of the given length laid back from the newest point, each the
// rate over the points in it (their rates weighted by their intervals) and
// timed at its end. A point belongs to the window that holds the middle of
// its interval, so a scrape a few milliseconds late does not move it to the
// next window. The first point's interval is taken as the next one's (its
// own start is before what was read). Windows without a point are left out
// (a collector that was down). A window of 0 or less, or fewer than two
// points, returns the points as they are.
//
// The simulator's qas passes its 5 s counts through this too, so both read
// λ over the same windows.
func RateWindows(points []decide.Sample, window time.Duration) []decide.Sample {
	if window <= 0 || len(points) < 2 {
		return points
	}
	end := points[len(points)-1].Time
	var out []decide.Sample
	var sum, span float64
	cur := -1 // the window index being summed, counted back from the newest
	flush := func() {
		if span > 0 {
			out = append(out, decide.Sample{Time: end.Add(-time.Duration(cur) * window), Rate: sum / span})
		}
		sum, span = 0, 0
	}
	for i := len(points) - 1; i >= 0; i-- {
		var dt time.Duration
		if i > 0 {
			dt = points[i].Time.Sub(points[i-1].Time)
		} else {
			dt = points[1].Time.Sub(points[0].Time)
		}
		if dt <= 0 {
			continue // a repeated or out-of-order time: no interval to weigh
		}
		k := int(end.Sub(points[i].Time.Add(-dt/2)) / window)
		if k != cur {
			flush()
			cur = k
		}
		sum += points[i].Rate * dt.Seconds()
		span += dt.Seconds()
	}
	flush()
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
