package decide

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLateShareWithExpired: the expiries' share of λ now is a floor under the
// measured late share, never added to it (the histogram already holds every
// expired request it saw, at its latency from arrival).
func TestLateShareWithExpired(t *testing.T) {
	// 98 requests within 0.25 s, 2 over: 2 % late at the target.
	buckets := []LatencyBucket{{0.25, 98}, {math.Inf(1), 2}}
	// p50/p95/p99 well under the target: the interpolation's tail beyond p99
	// falls with its slope, e^(ln 0.01 − ln 5 × (0.25 − 0.09)/0.01) ≈ 0.
	quantiles := []LatencyQuantile{{50, 0.05}, {95, 0.08}, {99, 0.09}}
	for _, tt := range []struct {
		name      string
		buckets   []LatencyBucket
		quantiles []LatencyQuantile
		lambda    float64
		expired   float64
		want      float64
		ok        bool
	}{
		{"no expiry: the histogram's share", buckets, nil, 100, 0, 0.02, true},
		// 5/s of 100/s: 5 % waited the front's maximum wait, more than the
		// histogram shows this interval.
		{"expiries above the histogram's share raise it", buckets, nil, 100, 5, 0.05, true},
		// 1/s of 100/s is 1 %: the histogram's 2 % already counts them.
		{"expiries within the histogram's share add nothing", buckets, nil, 100, 1, 0.02, true},
		{"quantiles only: the interpolated tail understates them", nil, quantiles, 100, 3, 0.03, true},
		{"at most every arrival", buckets, nil, 4, 5, 1, true},
		{"no arrivals now: no share", buckets, nil, 0, 5, 0.02, true},
		{"nothing measured the latency: no share, not the floor alone", nil, nil, 100, 5, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshot(t0, tt.lambda, 0.04, 4)
			s.LatencyBuckets, s.MeasuredQuantiles, s.FrontExpiredRate = tt.buckets, tt.quantiles, tt.expired
			got, ok := measuredLateShare(s, 0.25)
			require.Equal(t, tt.ok, ok)
			require.InDelta(t, tt.want, got, 1e-12)
		})
	}
	s := snapshot(t0, 100, 0.04, 4)
	s.MeasuredQuantiles = quantiles
	interp, ok := measuredLateShare(s, 0.25)
	require.True(t, ok)
	require.Less(t, interp, 1e-6, "the quantile case's floor is what binds")
}

// pooledSpec is queueSpec on the pooled data plane, scaling at once.
func pooledSpec() Spec {
	spec := queueSpec()
	spec.Routing = RoutingPooled
	spec.Behavior = immediate()
	return spec
}

// TestExpiredRequestsRaiseTheMeasuredLateShare: the closed loop compares the
// model with the late share including the fronts' expiries: 3/s of λ = 60/s
// is 5 %, where the histogram shows 1 %, and the correction moves up.
func TestExpiredRequestsRaiseTheMeasuredLateShare(t *testing.T) {
	s := withQueues(snapshot(t0, 60, 0.04, 5), 1, 1, 1, 1, 1)
	s.MeasuredLatency = 0.1
	s.LatencyBuckets = []LatencyBucket{{0.25, 99}, {math.Inf(1), 1}}
	s.LatencySamples = 900
	before, err := NewEngine().Decide(pooledSpec(), s)
	require.NoError(t, err)
	require.InDelta(t, 0.01, before.Explanation.MeasuredLateShare, 1e-12)
	require.Zero(t, before.Explanation.ExpiredLateShare)

	s.FrontExpiredRate = 3
	d, err := NewEngine().Decide(pooledSpec(), s)
	require.NoError(t, err)
	x := d.Explanation
	require.InDelta(t, 0.05, x.ExpiredLateShare, 1e-12)
	require.InDelta(t, 0.05, x.MeasuredLateShare, 1e-12)
	require.Equal(t, before.Explanation.ModelledLateShare, x.ModelledLateShare, "the same allocation")
	require.Greater(t, x.LatencyBias, before.Explanation.LatencyBias, "more requests late than modelled: the wait's variability is corrected up")
	require.Zero(t, x.BacklogAtLead, "5 pods at 60/s clear the 45 expired requests within the lead: the cycle is calibrated")
}

// TestExpiryBlocksScaleDown: 20 pods for λ = 60/s are far too many and the
// engine scales down; when the fronts gave back 1 request per second over the
// last 15 s interval, those 15 requests are a backlog: no scale-down while it
// drains, and the reason says the expiries alone are that backlog.
func TestExpiryBlocksScaleDown(t *testing.T) {
	s := withQueues(snapshot(t0, 60, 0.04, 20), make([]float64, 20)...)
	d, err := NewEngine().Decide(pooledSpec(), s)
	require.NoError(t, err)
	require.Less(t, d.DesiredReplicas, int32(20), d.Explanation.Reason)
	require.Zero(t, d.Explanation.Backlog)

	s.FrontExpiredRate = 1
	d, err = NewEngine().Decide(pooledSpec(), s)
	require.NoError(t, err)
	x := d.Explanation
	require.Equal(t, int32(20), d.DesiredReplicas, x.Reason)
	require.InDelta(t, 15, x.BacklogExpired, 1e-12)
	require.InDelta(t, 15, x.Backlog, 1e-12)
	require.Equal(t, 1.0, x.FrontExpiredRate)
	require.Contains(t, x.Reason, "no scale-down while they drain")
	require.Contains(t, x.Reason, "all of it the 15 requests the pooled fronts gave back unseen over the last interval, 1/s")
	require.Contains(t, x.Reason, "without them there is no backlog")
}

// TestExpiryDrivesADrainScaleUp: pods that meet the target at λ = 60/s get no
// change; when the fronts gave back 30 requests per second over the last 15 s,
// the 450 requests are a backlog the fluid model drains within one lead (5 s
// here): (λ + left/lead)/kμ pods, left = 450 + (λ − n·kμ)·lead.
func TestExpiryDrivesADrainScaleUp(t *testing.T) {
	spec := pooledSpec()
	spec.Predictive = Predictive{LeadOverride: 5 * time.Second}
	steady, err := NewEngine().Decide(spec, withQueues(snapshot(t0, 60, 0.04, 5), 1, 1, 1, 1, 1))
	require.NoError(t, err)
	n := steady.DesiredReplicas
	calm := withQueues(snapshot(t0, 60, 0.04, n), make([]float64, n)...)
	d, err := NewEngine().Decide(spec, calm)
	require.NoError(t, err)
	require.Equal(t, n, d.DesiredReplicas, "the steady state: %s", d.Explanation.Reason)
	require.Zero(t, d.Explanation.DrainReplicas)

	calm.FrontExpiredRate = 30
	d, err = NewEngine().Decide(spec, calm)
	require.NoError(t, err)
	x := d.Explanation
	kmu := 1 / 0.04
	left := 450 + (60-float64(n)*kmu)*5
	require.Positive(t, left, "the case needs a backlog left at the lead")
	require.InDelta(t, 450, x.BacklogExpired, 1e-9)
	require.InDelta(t, left, x.BacklogAtLead, 1e-9)
	want := int32(math.Ceil((60 + left/5) / kmu))
	require.Greater(t, want, n)
	require.Equal(t, want, x.DrainReplicas)
	require.Equal(t, want, d.DesiredReplicas, x.Reason)
	require.Contains(t, x.Reason, "backlog of 450 requests")
	require.Contains(t, x.Reason, "the pooled fronts gave back unseen")
}

// TestZeroExpiryChangesNothing: without expiries the decisions are those of
// the same snapshots before the fronts' rates were read, over several cycles
// and kinds of cycle (steady, backlog, scale-down, calibrated); the refusal
// rate alone is shown and changes nothing else.
func TestZeroExpiryChangesNothing(t *testing.T) {
	spec := pooledSpec()
	spec.Predictive = Predictive{Enabled: true, LeadOverride: 30 * time.Second}
	snaps := []Snapshot{
		withQueues(snapshot(t0, 60, 0.04, 5), 1, 1, 1, 1, 1),
		withQueues(snapshot(t0.Add(15*time.Second), 60, 0.04, 5), 400, 400, 1, 1, 1),
		withQueues(snapshot(t0.Add(30*time.Second), 60, 0.04, 20), make([]float64, 20)...),
		ramp(t0.Add(45*time.Second), 200, 0.5, 0.04, 8),
	}
	snaps[0].LatencyBuckets = []LatencyBucket{{0.25, 95}, {math.Inf(1), 5}}
	snaps[0].MeasuredLatency = 0.2
	snaps[3].FrontQueue = 40
	plain, refused := NewEngine(), NewEngine()
	var decisions []Decision
	for i, s := range snaps {
		a, err := plain.Decide(spec, s)
		decisions = append(decisions, a)
		require.NoError(t, err)
		s.FrontRefusedRate = 7
		b, err := refused.Decide(spec, s)
		require.NoError(t, err)
		require.Equal(t, 7.0, b.Explanation.FrontRefusedRate)
		b.Explanation.FrontRefusedRate = 0
		require.Equal(t, a, b, "cycle %d", i)
		require.Zero(t, a.Explanation.BacklogExpired)
		require.Zero(t, a.Explanation.ExpiredLateShare)
		require.NotContains(t, a.Explanation.Reason, "gave back unseen")
	}
	require.Equal(t, plain.State(), refused.State())
	// The new explanation fields are left out of a decision's JSON while 0,
	// as its other optional numbers are.
	raw, err := json.Marshal(decisions)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"backlog":`)
	require.NotContains(t, string(raw), "frontExpiredRate")
	require.NotContains(t, string(raw), "backlogExpired")
}

// TestInvalidExpiryRates: a rate that is not a finite number ≥ 0 is refused,
// naming it, as the snapshot's other numbers are.
func TestInvalidExpiryRates(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mod   func(*Snapshot)
		field string
	}{
		{"expired NaN", func(s *Snapshot) { s.FrontExpiredRate = math.NaN() }, "snapshot.frontExpiredRate"},
		{"expired +Inf", func(s *Snapshot) { s.FrontExpiredRate = math.Inf(1) }, "snapshot.frontExpiredRate"},
		{"expired negative", func(s *Snapshot) { s.FrontExpiredRate = -1 }, "snapshot.frontExpiredRate"},
		{"refused NaN", func(s *Snapshot) { s.FrontRefusedRate = math.NaN() }, "snapshot.frontRefusedRate"},
		{"refused -Inf", func(s *Snapshot) { s.FrontRefusedRate = math.Inf(-1) }, "snapshot.frontRefusedRate"},
		{"refused negative", func(s *Snapshot) { s.FrontRefusedRate = -0.5 }, "snapshot.frontRefusedRate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshot(t0, 60, 0.04, 5)
			tt.mod(&s)
			_, err := NewEngine().Decide(pooledSpec(), s)
			require.ErrorContains(t, err, tt.field)
			require.ErrorContains(t, err, "must be finite and non-negative requests per second")
		})
	}
}
