package decide

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// burstHistory is 1-minute means over hours ending at end, of a base rate
// with deterministic noise (±5 %, seeded) and steps to level starting at the
// given onsets and lasting dur: what the store's aggregateWindow returns.
func burstHistory(end time.Time, hours float64, base, level float64, dur time.Duration, onsets []time.Time, seed uint64) []Sample {
	r := rand.New(rand.NewPCG(seed, 7))
	n := int(hours * 60)
	out := make([]Sample, 0, n)
	for i := n - 1; i >= 0; i-- {
		stop := end.Add(-time.Duration(i) * time.Minute)
		start := stop.Add(-time.Minute)
		// The share of the minute inside a burst, per second.
		in := 0.0
		for s := start; s.Before(stop); s = s.Add(time.Second) {
			for _, o := range onsets {
				if !s.Before(o) && s.Before(o.Add(dur)) {
					in++
					break
				}
			}
		}
		f := in / 60
		rate := (base*(1-f) + level*f) * (1 + 0.05*(2*r.Float64()-1))
		out = append(out, Sample{Time: stop, Rate: rate})
	}
	return out
}

// every returns the onsets t0 − k·period ± jitter (seeded) for the k that lie
// in (from, to], oldest first.
func every(anchor time.Time, period, jitter time.Duration, from, to time.Time, seed uint64) []time.Time {
	r := rand.New(rand.NewPCG(seed, 11))
	var out []time.Time
	for k := -1000; k <= 1000; k++ {
		t := anchor.Add(time.Duration(k) * period)
		if jitter > 0 {
			t = t.Add(time.Duration((2*r.Float64() - 1) * float64(jitter)))
		}
		if t.After(from) && !t.After(to) {
			out = append(out, t)
		}
	}
	return out
}

// poissonOnsets are onsets at random (a Poisson process of the given mean
// gap, seeded) in (from, to].
func poissonOnsets(from, to time.Time, gap time.Duration, seed uint64) []time.Time {
	r := rand.New(rand.NewPCG(seed, 13))
	var out []time.Time
	for t := from.Add(time.Duration(r.ExpFloat64() * float64(gap))); !t.After(to); t = t.Add(time.Duration(r.ExpFloat64() * float64(gap))) {
		out = append(out, t)
	}
	return out
}

// TestRecurrenceDetection: the detector finds periods it was not told (from
// 13 minutes to 2 hours), forecasts the next onset to within the history's
// step and the level the bursts reach, and finds nothing where nothing
// recurs: flat traffic, bursts at random, too few occurrences.
func TestRecurrenceDetection(t *testing.T) {
	end := t0
	lead := 45 * time.Second
	tests := []struct {
		name     string
		hours    float64
		period   time.Duration // 0: no recurrence expected
		onsets   []time.Time
		next     time.Time
		minOccur int
	}{
		{name: "13 min, jitter 20 s", hours: 6, period: 13 * time.Minute,
			onsets: every(end.Add(5*time.Minute), 13*time.Minute, 20*time.Second, end.Add(-6*time.Hour), end, 1),
			next:   end.Add(5 * time.Minute), minOccur: 20},
		{name: "37 min", hours: 6, period: 37 * time.Minute,
			onsets: every(end.Add(11*time.Minute+30*time.Second), 37*time.Minute, 0, end.Add(-6*time.Hour), end, 2),
			next:   end.Add(11*time.Minute + 30*time.Second), minOccur: 8},
		{name: "2 h over a day", hours: 24, period: 2 * time.Hour,
			onsets: every(end.Add(40*time.Minute), 2*time.Hour, 10*time.Second, end.Add(-24*time.Hour), end, 3),
			next:   end.Add(40 * time.Minute), minOccur: 10},
		{name: "flat", hours: 6},
		{name: "random bursts, mean gap 20 min, seed 1", hours: 24, onsets: poissonOnsets(end.Add(-24*time.Hour), end, 20*time.Minute, 1)},
		{name: "random bursts, mean gap 20 min, seed 2", hours: 24, onsets: poissonOnsets(end.Add(-24*time.Hour), end, 20*time.Minute, 2)},
		{name: "random bursts, mean gap 5 min", hours: 24, onsets: poissonOnsets(end.Add(-24*time.Hour), end, 5*time.Minute, 3)},
		{name: "two occurrences only", hours: 1.5,
			onsets: every(end.Add(10*time.Minute), 30*time.Minute, 0, end.Add(-70*time.Minute), end, 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := burstHistory(end, tt.hours, 100, 400, 4*time.Minute, tt.onsets, 9)
			r := detectRecurrence(h, lead, 0.95, 1)
			require.NotEmpty(t, r.Note)
			if tt.period == 0 {
				require.Zero(t, r.PeriodSeconds, r.Note)
				require.False(t, r.Active)
				return
			}
			require.InDelta(t, tt.period.Seconds(), r.PeriodSeconds, 10, r.Note)
			require.GreaterOrEqual(t, len(r.Occurrences), tt.minOccur, r.Note)
			require.LessOrEqual(t, r.Chance, recurAlpha)
			require.Equal(t, len(r.Occurrences), len(r.Levels))
			require.InDelta(t, tt.next.Sub(r.Next).Seconds(), 0, time.Minute.Seconds(), "next onset %s, want %s", r.Next, tt.next)
			// The lowest recent level: the burst's 400/s less the noise.
			require.InDelta(t, 400, r.Rate, 400*0.05+1e-9)
			require.False(t, r.Contradicted)
			require.Contains(t, r.Note, "bursts recur every")
		})
	}
}

// TestRecurrenceForecastWindow: the forecast applies from one lead (plus the
// tolerance) before the next onset to the tolerance after it, not before or
// after; a stale history, or a burst that did not come, turns it off.
func TestRecurrenceForecastWindow(t *testing.T) {
	period, lead := 20*time.Minute, 45*time.Second
	next := t0.Add(10 * time.Minute)
	h := burstHistory(t0, 6, 100, 500, 5*time.Minute, every(next, period, 0, t0.Add(-6*time.Hour), t0, 5), 3)
	tests := []struct {
		name   string
		now    time.Time
		active bool
	}{
		{"a history step after the newest sample, 10 min early", t0.Add(time.Minute), false},
		{"just outside a lead plus tolerance before", next.Add(-lead - time.Minute - 5*time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Engine
			r := e.recurrence(h, tt.now, lead, 0.95, 1)
			require.True(t, r.confirmed(), r.Note)
			require.Equal(t, tt.active, r.Active)
		})
	}
	// Inside the window (the history would be stale by then unless it is
	// fresh: advance it with flat minutes up to now).
	// (5 s inside its ends: the fitted onset is within seconds of the true one.)
	for _, now := range []time.Time{next.Add(-lead - time.Minute + 5*time.Second), next.Add(-lead), next, next.Add(time.Minute - 5*time.Second)} {
		fresh := extend(h, now, 100)
		var e Engine
		r := e.recurrence(fresh, now, lead, 0.95, 1)
		require.True(t, r.Active, "at %s: %s", now, r.Note)
		require.InDelta(t, 500, r.Rate, 25)
	}
	// After the tolerance past the onset, and the burst not there: the
	// forecast is off, and once the history shows the miss it is
	// contradicted.
	late := next.Add(2 * time.Minute)
	var e Engine
	r := e.recurrence(extend(h, late, 100), late, lead, 0.95, 1)
	require.False(t, r.Active)
	require.True(t, r.Contradicted, r.Note)
	require.Contains(t, r.Note, "did not come")
	require.False(t, r.confirmed())

	// A stale history: no forecast, whatever it says.
	r = e.recurrence(h, next.Add(-lead), lead, 0.95, 1)
	require.False(t, r.Active)
	require.Contains(t, r.Note, "stale")
}

// extend appends 1-minute samples at rate up to now.
func extend(h []Sample, now time.Time, rate float64) []Sample {
	out := append([]Sample(nil), h...)
	for t := out[len(out)-1].Time.Add(time.Minute); !t.After(now); t = t.Add(time.Minute) {
		out = append(out, Sample{Time: t, Rate: rate})
	}
	return out
}

// TestRecurrenceEvidenceScalesWithOnsetDensity: five onsets on a period
// are enough where onsets are rare, not among onsets everywhere (the chain
// must be unlikely by chance among the onsets seen), and three are never
// enough for a period found from two of them.
func TestRecurrenceEvidenceScalesWithOnsetDensity(t *testing.T) {
	lead := 45 * time.Second
	period := 40 * time.Minute
	rec := every(t0.Add(15*time.Minute), period, 0, t0.Add(-3*time.Hour-30*time.Minute), t0, 6)
	require.Len(t, rec, 5)
	sparse := burstHistory(t0, 3.6, 100, 400, 3*time.Minute, rec, 1)
	r := detectRecurrence(sparse, lead, 0.95, 1)
	require.InDelta(t, period.Seconds(), r.PeriodSeconds, 10, r.Note)
	require.Len(t, r.Occurrences, 5)

	// The same five among onsets at random every 6 minutes on average.
	noise := poissonOnsets(t0.Add(-3*time.Hour-30*time.Minute), t0, 6*time.Minute, 8)
	dense := burstHistory(t0, 3.6, 100, 400, 2*time.Minute, append(append([]time.Time(nil), rec...), noise...), 1)
	r = detectRecurrence(dense, lead, 0.95, 1)
	require.Zero(t, r.PeriodSeconds, r.Note)
	require.Greater(t, r.Onsets, 15)

	// Three on a period, alone: the third is the only evidence, and chance
	// gives it too often.
	three := burstHistory(t0, 2.5, 100, 400, 3*time.Minute, rec[2:], 1)
	r = detectRecurrence(three, lead, 0.95, 1)
	require.Zero(t, r.PeriodSeconds, r.Note)
	require.Contains(t, r.Note, "probability")
}

func TestBinomialTail(t *testing.T) {
	tests := []struct {
		n, k int
		q    float64
		want float64
	}{
		{5, 0, 0.3, 1},
		{5, 6, 0.3, 0},
		{3, 3, 0.5, 0.125},
		{4, 2, 0.5, 11.0 / 16},
		{10, 1, 0.1, 1 - math.Pow(0.9, 10)},
		{10, 3, 0, 0},
		{10, 3, 1, 1},
	}
	for _, tt := range tests {
		require.InDelta(t, tt.want, binomialTail(tt.n, tt.k, tt.q), 1e-12, "%+v", tt)
	}
}

// TestRecurrenceInDecisions: the engine scales up one lead before a forecast
// onset (past the scale-up rate limit), says why in the reason and the
// explanation (JSON too), never scales down for a forecast, and is reactive
// without a long history or with predictive scaling off.
func TestRecurrenceInDecisions(t *testing.T) {
	spec := queueSpec()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: 45 * time.Second}
	next := t0.Add(30 * time.Second)
	hist := burstHistory(t0, 6, 100, 400, 5*time.Minute, every(next, 20*time.Minute, 0, t0.Add(-6*time.Hour), t0, 1), 2)
	steady, err := NewEngine().Decide(spec, snapshot(t0, 100, 0.04, 8))
	require.NoError(t, err)
	require.Nil(t, steady.Explanation.Recurrence, "no long history, no detector")
	n := steady.DesiredReplicas

	s := snapshot(t0, 100, 0.04, n)
	s.History = hist
	d, err := NewEngine().Decide(spec, s) // The default rate limit: max(4 pods, 100 %) per 15 s.
	require.NoError(t, err)
	x := d.Explanation
	require.NotNil(t, x.Recurrence)
	require.True(t, x.Recurrence.Active, x.Recurrence.Note)
	require.InDelta(t, 400, x.SizingArrivalRate, 25)
	at := spec
	at.Behavior = immediate()
	burst, err := NewEngine().Decide(at, snapshot(t0, x.Recurrence.Rate, 0.04, n))
	require.NoError(t, err)
	require.Equal(t, burst.DesiredReplicas, d.DesiredReplicas, x.Reason)
	require.Greater(t, d.DesiredReplicas, 2*n, "past the 100 %% rate limit: %s", x.Reason)
	require.Contains(t, x.Reason, "recurring bursts")
	require.Contains(t, x.Reason, "rate limit is lifted")
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(b), `"recurrence":{"periodSeconds":`)
	require.Contains(t, string(b), `"active":true`)

	// Predictive off (qas-reactive): no detector.
	spec.Predictive.Enabled = false
	d, err = NewEngine().Decide(spec, s)
	require.NoError(t, err)
	require.Nil(t, d.Explanation.Recurrence)
	require.Equal(t, n, d.DesiredReplicas)

	// Never down for a forecast: with more pods than now needs and the
	// forecast onset a lead away, the pods the forecast needs stay.
	spec.Predictive.Enabled = true
	s.CurrentReplicas, s.ReadyReplicas = burst.DesiredReplicas, burst.DesiredReplicas
	d, err = NewEngine().Decide(spec, s)
	require.NoError(t, err)
	require.Equal(t, burst.DesiredReplicas, d.DesiredReplicas, d.Explanation.Reason)
}

func TestHistoryValidated(t *testing.T) {
	s := snapshot(t0, 100, 0.04, 4)
	s.History = []Sample{{Time: t0.Add(-2 * time.Minute), Rate: 1}, {Time: t0.Add(-time.Minute), Rate: math.NaN()}, {Time: t0.Add(-time.Minute), Rate: 1}}
	_, err := NewEngine().Decide(queueSpec(), s)
	require.ErrorContains(t, err, "snapshot.history[1].rate")
	require.ErrorContains(t, err, "snapshot.history[2].time")
}

// BenchmarkDetectRecurrence: one detection over a day of 1-minute means,
// with bursts every 20 minutes (72 onsets) and with random ones (the pairs
// tried grow with the onsets squared). The controller runs it once per
// workload and cycle (its engine is rebuilt from the stored state); the
// simulator's engine once per new history step.
func BenchmarkDetectRecurrence(b *testing.B) {
	for _, bc := range []struct {
		name   string
		onsets []time.Time
	}{
		{"recurring every 20 min", every(t0.Add(5*time.Minute), 20*time.Minute, 20*time.Second, t0.Add(-24*time.Hour), t0, 1)},
		{"random, mean gap 20 min", poissonOnsets(t0.Add(-24*time.Hour), t0, 20*time.Minute, 1)},
	} {
		h := burstHistory(t0, 24, 100, 400, 4*time.Minute, bc.onsets, 9)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				detectRecurrence(h, 45*time.Second, 0.95, 1)
			}
		})
	}
}
