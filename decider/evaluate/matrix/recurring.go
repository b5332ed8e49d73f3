package matrix

import (
	"sort"
	"time"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
)

// RecurringHistory is how much of the recurring workload's past the cells
// give the policies (what InfluxDB would hold before the replay): enough for
// the slowest clock the pattern draws (45 minutes) to recur eight times.
const RecurringHistory = 6 * time.Hour

// RecurringWorkload is the synthetic traffic with bursts on a clock
// (trace.Recurring) at ×20, its seventh hour replayed after six hours of
// history.
func RecurringWorkload() Workload {
	return Workload{Name: "recurring-x20", Source: trace.PatternRecurring, Window: hours(6, 7), Scale: 20, History: RecurringHistory, Shape: ShapeRecurring}
}

// recurringCells are the recurring workload's cells: seeds 1–3 (each draws
// its own period, size and length) under the first setting, through a
// Service. A cell costs about as much as a one-hour NASA cell (the history
// is read once, not simulated), so three keep `make evaluate` within its
// budget.
func recurringCells() []Cell {
	var cells []Cell
	for seed := uint64(1); seed <= 3; seed++ {
		cells = append(cells, Cell{Workload: RecurringWorkload(), Setting: Settings()[0], Seed: seed, Routing: sim.RouteRandom})
	}
	return cells
}

// RecurrenceScan is how the recurring-burst detector behaves over a whole
// trace: run at regular times on the long history up to each (as the
// decider would see it), how often it held a period, and how many of the
// onsets it forecast came.
type RecurrenceScan struct {
	// Evaluations is the times the detector ran; Confirmed those at which it
	// held a period (a forecast was in force; on a trace without recurring
	// bursts, each is a false positive).
	Evaluations, Confirmed int
	// Forecasts is the distinct onsets it forecast, Came those an onset came
	// within the tolerance of (judged by the detector itself once the
	// history covers them).
	Forecasts, Came int
}

// ConfirmedShare is Confirmed / Evaluations (0 without evaluations).
func (s RecurrenceScan) ConfirmedShare() float64 {
	if s.Evaluations == 0 {
		return 0
	}
	return float64(s.Confirmed) / float64(s.Evaluations)
}

// ScanRecurrence runs the detector every `every` over a trace of arrival
// counts per second, on the minute means of the last span, with the given
// lead, at p95's confidence and the counts' dispersion as the engine measures
// it (Dispersion); each new forecast onset is judged by the detector run a
// lead and three minutes after it (when the history shows the onset).
func ScanRecurrence(perSecond []float64, every, span, lead time.Duration) RecurrenceScan {
	var mins []decide.Sample
	for i := 0; i+60 <= len(perSecond); i += 60 {
		var s float64
		for _, v := range perSecond[i : i+60] {
			s += v
		}
		mins = append(mins, decide.Sample{Time: scanEpoch.Add(time.Duration(i+60) * time.Second), Rate: s / 60})
	}
	window := func(now time.Time) []decide.Sample {
		lo := sort.Search(len(mins), func(i int) bool { return mins[i].Time.After(now.Add(-span)) })
		hi := sort.Search(len(mins), func(i int) bool { return mins[i].Time.After(now) })
		return mins[lo:hi]
	}
	const conf = 0.95
	disp := Dispersion(perSecond)
	var out RecurrenceScan
	seen := map[time.Time]bool{}
	step := int(every / time.Minute)
	for i := step - 1; i < len(mins); i += step {
		now := mins[i].Time
		r := decide.DetectRecurrence(window(now), now, lead, conf, disp)
		out.Evaluations++
		if r.PeriodSeconds == 0 || r.Contradicted {
			continue
		}
		out.Confirmed++
		next := r.Next.Truncate(time.Second)
		// Judged once the history shows the onset: its step, the whole
		// steps of the lead after it (the detector's persistence test) and
		// the tolerance.
		judge := r.Next.Add(lead + 3*time.Minute)
		if seen[next] || judge.After(mins[len(mins)-1].Time) {
			continue
		}
		seen[next] = true
		out.Forecasts++
		at := judge.Truncate(time.Minute)
		later := decide.DetectRecurrence(window(at), at, lead, conf, disp)
		tol := time.Duration(later.ToleranceSeconds * float64(time.Second))
		for _, o := range later.Occurrences {
			if d := o.Sub(r.Next); d >= -tol && d <= tol {
				out.Came++
				break
			}
		}
	}
	return out
}

// Dispersion is the index of dispersion of arrival counts the engine would
// measure on the trace's steady stretches (1 for Poisson arrivals, about the
// batch size for arrivals in batches; at least 1): from r = (N − λw)²/(λw) over
// each 5 s window, λ the rate over its 15 s cycle. For Poisson counts r is
// (2/3)·χ²₁, whose median is 0.303; the median, unlike the mean, is not moved by
// the few windows on a burst's edge.
func Dispersion(perSecond []float64) float64 {
	var rs []float64
	for i := 0; i+15 <= len(perSecond); i += 15 {
		var c15 float64
		for _, v := range perSecond[i : i+15] {
			c15 += v
		}
		if c15 == 0 {
			continue
		}
		mean := c15 / 3
		for j := i; j < i+15; j += 5 {
			var c5 float64
			for _, v := range perSecond[j : j+5] {
				c5 += v
			}
			rs = append(rs, (c5-mean)*(c5-mean)/mean)
		}
	}
	if len(rs) == 0 {
		return 1
	}
	sort.Float64s(rs)
	return max(1, rs[len(rs)/2]/poissonMedianR)
}

// poissonMedianR is the median of (2/3)·χ²₁.
const poissonMedianR = 2.0 / 3 * 0.454936

// scanEpoch dates the scanned traces' seconds.
var scanEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
