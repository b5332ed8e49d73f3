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
