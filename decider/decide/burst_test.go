package decide

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// burstSpec is queueSpec with a 45 s lead, scaling at once, and the declared
// rise b.
func burstSpec(b Burst) Spec {
	spec := queueSpec()
	spec.Behavior = immediate()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: 45 * time.Second}
	spec.Burst = b
	return spec
}

// TestADeclaredRiseHoldsPodsBeforeAnyJump: on a flat history the floor is the
// steady state's; a declared 5× rise once an hour puts one under the pods
// before any rise was seen, weighing lead ÷ every of the leads. A rarer rise
// keeps no more pods, a larger one no fewer; the reason and the explanation
// say so.
func TestADeclaredRiseHoldsPodsBeforeAnyJump(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	plain, err := NewEngine().Decide(burstSpec(Burst{}), recurring(now, 20, 1, 0.04, 6))
	require.NoError(t, err)
	n := plain.DesiredReplicas
	require.LessOrEqual(t, plain.Explanation.JumpReplicas, n)
	require.Zero(t, plain.Explanation.DeclaredRise)

	hourly, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: time.Hour}), recurring(now, 20, 1, 0.04, n))
	require.NoError(t, err)
	x := hourly.Explanation
	require.Greater(t, x.JumpReplicas, n, x.Reason)
	require.Equal(t, x.JumpReplicas, hourly.DesiredReplicas)
	require.LessOrEqual(t, x.JumpLateShare, 0.05)
	require.InDelta(t, 5, x.DeclaredRise, 0)
	require.InDelta(t, 45.0/3600, x.DeclaredRiseWeight, 1e-9, "a flat history has no lead at 5× or more")
	require.Contains(t, x.Reason, "and the declared rise ×5 every 1h0m0s, weighing 0.0125 of the leads")

	daily, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: 24 * time.Hour}), recurring(now, 20, 1, 0.04, n))
	require.NoError(t, err)
	require.LessOrEqual(t, daily.Explanation.JumpReplicas, x.JumpReplicas)
	byDefault, err := NewEngine().Decide(burstSpec(Burst{Rise: 5}), recurring(now, 20, 1, 0.04, n))
	require.NoError(t, err)
	require.Equal(t, x.JumpReplicas, byDefault.Explanation.JumpReplicas, "every defaults to an hour")
	larger, err := NewEngine().Decide(burstSpec(Burst{Rise: 10, Every: time.Hour}), recurring(now, 20, 1, 0.04, n))
	require.NoError(t, err)
	require.Greater(t, larger.Explanation.JumpReplicas, x.JumpReplicas)
}

// TestADeclaredRiseNeedsNoHistory: a minute of history holds no jump ratio,
// so without a declared rise there is no floor; with one, the floor prices it
// beside the rate held: from 1 pod at 20/s the scale-up goes past the steady
// state's need to the floor's, and from 6 the margin keeps more than the rate
// held needs. The reasons say the history has no jump yet.
func TestADeclaredRiseNeedsNoHistory(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	tiny := func(n int32) Snapshot {
		s := recurring(now, 20, 1, 0.04, n)
		s.ArrivalRates = s.ArrivalRates[len(s.ArrivalRates)-5:]
		return s
	}
	plain, err := NewEngine().Decide(burstSpec(Burst{}), tiny(1))
	require.NoError(t, err)
	require.Zero(t, plain.Explanation.JumpReplicas)
	require.Greater(t, plain.DesiredReplicas, int32(1), plain.Explanation.Reason)
	d, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: time.Hour}), tiny(1))
	require.NoError(t, err)
	x := d.Explanation
	require.Greater(t, x.JumpReplicas, plain.DesiredReplicas, x.Reason)
	require.Equal(t, x.JumpReplicas, d.DesiredReplicas)
	require.InDelta(t, 45.0/3600, x.DeclaredRiseWeight, 1e-9)
	require.Contains(t, x.Reason, "a declared rise, with no jump in the history yet, over one lead")

	down, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: time.Hour}), tiny(40))
	require.NoError(t, err)
	require.Less(t, down.DesiredReplicas, int32(40))
	require.GreaterOrEqual(t, down.DesiredReplicas, plain.DesiredReplicas)
	require.LessOrEqual(t, down.Explanation.DownLateShare, 0.05)
	require.Contains(t, down.Explanation.Reason, "× no jump in the history yet: the rate held) is within 1 − p")
}

// TestAHistoryThatShowsTheRiseAddsNothing: where the history's own leads at
// the declared ratio or more already weigh lead ÷ every, the declaration
// changes no decision.
func TestAHistoryThatShowsTheRiseAddsNothing(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	// 5× rises every 20 minutes, each two minutes long.
	plain, err := NewEngine().Decide(burstSpec(Burst{}), recurring(now, 20, 5, 0.04, 6))
	require.NoError(t, err)
	d, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: time.Hour}), recurring(now, 20, 5, 0.04, 6))
	require.NoError(t, err)
	require.Equal(t, plain.DesiredReplicas, d.DesiredReplicas)
	require.Equal(t, plain.Explanation.JumpReplicas, d.Explanation.JumpReplicas)
	require.InDelta(t, 5, d.Explanation.DeclaredRise, 0)
	require.Zero(t, d.Explanation.DeclaredRiseWeight)
	require.Contains(t, d.Explanation.Reason, "the declared rise ×5 every 1h0m0s: the history shows it that often")
}

// TestTheMarginKeepsTheDeclaredRise: 40 pods at a flat 20/s scale down, but
// with a declared rise not below what its first lead needs.
func TestTheMarginKeepsTheDeclaredRise(t *testing.T) {
	now := t0.Add(2 * time.Hour)
	plain, err := NewEngine().Decide(burstSpec(Burst{}), recurring(now, 20, 1, 0.04, 40))
	require.NoError(t, err)
	require.Less(t, plain.DesiredReplicas, int32(40), plain.Explanation.Reason)
	d, err := NewEngine().Decide(burstSpec(Burst{Rise: 5, Every: time.Hour}), recurring(now, 20, 1, 0.04, 40))
	require.NoError(t, err)
	x := d.Explanation
	require.Less(t, d.DesiredReplicas, int32(40), x.Reason)
	require.Greater(t, d.DesiredReplicas, plain.DesiredReplicas, x.Reason)
	require.LessOrEqual(t, x.DownLateShare, 0.05)
	require.Contains(t, x.Reason, "and the declared rise ×5 every 1h0m0s")
}

// spiked is a history over span at base/s but for one rise to j × base
// lasting two minutes that ended ago before now; n pods.
func spiked(now time.Time, span, ago time.Duration, base, j float64, n int32) Snapshot {
	return history(now, base, base*j, int(span/(15*time.Second)), n, func(at time.Time, _ int) bool {
		return at.After(now.Add(-ago-2*time.Minute)) && !at.After(now.Add(-ago))
	})
}

// TestARareRiseWeighsWhatTheHistoryShowsOfIt: the floor prices each jump by
// how often the history shows it. At 100/s, one 5× rise 50 minutes ago in an
// hour of history holds many pods (23, where a flat history holds 8); the
// same rise in six hours of history (measurement.DefaultWindow) weighs a
// sixth as much and holds fewer (9), still more than a flat history's. Six
// hours still see the rise 70 minutes after it, which an hour no longer
// does: with an hour the floor went from the hour's pods to the flat
// history's the moment the rise left it.
func TestARareRiseWeighsWhatTheHistoryShowsOfIt(t *testing.T) {
	now := t0.Add(8 * time.Hour)
	floor := func(span, ago time.Duration, j float64) int32 {
		t.Helper()
		d, err := NewEngine().Decide(burstSpec(Burst{}), spiked(now, span, ago, 100, j, 8))
		require.NoError(t, err)
		require.LessOrEqual(t, d.Explanation.JumpLateShare, 0.05, d.Explanation.Reason)
		return d.Explanation.JumpReplicas
	}
	flat := floor(6*time.Hour, 50*time.Minute, 1)
	hour := floor(time.Hour, 50*time.Minute, 5)
	six := floor(6*time.Hour, 50*time.Minute, 5)
	require.Greater(t, hour, six, "the rise weighs 1/80 of an hour's leads, 1/480 of six hours'")
	require.Greater(t, six, flat, "a rise the history shows holds pods for the next")
	require.Equal(t, flat, floor(time.Hour, 70*time.Minute, 5), "an hour no longer shows a rise 70 minutes ago")
	require.Equal(t, six, floor(6*time.Hour, 70*time.Minute, 5), "six hours weigh it as before")
}

// TestTheMarginKeepsWhatTheLastHourAsks: three 1.6× rises, two minutes each,
// within one hour of six, the rest at 100 req/s. Six hours weigh them the
// same wherever that hour is; in the last hour they are that hour's jumps too,
// and the scale-down's margin keeps what the hour alone asks for (recentMargin),
// as many pods as a history of that hour alone keeps.
func TestTheMarginKeepsWhatTheLastHourAsks(t *testing.T) {
	now := t0.Add(8 * time.Hour)
	rises := func(hourStart time.Time) func(time.Time, int) bool {
		return func(at time.Time, _ int) bool {
			for _, m := range []int{8, 27, 49} {
				from := hourStart.Add(time.Duration(m) * time.Minute)
				if at.After(from) && !at.After(from.Add(2*time.Minute)) {
					return true
				}
			}
			return false
		}
	}
	const six = 6*60*4 + 1
	decide := decider(t, twoMinuteLeadSpec())
	early := decide(history(now, 100, 160, six, 40, rises(now.Add(-6*time.Hour))))
	late := decide(history(now, 100, 160, six, 40, rises(now.Add(-time.Hour))))
	hour := decide(history(now, 100, 160, 4*60, 40, rises(now.Add(-time.Hour))))
	for _, d := range []Decision{early, late, hour} {
		x := d.Explanation
		require.Less(t, d.DesiredReplicas, int32(40), x.Reason)
		require.Nil(t, x.Recurrence, "three rises at uneven gaps do not recur")
		require.LessOrEqual(t, x.DownLateShare, 0.05, x.Reason)
	}

	x := early.Explanation
	require.Equal(t, 4*60-2*8+1, x.RecentJumps, "the last hour's jumps are read: a lead from each end, the first sample standing for the step before it")
	require.Zero(t, x.RecentMarginReplicas, "the last hour is flat: the six hours' margin keeps more")
	require.NotContains(t, x.Reason, "of the last 1h0m0s")

	x = late.Explanation
	require.Equal(t, 4*60-2*8+1, x.RecentJumps)
	require.Greater(t, late.DesiredReplicas, early.DesiredReplicas, "the same jumps weigh six times as much in an hour")
	require.Equal(t, late.DesiredReplicas, x.RecentMarginReplicas, x.Reason)
	require.Contains(t, x.Reason, fmt.Sprintf("the %d jumps of the last 1h0m0s alone ask for %d pods", x.RecentJumps, x.RecentMarginReplicas))

	require.Zero(t, hour.Explanation.RecentJumps, "an hour's history is its own last hour")
	require.Equal(t, late.DesiredReplicas, hour.DesiredReplicas, "six hours keep what their last hour alone does")
	full := decide(history(now, 100, 160, 4*60+1, 40, rises(now.Add(-time.Hour))))
	require.Zero(t, full.Explanation.RecentJumps, "nor is it read apart when its first sample is an hour old")
}
