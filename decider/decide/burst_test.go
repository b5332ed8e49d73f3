package decide

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
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

// TestTheMarginKeepsWhatJumpsFromALikeDepthAsk: six hours at 100 req/s but
// for four-minute dips to 20/s every 90 minutes, each followed by the return
// to 100. Two minutes into a dip, λ's mean over the last lead is a quarter of
// its level (the mean over the five leads before), and the jumps from such
// depths are the dips' own and their returns: the margin keeps what the
// nearer half of the history's jumps ask for (depthMargin), more than the
// whole history asks, where those are a few leads of many. At the level the
// jumps from like depths ask for no more, and the margin keeps the whole
// history's count.
func TestTheMarginKeepsWhatJumpsFromALikeDepthAsk(t *testing.T) {
	now := t0.Add(8 * time.Hour)
	const six = 6*60*4 + 1
	dip := func(present bool) func(time.Time, int) bool {
		return func(at time.Time, _ int) bool {
			if present && at.After(now.Add(-2*time.Minute)) {
				return true
			}
			m := int(at.Sub(now.Add(-6*time.Hour)) / time.Minute)
			return m%90 < 4 && at.Before(now.Add(-15*time.Minute))
		}
	}
	notDip := func(at time.Time, back int) bool { return !dip(true)(at, back) }
	decide := decider(t, twoMinuteLeadSpec())
	wholeCount := regexp.MustCompile(`is within 1 − p: (\d+) \(late share`)

	in := decide(history(now, 20, 100, six, 40, notDip))
	x := in.Explanation
	level := (20*2 + 100*8) / 10.0 // the last lead in the dip, the four before at 100
	require.InDelta(t, 20/level, x.Depth, 1e-9)
	require.Equal(t, (six-2*8)/2+1, x.DepthJumps, "the nearer half of the history's jumps")
	require.Positive(t, x.DepthMarginReplicas, x.Reason)
	require.Equal(t, x.DepthMarginReplicas, in.DesiredReplicas, x.Reason)
	require.LessOrEqual(t, x.DownLateShare, 0.05, x.Reason)
	m := wholeCount.FindStringSubmatch(x.Reason)
	require.NotNil(t, m, x.Reason)
	whole, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Greater(t, in.DesiredReplicas, int32(whole), "the whole history asks for fewer")
	require.Contains(t, x.Reason, fmt.Sprintf("λ's mean over the last lead is %.3g × its level over 5 leads, and the %d jumps from the depths nearest it ask for %d pods",
		x.Depth, x.DepthJumps, x.DepthMarginReplicas))

	at := decide(history(now, 100, 20, six, 40, dip(false)))
	x = at.Explanation
	require.InDelta(t, 1, x.Depth, 1e-9, "a level history's present sits at its level")
	require.Zero(t, x.DepthMarginReplicas, x.Reason)
	require.Zero(t, x.DepthJumps)
	require.NotContains(t, x.Reason, "jumps from the depths nearest it")
	require.Less(t, at.DesiredReplicas, int32(40), x.Reason)
}

// TestLikeDepth: the nearer half of the jumps by the ratio between their
// depth and the present's, never fewer than least, all of them when they
// are no more.
func TestLikeDepth(t *testing.T) {
	js := []jump{{1, 10, 0.25}, {2, 10, 0.5}, {3, 10, 1}, {4, 10, 2}, {5, 10, 4}, {6, 10, 0.9}}
	depths := func(js []jump) []float64 {
		var out []float64
		for _, j := range js {
			out = append(out, j.depth)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name  string
		depth float64
		least int
		want  []float64
	}{
		{"below the level: the dips", 0.3, 1, []float64{0.25, 0.5, 0.9}},
		{"at the level", 1, 1, []float64{0.5, 0.9, 1}},
		{"above it, by ratio: 2 is as far from 1 as 0.5", 2.5, 1, []float64{1, 2, 4}},
		{"never fewer than least; a tie goes to the earlier jump", 1, 5, []float64{0.25, 0.5, 0.9, 1, 2}},
		{"all when least is as many", 1, 6, []float64{0.25, 0.5, 0.9, 1, 2, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, depths(likeDepth(js, tt.depth, tt.least)))
		})
	}
}
