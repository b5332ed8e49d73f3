package decide

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Recurring bursts (issue #15 item 7): much traffic bursts on a clock (top of
// the hour, cron jobs, batch loads). The detector looks in λ's long history
// (Snapshot.History, the store's 1-minute means over a day) for onsets, steps
// of λ well above its local baseline, and for a period at which they recur; when
// the evidence is strong enough that chance alone would rarely give it, it
// forecasts the next onset and the rate its bursts reach, and the engine
// starts pods one lead before it. Nothing recurring, too little evidence, a
// stale history or a forecast burst that did not come: the engine is
// reactive as before. docs/model.md §2d has the rule and why its constants
// are not fitted to a trace.
const (
	// recurJump: an onset is a step to at least this multiple of the local
	// baseline, with the step's count proving it at the SLO's confidence.
	// Smaller rises are the scale-down margin's (its jump ratios) and the
	// trend forecast's to cover; this one is about bursts that need pods
	// the steady state does not keep.
	recurJump = 1.5
	// recurAlpha is the false-alarm probability allowed per detection: a
	// chain of onsets is taken as a recurrence only when onsets scattered at
	// random, as many as the history holds, would give a chain as good with
	// at most this probability over all the candidate periods tried.
	recurAlpha = 0.01
	// recurMinOccurrences: a period needs at least three onsets on it (two
	// define any period; the third is the first evidence).
	recurMinOccurrences = 3
	// recurBaselineSteps and recurBaselineLeads: the local baseline is the
	// lower quartile of the history over the preceding max(10 steps, 5
	// leads): bursts that fill up to three quarters of it (a short period,
	// long bursts) do not move it.
	recurBaselineSteps = 10
	recurBaselineLeads = 5
	// recurLevels: the forecast rate is the lowest of the newest occurrences'
	// levels, at most this many (the level every recent burst reached).
	recurLevels = 5
	// recurStaleSteps: a history whose newest sample is older than this many
	// steps is stale (the collector or the store stopped): no forecast.
	recurStaleSteps = 3
)

// Recurrence is what the detector found in the long history, for the
// explanation: the period, the onsets that recur on it, the evidence and the
// forecast. Period 0: no recurrence (Note says why).
type Recurrence struct {
	// PeriodSeconds is the period the onsets recur at (fitted through them).
	PeriodSeconds float64 `json:"periodSeconds,omitempty"`
	// Occurrences are the onsets on the period, oldest first, and Levels the
	// highest λ (the history's step means) each reached within a lead of it.
	Occurrences []time.Time `json:"occurrences,omitempty"`
	Levels      []float64   `json:"levels,omitempty"`
	// Expected is how many onsets the period expected in the history (the
	// occurrences and the misses); Confidence the share that came.
	Expected   int     `json:"expected,omitempty"`
	Confidence float64 `json:"confidence,omitempty"`
	// Chance is the probability that onsets at random, as dense as the
	// history's, would give a chain this good at one of the periods tried:
	// the evidence; it must be at most recurAlpha.
	Chance float64 `json:"chance,omitempty"`
	// Onsets is the number of onsets found in the history, whatever their
	// period; HistorySeconds its span.
	Onsets         int     `json:"onsets"`
	HistorySeconds float64 `json:"historySeconds"`
	// Next is the forecast onset, ToleranceSeconds how far from it an onset
	// still counts (the history's step).
	Next             time.Time `json:"next,omitzero"`
	ToleranceSeconds float64   `json:"toleranceSeconds,omitempty"`
	// Rate is the forecast λ of the next burst (the lowest recent level);
	// Active is true from one lead (plus the tolerance) before Next until the
	// tolerance after it: the engine sizes for Rate then.
	Rate   float64 `json:"rate,omitempty"`
	Active bool    `json:"active"`
	// Contradicted is true when the burst the period forecast last did not
	// come: the engine is reactive until the onsets recur again.
	Contradicted bool   `json:"contradicted,omitempty"`
	Note         string `json:"note"`
}

// confirmed reports whether the recurrence holds: a period with enough
// evidence whose last forecast was not contradicted.
func (r *Recurrence) confirmed() bool {
	return r != nil && r.PeriodSeconds > 0 && !r.Contradicted
}

// explains reports whether a jump measured at t (λ over (t, t+lead] against
// (t−lead, t]) is one of the recurrence's onsets (an occurrence or the next):
// those jumps are the forecast's to meet, not the scale-down margin's.
func (r *Recurrence) explains(t time.Time, lead time.Duration) bool {
	tol := time.Duration(r.ToleranceSeconds * float64(time.Second))
	in := func(o time.Time) bool { return !t.Before(o.Add(-lead-tol)) && !t.After(o.Add(tol)) }
	if !r.Next.IsZero() && in(r.Next) {
		return true
	}
	for _, o := range r.Occurrences {
		if in(o) {
			return true
		}
	}
	return false
}

// onset is a step of λ over its local baseline: when (interpolated inside the
// history's step), and the highest λ it reached within a lead.
type onset struct {
	at    time.Time
	level float64
}

// recurCache keeps the last detection: the history changes once per step
// (a minute), the engine decides every few seconds.
type recurCache struct {
	last, first time.Time
	n           int
	lead        time.Duration
	r           Recurrence
}

// recurrence returns the detection for the history (cached while the history
// and the lead are unchanged) with its forecast evaluated at now.
func (e *Engine) recurrence(hist []Sample, now time.Time, lead time.Duration, conf, disp float64) Recurrence {
	c := e.recur
	if c == nil || c.n != len(hist) || len(hist) == 0 || !c.last.Equal(hist[len(hist)-1].Time) ||
		!c.first.Equal(hist[0].Time) || c.lead != lead {
		c = &recurCache{n: len(hist), lead: lead, r: detectRecurrence(hist, lead, conf, disp)}
		if len(hist) > 0 {
			c.first, c.last = hist[0].Time, hist[len(hist)-1].Time
		}
		e.recur = c
	}
	r := c.r
	r.Occurrences, r.Levels = slices.Clone(r.Occurrences), slices.Clone(r.Levels)
	r.forecastAt(hist, now, lead)
	return r
}

// forecastAt decides whether the forecast applies at now: the history must be
// fresh, and now within [Next − lead − tolerance, Next + tolerance].
func (r *Recurrence) forecastAt(hist []Sample, now time.Time, lead time.Duration) {
	if len(hist) < 2 {
		return
	}
	step := hist[len(hist)-1].Time.Sub(hist[len(hist)-2].Time)
	if age := now.Sub(hist[len(hist)-1].Time); step > 0 && age > recurStaleSteps*step {
		r.Active = false
		r.Note = fmt.Sprintf("history stale: its newest sample is %s old (more than %d steps of %s); reactive", age.Round(time.Second), recurStaleSteps, step)
		return
	}
	if !r.confirmed() || r.Next.IsZero() {
		return
	}
	tol := time.Duration(r.ToleranceSeconds * float64(time.Second))
	r.Active = !now.Before(r.Next.Add(-lead-tol)) && !now.After(r.Next.Add(tol))
}

// detectRecurrence finds onsets in hist (equally spaced step means, oldest
// first) and the period, if any, at which they recur with enough evidence.
func detectRecurrence(hist []Sample, lead time.Duration, conf, disp float64) Recurrence {
	var r Recurrence
	if len(hist) < 3 {
		r.Note = "no long history: reactive"
		return r
	}
	step := hist[1].Time.Sub(hist[0].Time)
	if step <= 0 {
		r.Note = "long history not equally spaced: reactive"
		return r
	}
	for i := 2; i < len(hist); i++ {
		if d := hist[i].Time.Sub(hist[i-1].Time); d != step {
			// Gaps (the store leaves out empty windows) are fine; anything
			// not a whole number of steps is not this history.
			if d <= 0 || d%step != 0 {
				r.Note = "long history not on one step: reactive"
				return r
			}
		}
	}
	span := hist[len(hist)-1].Time.Sub(hist[0].Time)
	r.HistorySeconds = span.Seconds()
	tol := step
	r.ToleranceSeconds = tol.Seconds()
	base := max(recurBaselineSteps, int(math.Ceil(recurBaselineLeads*lead.Seconds()/step.Seconds())))
	onsets := findOnsets(hist, step, base, lead, conf, disp)
	r.Onsets = len(onsets)
	// Onsets can be seen only after a baseline's worth of history.
	visible := hist[0].Time.Add(time.Duration(base) * step)
	usable := hist[len(hist)-1].Time.Sub(visible)
	minPeriod := max(4*step, 2*(lead+tol))
	maxPeriod := usable / (recurMinOccurrences - 1)
	if len(onsets) < recurMinOccurrences || maxPeriod < minPeriod {
		r.Note = fmt.Sprintf("%d onsets in %s of history: too few for a recurring period (at least %d, at most %s apart); reactive",
			len(onsets), span.Round(time.Minute), recurMinOccurrences, maxPeriod.Round(time.Second))
		return r
	}
	// The chance an expected onset falls on a random one: the onsets'
	// density times the tolerance window.
	q := math.Min(1, float64(len(onsets))*2*tol.Seconds()/usable.Seconds())
	type chain struct {
		hits, expected, missedAfter int
		idx                         []int     // onset indices, the anchor first
		ks                          []float64 // slot numbers (anchor 0, earlier negative)
	}
	// Seconds since the history's start: the inner loops run on floats.
	t0 := hist[0].Time
	ts := make([]float64, len(onsets))
	for i, o := range onsets {
		ts[i] = o.at.Sub(t0).Seconds()
	}
	tolS, visibleS, lastS := tol.Seconds(), visible.Sub(t0).Seconds(), hist[len(hist)-1].Time.Sub(t0).Seconds()
	minS, maxS := minPeriod.Seconds(), maxPeriod.Seconds()
	nearest := func(t float64) int {
		i := sort.SearchFloat64s(ts, t)
		best, bd := -1, tolS
		for _, j := range []int{i - 1, i} {
			if j >= 0 && j < len(ts) {
				if d := math.Abs(ts[j] - t); d <= bd {
					best, bd = j, d
				}
			}
		}
		return best
	}
	var cands []chain
	tried := 0
	hitBy := make([]int, len(onsets)) // the anchor whose earlier chain hit the onset, +1
	for b := range onsets {
		for a := b - 1; a >= 0; a-- {
			p := ts[b] - ts[a]
			if p < minS {
				continue
			}
			if p > maxS {
				break
			}
			tried++
			// A chain of this anchor already went through a: this pair's
			// period is a multiple of that chain's, with weaker evidence.
			// An anchor more than the longest period back has a past slot
			// after it: its chain is another anchor's or contradicted.
			if hitBy[a] == b+1 || ts[b] < lastS-maxS-tolS {
				continue
			}
			c := chain{hits: 1, expected: 1, idx: []int{b}, ks: []float64{0}}
			period := p
			for k := 1; ; k++ {
				e := ts[b] - float64(k)*period
				if e < visibleS-tolS {
					break
				}
				c.expected++
				if j := nearest(e); j >= 0 && j < b {
					c.hits++
					c.idx = append(c.idx, j)
					c.ks = append(c.ks, -float64(k))
					hitBy[j] = b + 1
					period = (ts[b] - ts[j]) / float64(k) // refine
				}
			}
			// Forward of the anchor: a slot wholly in the past with an onset
			// is another anchor's chain; one without is a miss.
			later := false
			for k := 1; ; k++ {
				e := ts[b] + float64(k)*period
				if e+tolS > lastS {
					break
				}
				if nearest(e) >= 0 {
					later = true
					break
				}
				c.expected++
				c.missedAfter++
			}
			if later || c.hits < recurMinOccurrences {
				continue
			}
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		r.Note = fmt.Sprintf("%d onsets in %s of history, no %d of them on one period: reactive", len(onsets), span.Round(time.Minute), recurMinOccurrences)
		return r
	}
	best, bestChance := -1, math.Inf(1)
	for i, c := range cands {
		// Given the anchor and the partner that set the period (both hit by
		// construction), the other expected slots hit by chance with
		// probability q each; Bonferroni over every pair tried.
		ch := math.Min(1, float64(tried)*binomialTail(c.expected-2, c.hits-2, q))
		// The strongest evidence wins: a multiple of the period holds as
		// many of its (fewer) slots, but is likelier by chance.
		if best < 0 || ch < bestChance || (ch == bestChance && c.hits > cands[best].hits) {
			best, bestChance = i, ch
		}
	}
	c := cands[best]
	if bestChance > recurAlpha {
		r.Chance = bestChance
		r.Note = fmt.Sprintf("%d onsets in %s of history; the best period holds %d of %d, which random onsets as dense would give with probability %.2g (more than %g): reactive",
			len(onsets), span.Round(time.Minute), c.hits, c.expected, bestChance, recurAlpha)
		return r
	}
	// The period and the next onset from a least-squares line through the
	// occurrences (slot number against time): jitter averages out.
	times := make([]time.Time, len(c.idx))
	for i, j := range c.idx {
		times[i] = onsets[j].at
	}
	slope, icpt := fitLine(c.ks, times, onsets[c.idx[0]].at)
	r.PeriodSeconds = slope
	r.Next = onsets[c.idx[0]].at.Add(time.Duration((icpt + slope) * float64(time.Second)))
	order := make([]int, len(c.idx))
	for i := range order {
		order[i] = len(c.idx) - 1 - i
	}
	for _, i := range order {
		r.Occurrences = append(r.Occurrences, times[i])
		r.Levels = append(r.Levels, onsets[c.idx[i]].level)
	}
	r.Expected, r.Confidence, r.Chance = c.expected, float64(c.hits)/float64(c.expected), bestChance
	lv := r.Levels[max(0, len(r.Levels)-recurLevels):]
	r.Rate = slices.Min(lv)
	if c.missedAfter > 0 {
		r.Contradicted = true
		missed := onsets[c.idx[0]].at.Add(time.Duration(slope * float64(time.Second)))
		r.Note = fmt.Sprintf("bursts recurred every %s (%d of %d expected, chance %.2g), but the one expected at %s did not come: reactive until they recur",
			time.Duration(slope*float64(time.Second)).Round(time.Second), c.hits, c.expected, bestChance, missed.UTC().Format(time.RFC3339))
		return r
	}
	r.Note = fmt.Sprintf("bursts recur every %s: %d of %d expected onsets came (chance %.2g); next at %s, forecast λ %.4g/s (lowest of the last %d levels)",
		time.Duration(slope*float64(time.Second)).Round(time.Second), c.hits, c.expected, bestChance, r.Next.UTC().Format(time.RFC3339), r.Rate, len(lv))
	return r
}

// findOnsets returns the steps of λ to at least recurJump × the lower quartile of
// the preceding base samples whose count proves the rise at confidence conf,
// whose previous sample was below that threshold (a burst has one onset) and
// after which λ's mean over the next lead's whole steps is proven above it too
// (so an onset in the newest sample is seen a step later).
// The onset time is interpolated inside the step from how far its mean rose
// towards the next sample's.
func findOnsets(hist []Sample, step time.Duration, base int, lead time.Duration, conf, disp float64) []onset {
	var out []onset
	window := make([]float64, 0, base)
	// provenRate's bound with its z computed once.
	z := normalQuantile(conf) * math.Sqrt(math.Max(disp, 1))
	proven := func(rate float64, w time.Duration) float64 {
		r := math.Sqrt(math.Max(rate, 0)*w.Seconds()) - z/2
		if r <= 0 {
			return 0
		}
		return r * r / w.Seconds()
	}
	after := max(1, int(math.Ceil(lead.Seconds()/step.Seconds())))
	for i := base; i < len(hist); i++ {
		// The baseline: the samples of the preceding base steps (gaps in the
		// history are left out).
		window = window[:0]
		from := hist[i].Time.Add(-time.Duration(base) * step)
		for j := i - 1; j >= 0 && j >= i-base && hist[j].Time.After(from); j-- {
			window = append(window, hist[j].Rate)
		}
		if len(window) < base/2 {
			continue
		}
		slices.Sort(window)
		b := window[len(window)/4]
		if b <= 0 {
			continue
		}
		thr := recurJump * b
		cur, prev := hist[i].Rate, hist[i-1].Rate
		if prev >= thr || proven(cur, step) < thr || i+after >= len(hist) {
			continue
		}
		// A burst, not a blip: λ's mean over the whole steps of the next lead
		// (at least one) is proven above the threshold too. What lasts less
		// than that the pods' queues absorb (docs/model.md §2c).
		level, sum := cur, 0.0
		for j := i + 1; j <= i+after; j++ {
			level = math.Max(level, hist[j].Rate)
			sum += hist[j].Rate
		}
		if proven(sum/float64(after), time.Duration(after)*step) < thr {
			continue
		}
		// The step's mean is b·(1−f) + level·f when the onset is f of the
		// step before its end.
		f := 1.0
		if level > b {
			f = math.Min(1, math.Max(0, (cur-b)/(level-b)))
		}
		at := hist[i].Time.Add(-time.Duration(f * float64(step)))
		out = append(out, onset{at: at, level: level})
	}
	return out
}

// fitLine fits t = icpt + slope·k (seconds from t0) by least squares.
func fitLine(ks []float64, ts []time.Time, t0 time.Time) (slope, icpt float64) {
	f := fitCentred(len(ks), func(i int) (float64, float64) { return ks[i], ts[i].Sub(t0).Seconds() })
	return f.slope, f.value(0)
}

// binomialTail is P(X ≥ k) for X ~ Binomial(n, q), summed in logs.
func binomialTail(n, k int, q float64) float64 {
	if k <= 0 {
		return 1
	}
	if k > n || q <= 0 {
		return 0
	}
	if q >= 1 {
		return 1
	}
	var s float64
	lq, l1q := math.Log(q), math.Log1p(-q)
	for i := k; i <= n; i++ {
		lc, _ := math.Lgamma(float64(n + 1))
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(lc - a - b + float64(i)*lq + float64(n-i)*l1q)
	}
	return math.Min(1, s)
}

// DetectRecurrence runs the recurring-burst detector on a long history (equally
// spaced step means, oldest first) as the engine does at now with the given
// lead: the period and evidence, and whether the forecast applies at now. conf
// is the confidence of the onsets' count test (the SLO's percentile / 100) and
// disp the arrival counts' index of dispersion (1: Poisson). For evaluations
// of the detector outside the engine; it keeps no state.
func DetectRecurrence(hist []Sample, now time.Time, lead time.Duration, conf, disp float64) Recurrence {
	r := detectRecurrence(hist, lead, conf, disp)
	r.forecastAt(hist, now, lead)
	return r
}
