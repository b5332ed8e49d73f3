package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// feed gives a policy pods at utilisation util for one of its periods.
type feeder struct {
	now  float64
	pods []Pod
}

func (f *feeder) step(p Policy, util float64) int {
	f.now += p.Period()
	for i := range f.pods {
		f.pods[i].BusyCum += util * f.pods[i].CPU * p.Period()
	}
	d := p.Decide(&Observation{Now: f.now, Pods: f.pods})
	for len(f.pods) < d.Replicas {
		f.pods = append(f.pods, Pod{ID: len(f.pods) + 100, Ready: true, CPU: 1})
	}
	f.pods = f.pods[:d.Replicas]
	return d.Replicas
}

func newFeeder(n int) *feeder {
	f := &feeder{}
	for i := 0; i < n; i++ {
		f.pods = append(f.pods, Pod{ID: i, Ready: true, CPU: 1})
	}
	return f
}

func TestAlg1OneStepHistory(t *testing.T) {
	a := NewOneStep(params, 0.5)
	f := newFeeder(1)
	f.step(a, 0) // first sample: no previous measurement
	var got []int
	for _, u := range []float64{1.0, 0.2, 0.2, 0.9, 0.9} {
		got = append(got, f.step(a, u))
	}
	// up after up: HPA equation; down after up: −1; down after down: equation;
	// up after down: +1; up after up: equation (⌈2·0.9/0.5⌉ = 4).
	require.Equal(t, []int{2, 1, 1, 2, 4}, got)
}

func TestAlg2AndAlg3Windows(t *testing.T) {
	a2, a3 := NewWindowed(params, 0.5, false), NewWindowed(params, 0.5, true)
	f2, f3 := newFeeder(1), newFeeder(1)
	f2.step(a2, 0)
	f3.step(a3, 0)
	var got2, got3 []int
	for i := 0; i < 6; i++ {
		got2 = append(got2, f2.step(a2, 1.0))
		got3 = append(got3, f3.step(a3, 1.0))
	}
	// Rolling: acts every minute on the window so far.
	require.Equal(t, 2, got2[0])
	require.Greater(t, got2[5], got2[0])
	// Moving window: waits for five measurements, then acts once per five minutes.
	require.Equal(t, []int{1, 1, 1, 1, 2, 2}, got3)
	// Only every fifth call is a decision (seed 004's metrics sample those).
	f3.now += Alg4Measure
	for i := 0; i < 3; i++ {
		f3.now += Alg4Measure
		for j := range f3.pods {
			f3.pods[j].BusyCum += 2 * Alg4Measure
		}
		require.True(t, a3.Decide(&Observation{Now: f3.now, Pods: f3.pods}).MeasureOnly)
	}
}

func TestPredictiveHPAUsesTheTrendAndCooldowns(t *testing.T) {
	h := NewPredictiveHPA(params, 0.5)
	f := newFeeder(2)
	f.step(h, 0)
	// A rising utilisation: 0.5, 0.55 are within tolerance of the goal but the
	// line through them, extrapolated by the init time, is not.
	require.Equal(t, 2, f.step(h, 0.5))
	obs := &Observation{Now: f.now + 30, Pods: f.pods, InitTimes: []float64{600}}
	for i := range f.pods {
		f.pods[i].BusyCum += 0.55 * 30
	}
	up := h.Decide(obs).Replicas
	require.Greater(t, up, 2, "the forecast scales up before the reactive ratio would")
	// Within 3 minutes of that rescale, no further scale-up.
	for i := range f.pods {
		f.pods[i].BusyCum += 2 * 30
	}
	require.Equal(t, len(f.pods), h.Decide(&Observation{Now: f.now + 60, Pods: f.pods}).Replicas)
}

// TestCooldownHPA: the HPA of seed 000's time rescales only when the last
// rescale is more than 3 minutes old (up) or 5 minutes old (down).
func TestCooldownHPA(t *testing.T) {
	h := NewCooldownHPA(params, 0.5)
	require.Equal(t, "hpa-cooldown", h.Name())
	require.Equal(t, 30.0, h.Period())
	f := newFeeder(2)
	f.step(h, 0) // no previous sample
	var got []int
	// Sync k is at 30·k s after the first rescale. Up at once (no rescale
	// yet: 2 × 1.0/0.5 = 4), held while 30·k ≤ 180, up again at k = 7
	// (210 s); down (⌈0.1/0.5 × 8⌉ = 2) is held while 30·k − 210 ≤ 300, so
	// until k = 18.
	for range 8 {
		got = append(got, f.step(h, 1.0))
	}
	for range 11 {
		got = append(got, f.step(h, 0.1))
	}
	require.Equal(t, []int{4, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 2}, got)
}

// TestPredictiveHPAHistoryWindow: the line is fitted through the
// utilisations of the last p·c seconds only (p the mean init time, c = 20,
// at most 3 minutes).
func TestPredictiveHPAHistoryWindow(t *testing.T) {
	for _, tc := range []struct {
		init float64
		want int
	}{
		{init: 5, want: 4},   // p·c = 100 s: now and 30, 60, 90 s before
		{init: 120, want: 6}, // capped at 180 s: now and up to 150 s before
		{init: 0, want: 1},   // no pod has initialised: the current value only
	} {
		h := NewPredictiveHPA(params, 0.5)
		f := newFeeder(4)
		f.step(h, 0)
		var inits []float64
		if tc.init > 0 {
			inits = []float64{tc.init}
		}
		for range 12 {
			f.now += PredictiveHPASync
			for i := range f.pods {
				f.pods[i].BusyCum += 0.5 * PredictiveHPASync
			}
			require.Equal(t, 4, h.Decide(&Observation{Now: f.now, Pods: f.pods, InitTimes: inits}).Replicas, "on target")
		}
		require.Len(t, h.ts, tc.want, "init %v s", tc.init)
		require.Equal(t, f.now, h.ts[len(h.ts)-1])
	}
	require.Empty(t, NewCooldownHPA(params, 0.5).ts, "the reactive HPA keeps no history")
}

func TestAlg1Period(t *testing.T) {
	require.Equal(t, 120.0, NewOneStep(params, 0.5).Period(), "seed 004's Table 4.1: 2 minutes")
	p := params
	p.Alg1Period = 300
	require.Equal(t, 300.0, NewOneStep(p, 0.5).Period())
}

// TestAlg2HoldsWithoutAMeasurement: a minute in which no Ready pod has a
// sample (all replaced) holds the count instead of dividing 0 by 0.
func TestAlg2HoldsWithoutAMeasurement(t *testing.T) {
	a := NewWindowed(params, 0.5, false)
	f := newFeeder(2)
	f.step(a, 0)
	require.Equal(t, 2, f.step(a, 1.0), "n = ⌈1 × 1.0/0.5⌉")
	// New pods only: none has a previous sample. (Before the guard the
	// utilisation was 0/0 and the count fell to the minimum.)
	obs := &Observation{Now: f.now + 60, Pods: []Pod{{ID: 900, Ready: true, CPU: 1}, {ID: 901, Ready: true, CPU: 1}, {ID: 902, CPU: 1}}}
	require.Equal(t, 3, a.Decide(obs).Replicas)
}
