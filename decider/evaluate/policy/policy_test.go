package policy

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

var params = Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 1, MinReplicas: 1, MaxReplicas: 100}

// hpaWorld feeds an HPA pods whose CPU utilisation is util, every 15 s.
type hpaWorld struct {
	now  float64
	pods []Pod
}

func newHPAWorld(n int) *hpaWorld {
	w := &hpaWorld{}
	for i := 0; i < n; i++ {
		w.pods = append(w.pods, Pod{ID: i, Ready: true, ReadyAt: -1000, CPU: 1})
	}
	return w
}

// step advances 15 s at utilisation util and returns the HPA's decision,
// then applies it (new pods start unready unless readyNew).
func (w *hpaWorld) step(h *HPA, util float64, readyNew bool) int {
	w.now += HPASync
	for i := range w.pods {
		if w.pods[i].Ready {
			w.pods[i].BusyCum += util * w.pods[i].CPU * HPASync
		}
	}
	d := h.Decide(&Observation{Now: w.now, Pods: w.pods})
	for len(w.pods) < d.Replicas {
		w.pods = append(w.pods, Pod{ID: len(w.pods) + 1000, Ready: readyNew, ReadyAt: w.now - 100, CPU: 1})
	}
	w.pods = w.pods[:d.Replicas]
	return d.Replicas
}

func TestHPA(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start int
		utils []float64
		ready bool
		want  []int
	}{
		// The first sync has no previous sample: no metrics, no action.
		{name: "within tolerance no change", start: 4, utils: []float64{0.7, 0.76, 0.64}, ready: true, want: []int{4, 4, 4}},
		{name: "beyond tolerance scales by the ratio", start: 4, utils: []float64{0.7, 0.875}, ready: true, want: []int{4, 5}},
		// calculateScaleUpLimit: max(2 × current, 4); the new pods have no sample
		// at the next sync, so they count at 0 % (missing, scale-up).
		{name: "scale-up limited to max(2 x current, 4) per sync", start: 1, utils: []float64{0.7, 7, 7, 7}, ready: true, want: []int{1, 4, 8, 16}},
		{name: "scale-down waits for the 5-minute window", start: 10, utils: append([]float64{0.7, 0.7}, repeat(0.06, 21)...), ready: true,
			want: append(append([]int{10, 10}, repeatInt(10, 20)...), 1)},
		// Sync 3: the 2 new pods have no sample yet (missing, 0 % on a scale-up):
		// ratio 2 → 1.0, within tolerance. Sync 4: they have samples but are not
		// Ready (unready, 0 % on a scale-up): again 1.0, hold.
		// recordInitialRecommendation: the creation reconcile recorded 10, so
		// the HPA keeps 10 for 5 minutes even though the first sample says 1.
		// (Without it, it dropped to 1 at the second sync.)
		{name: "initial recommendation holds the start count for the window", start: 10, utils: repeat(0.06, 22), ready: true,
			want: append(repeatInt(10, 20), 1, 1)},
		{name: "missing then unready pods count as 0% on scale-up", start: 2, utils: []float64{0.7, 1.4, 1.4, 1.4}, ready: false, want: []int{2, 4, 4, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHPA(params, 0.7)
			w := newHPAWorld(tc.start)
			var got []int
			for _, u := range tc.utils {
				got = append(got, w.step(h, u, tc.ready))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestHPAPodGroups checks groupPods' classes on one sync after a first one
// that records samples: four old Ready pods at utilisation u, plus extra pods.
func TestHPAPodGroups(t *testing.T) {
	const now = 1000.0
	old := func(n int, u float64) []Pod {
		var ps []Pod
		for i := 0; i < n; i++ {
			ps = append(ps, Pod{ID: i, Ready: true, Started: 0, ReadyAt: 10, CPU: 1, BusyCum: u * HPASync})
		}
		return ps
	}
	for _, tc := range []struct {
		name  string
		u     float64
		extra []Pod
		// seen says whether the extra pods were there (started) at the first sync.
		seen bool
		want int
	}{
		// ratio 0.5: without the missing pods ⌈0.5 × 4⌉ = 2; with them at 100 %
		// of their request, ⌊100 × (4 × 0.35 + 2) / 6⌋ = 56 % → 0.8 → ⌈0.8 × 6⌉ = 5.
		{name: "missing pods count 100% on scale-down", u: 0.35, extra: []Pod{{ID: 10, Ready: true, CPU: 1}, {ID: 11, Ready: true, CPU: 1}}, want: 5},
		// Ready during the sample's window, 100 s after start (within the 5 min
		// CPU initialisation period): unready, 0 % on a scale-up:
		// ⌊100 × 4 × 1.4 / 6⌋ = 93 % → 93/70 → ⌈1.33 × 6⌉ = 8 (12 if they counted).
		{name: "ready within the sample window during cpu initialisation is unready", u: 1.4, seen: true,
			extra: []Pod{{ID: 10, Ready: true, Started: now - 100, ReadyAt: now - 5, CPU: 1}, {ID: 11, Ready: true, Started: now - 100, ReadyAt: now - 5, CPU: 1}}, want: 8},
		// The same pods started 400 s ago (past the initialisation period) count.
		{name: "after the cpu initialisation period the sample counts", u: 1.4, seen: true,
			extra: []Pod{{ID: 10, Ready: true, Started: now - 400, ReadyAt: now - 5, CPU: 1}, {ID: 11, Ready: true, Started: now - 400, ReadyAt: now - 5, CPU: 1}}, want: 12},
		// Pending pods are unready: ratio 1.5 says scale up, so they count at 0 %:
		// 4 × 1.05 / 8 = 52 % → 0.74 flips the direction, so hold at 8 (⌈1.5 × 4⌉
		// = 6 if they were ignored).
		{name: "pending pods count 0% on scale-up", u: 1.05, seen: true,
			extra: []Pod{{ID: 10, Pending: true, CPU: 1}, {ID: 11, Pending: true, CPU: 1}, {ID: 12, Pending: true, CPU: 1}, {ID: 13, Pending: true, CPU: 1}}, want: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHPA(Params{MinReplicas: 1, MaxReplicas: 100}, 0.7)
			first := old(4, 0)
			for i := range first {
				first[i].BusyCum = 0
			}
			if tc.seen {
				first = append(first, tc.extra...)
			}
			n := len(first)
			require.Equal(t, n, h.Decide(&Observation{Now: now - HPASync, Pods: first}).Replicas, "no samples yet: no action")
			pods := append(old(4, tc.u), tc.extra...)
			for i := range pods[4:] {
				if pods[4+i].Ready {
					pods[4+i].BusyCum = tc.u * HPASync
				}
			}
			require.Equal(t, tc.want, h.Decide(&Observation{Now: now, Pods: pods}).Replicas)
		})
	}
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// expQuantiles are n equally weighted quantiles of the exponential
// distribution with the mean, as Capacity.ServiceQuantiles.
func expQuantiles(mean float64, n int) []float64 {
	q := make([]float64, n)
	for i := range q {
		q[i] = -mean * math.Log(1-(float64(i)+0.5)/float64(n))
	}
	return q
}

func repeatInt(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func kpaObs(now float64, ready int, inflight []float64) *Observation {
	o := &Observation{Now: now}
	for i := 0; i < ready; i++ {
		o.Pods = append(o.Pods, Pod{ID: i, Ready: true})
	}
	for _, c := range inflight {
		o.Seconds = append(o.Seconds, Second{InFlight: c})
	}
	return o
}

func TestKPA(t *testing.T) {
	k := NewKPA(Params{Concurrency: 10, MinReplicas: 1, MaxReplicas: 1000})
	// Created with one Ready pod: no panic start.
	require.Equal(t, 1, k.Decide(kpaObs(2, 1, repeat(7, 2))).Replicas)
	require.False(t, k.panicking)
	// Target 7 per pod. Steady 14 in flight on 2 pods: stable.
	require.Equal(t, 2, k.Decide(kpaObs(60, 2, repeat(14, 60))).Replicas)
	require.False(t, k.panicking)
	// A burst: the last 6 s at 70 → panic count 10 ≥ 2 × 2 ready: panic mode, panic count.
	burst := append(repeat(14, 54), repeat(70, 6)...)
	require.Equal(t, 10, k.Decide(kpaObs(62, 2, burst)).Replicas)
	require.True(t, k.panicking)
	// In panic the count never goes down, even when the burst is over.
	require.Equal(t, 10, k.Decide(kpaObs(64, 10, append(burst[6:], repeat(7, 6)...))).Replicas)
	// Exactly 60 s after the last tick over the threshold: still panicking
	// (Scale un-panics only when panicTime + StableWindow is before now).
	require.Equal(t, 10, k.Decide(kpaObs(122, 10, repeat(7, 60))).Replicas)
	require.True(t, k.panicking)
	// After more than 60 s without reaching the threshold, panic ends and the stable window rules,
	// bounded by the max scale-down rate (ready/2).
	require.Equal(t, 5, k.Decide(kpaObs(130, 10, repeat(7, 60))).Replicas)
	require.False(t, k.panicking)

	// In panic the stable count wins when it is the larger (stable 139.3/7 → 20,
	// panic 70/7 = 10 ≥ 2 × 5 ready).
	k = NewKPA(Params{Concurrency: 10, MinReplicas: 1, MaxReplicas: 1000})
	require.Equal(t, 20, k.Decide(kpaObs(60, 5, append(repeat(147, 54), repeat(70, 6)...))).Replicas)
	require.True(t, k.panicking)
}

// TestKPAPanicStart: newAutoscaler starts in panic mode holding the Ready
// count when there is more than one Ready pod, so a KPA created over 37 pods
// with little load keeps 37 until a stable window (60 s) has passed without
// a new panic, then steps down at the max scale-down rate (ready / 2). The
// old start (stable, no history) went to 18 on the first tick.
func TestKPAPanicStart(t *testing.T) {
	k := NewKPA(Params{Concurrency: 1, MinReplicas: 1, MaxReplicas: 1000})
	for now := 2.0; now <= 60; now += KPATick {
		require.Equal(t, 37, k.Decide(kpaObs(now, 37, repeat(1.4, int(now)))).Replicas, "t = %v s", now)
		require.True(t, k.panicking)
	}
	require.Equal(t, 18, k.Decide(kpaObs(62, 37, repeat(1.4, 62))).Replicas)
	require.False(t, k.panicking)
}

// TestKPAScaleDownDelay: kpa-delay keeps the highest desired count of the
// last 5 minutes (Knative's scale-down-delay); kpa (delay 0) does not.
func TestKPAScaleDownDelay(t *testing.T) {
	plain := NewKPA(Params{Concurrency: 10, MinReplicas: 1, MaxReplicas: 1000})
	delayed := NewKPAWithDelay(Params{Concurrency: 10, MinReplicas: 1, MaxReplicas: 1000}, KPADelay)
	require.Equal(t, KPADelayName, delayed.Name())
	for _, k := range []*KPA{plain, delayed} {
		require.Equal(t, 1, k.Decide(kpaObs(2, 1, repeat(7, 2))).Replicas)
		require.Equal(t, 10, k.Decide(kpaObs(4, 1, repeat(70, 4))).Replicas, "a burst: panic")
	}
	quiet := func(now float64) *Observation { return kpaObs(now, 10, repeat(7, 60)) }
	for now := 6.0; now <= 64; now += KPATick {
		plain.Decide(quiet(now))
		delayed.Decide(quiet(now))
	}
	// Panic over (more than 60 s since t = 4): kpa halves at once.
	require.Equal(t, 5, plain.Decide(quiet(66)).Replicas)
	require.Equal(t, 10, delayed.Decide(quiet(66)).Replicas)
	for now := 68.0; now < 364; now += KPATick {
		require.Equal(t, 10, delayed.Decide(quiet(now)).Replicas, "t = %v s", now)
	}
	// The last 10 (t = 64) leaves the window 300 s later: max.TimeWindow's
	// 150 two-second buckets overwrite the bucket of t − 300 s.
	require.Equal(t, 5, delayed.Decide(quiet(364)).Replicas)
}

// TestKPAActivatorInPath: the activator is in the request path while the
// excess burst capacity ⌊ready × k − 211 − panic concurrency⌋ is negative.
func TestKPAActivatorInPath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ready      int
		inflight   float64
		wantInPath bool
	}{
		{name: "2 pods of k = 10: 20 − 211 − 14 < 0", ready: 2, inflight: 14, wantInPath: true},
		{name: "30 pods of k = 10: 300 − 211 − 14 ≥ 0", ready: 30, inflight: 14, wantInPath: false},
		{name: "30 pods but a burst of 100 in flight: 300 − 211 − 100 < 0", ready: 30, inflight: 100, wantInPath: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := NewKPA(Params{Concurrency: 10, MinReplicas: 1, MaxReplicas: 1000})
			require.True(t, k.ActivatorRouting(), "a new revision starts behind the activator")
			k.Decide(kpaObs(60, tc.ready, repeat(tc.inflight, 60)))
			require.Equal(t, tc.wantInPath, k.ActivatorRouting())
		})
	}
}

func TestQASSnapshotFromObservations(t *testing.T) {
	q := NewQAS("qas", params, true)
	o := &Observation{Now: 30, Concurrency: 1, InitTimes: []float64{20, 25}}
	for i := 0; i < 30; i++ {
		o.Seconds = append(o.Seconds, Second{Arrivals: 10 + i/15*20, Completions: 10, ServiceSum: 0.5, ServiceSq: 0.5 * 0.05 * 2})
	}
	o.Pods = []Pod{{ID: 1, Ready: true, CPU: 1, BusyCum: 3}, {ID: 2, Ready: false, CPU: 1}}
	s := q.Snapshot(o)
	require.Len(t, s.ArrivalRates, 2)
	require.Equal(t, 10.0, s.ArrivalRates[0].Rate)
	require.Equal(t, 30.0, s.ArrivalRates[1].Rate)
	require.InDelta(t, 0.05, s.ServiceTime, 1e-12)
	require.InDelta(t, 1, s.ServiceSCV, 1e-9, "E[S²] = 2·E[S]² is an SCV of 1")
	require.Equal(t, 50.0, s.ServiceSamples, "the last scrape interval's completions, as the collector stores them")
	// The service time is the last scrape interval's, not a longer window's:
	// the collector's newest point is what the controller reads.
	slow := *o
	slow.Seconds = slices.Clone(o.Seconds)
	for i := range 25 {
		slow.Seconds[i].ServiceSum = 5 // 0.5 s each, before the last interval
	}
	require.InDelta(t, 0.05, q.Snapshot(&slow).ServiceTime, 1e-12)
	require.Equal(t, int32(2), s.CurrentReplicas)
	require.Equal(t, int32(1), s.ReadyReplicas)
	require.True(t, s.Complete)
	require.Len(t, s.InitTimes, 2)
	d := q.Decide(o)
	require.Greater(t, d.Replicas, 2, "30 req/s of 50 ms on one ready pod misses a 200 ms p95")
	require.Positive(t, d.Forecast)
}

// TestQASSizesForItsRouting: qas tells the engine the data plane it is given
// (spec.routing), and the engine's layout follows it: per-pod queues behind a
// Service, one pooled queue behind least-request balancing or a pooled front,
// which needs fewer pods for the same load (least request a few more than
// pooled: the power of two choices is not one queue).
func TestQASSizesForItsRouting(t *testing.T) {
	pods := map[decide.Routing]int{}
	for _, tc := range []struct {
		routing, want decide.Routing
		model         decide.ModelKind
	}{
		{"", decide.RoutingRandom, decide.ModelPerPod},
		{decide.RoutingRandom, decide.RoutingRandom, decide.ModelPerPod},
		{decide.RoutingLeastRequest, decide.RoutingLeastRequest, decide.ModelPooled},
		{decide.RoutingPooled, decide.RoutingPooled, decide.ModelPooled},
	} {
		p := params
		p.Routing = tc.routing
		q := NewQAS("qas", p, false)
		o := &Observation{Now: 30, Concurrency: 1, InitTimes: []float64{20}}
		for range 30 {
			o.Seconds = append(o.Seconds, Second{Arrivals: 200, Completions: 200, ServiceSum: 10, ServiceSq: 10 * 0.05 * 2})
		}
		for i := range 8 {
			o.Pods = append(o.Pods, Pod{ID: i, Ready: true, CPU: 1})
		}
		d := q.Decide(o)
		require.Equal(t, tc.want, q.Last.Explanation.Routing, "routing %q", tc.routing)
		require.Equal(t, tc.model, q.Last.Explanation.Model, "routing %q", tc.routing)
		pods[tc.want] = d.Replicas
	}
	require.Less(t, pods[decide.RoutingPooled], pods[decide.RoutingRandom], "200 req/s of 50 ms: one pooled queue needs fewer pods than per-pod queues")
	require.Less(t, pods[decide.RoutingPooled], pods[decide.RoutingLeastRequest], "least request is modelled as the power of two choices, slower than one queue")
	require.LessOrEqual(t, pods[decide.RoutingLeastRequest], pods[decide.RoutingRandom])
}

// TestQASSeesThePooledFrontsQueue: on a pooled data plane the requests waiting in
// the shared front are the backlog qas sizes for, as the collector stores the
// fronts' queue_length and the controller passes it for routing: pooled; behind a
// Service nothing waits in front of the pods, and the same observation gives none.
func TestQASSeesThePooledFrontsQueue(t *testing.T) {
	replicas := map[decide.Routing]int{}
	for _, routing := range []decide.Routing{decide.RoutingRandom, decide.RoutingPooled} {
		p := params
		p.Routing = routing
		q := NewQAS("qas", p, false)
		o := &Observation{Now: 30, Concurrency: 1, InitTimes: []float64{20}, FrontQueued: 2000}
		for range 30 {
			o.Seconds = append(o.Seconds, Second{Arrivals: 40, Completions: 40, ServiceSum: 2, ServiceSq: 2 * 0.05 * 2})
		}
		for i := range 4 {
			o.Pods = append(o.Pods, Pod{ID: i, Ready: true, CPU: 1, InService: 1})
		}
		s := q.Snapshot(o)
		if routing == decide.RoutingPooled {
			require.Equal(t, 2000.0, s.FrontQueue)
		} else {
			require.Zero(t, s.FrontQueue, "a Service has no front queue")
		}
		replicas[routing] = q.Decide(o).Replicas
		require.Equal(t, routing, q.Last.Explanation.Routing)
	}
	require.Greater(t, replicas[decide.RoutingPooled], 4, "2,000 requests in the front take the 4 pods 50 s to drain at 40 req/s, past the 20 s lead")
}

// TestCapacitySharing: with processor sharing a request of size S takes
// S/(1−ρ) on one place (M/G/1-PS's conditional mean), S(1 + C/(K−a)) on K.
func TestCapacitySharing(t *testing.T) {
	q := repeat(0.1, 10) // constant service, 100 ms
	for _, tc := range []struct {
		name   string
		k      int
		lambda float64
		t      float64
		want   float64
	}{
		{name: "one place at ρ = 0.5 doubles the time: 200 ms > 150 ms", k: 1, lambda: 5, t: 0.15, want: 1},
		{name: "one place at ρ = 0.5: 200 ms ≤ 250 ms", k: 1, lambda: 5, t: 0.25, want: 0},
		// K = 2, a = 1: C = 1/3, slowdown 1 + (1/3)/1 = 4/3 → 133 ms.
		{name: "two places, a = 1: 133 ms > 130 ms", k: 2, lambda: 10, t: 0.13, want: 1},
		{name: "two places, a = 1: 133 ms ≤ 140 ms", k: 2, lambda: 10, t: 0.14, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Capacity{MeanService: 0.1, ServiceSCV: 0, ServiceQuantiles: q, K: tc.k, Sharing: true, Target: tc.t, Percentile: 95, Max: 10}
			require.Equal(t, tc.want, c.Tail(tc.lambda, 1, tc.t))
		})
	}
}

func TestCapacity(t *testing.T) {
	// Exponential service, mean 50 ms, as quantiles; k = 1, one pod: M/M/1,
	// whose response time is exponential with rate μ−λ, so P(R > t) = e^{−(μ−λ)t}.
	c := &Capacity{MeanService: 0.05, ServiceSCV: 1, ServiceQuantiles: expQuantiles(0.05, 2000), K: 1, Target: 0.2, Percentile: 95, Max: 1000}
	for _, lambda := range []float64{2, 10, 15} {
		require.InDelta(t, math.Exp(-(20-lambda)*0.2), c.Tail(lambda, 1, 0.2), 0.003, "λ=%v", lambda)
	}
	prev := 0
	for _, lambda := range []float64{1, 10, 50, 100, 400} {
		n := c.Pods(lambda)
		require.GreaterOrEqual(t, n, prev, "more load never needs fewer pods")
		require.True(t, c.Meets(lambda, n))
		if n > 1 {
			require.False(t, c.Meets(lambda, n-1), "n is the fewest")
		}
		prev = n
	}
}

// TestCapacityMeanTarget: with Percentile 0 (seed 003's mean target) a pod
// count meets the target when E[R] is within it: M/M/1's 1/(μ − λ), M/M/3's
// E[S] + C/(3μ − λ) pooled; Pods is the fewest; a mean target below E[S]
// sizes to E[S] + T rather than to the replica cap.
func TestCapacityMeanTarget(t *testing.T) {
	c := &Capacity{MeanService: 0.05, ServiceSCV: 1, ServiceQuantiles: expQuantiles(0.05, 1000), K: 1, Target: 0.2, Max: 1000}
	require.InDelta(t, 1/(20.0-10), c.MeanLatency(10, 1), 1e-12)
	require.True(t, c.Meets(15, 1), "1/(20 − 15) = 0.2 s")
	require.False(t, c.Meets(15.5, 1))
	require.Equal(t, 7, c.Pods(100), "λ/n ≤ 15 per pod")
	p := &Capacity{MeanService: 1, ServiceSCV: 1, ServiceQuantiles: expQuantiles(1, 1000), K: 1, Target: 10, Pooled: true, Max: 100}
	require.InDelta(t, 1+erlangC(3, 1.8)/(3-1.8), p.MeanLatency(1.8, 3), 1e-12)
	require.True(t, c.Feasible())
	low := &Capacity{MeanService: 0.3, ServiceSCV: 1, ServiceQuantiles: expQuantiles(0.3, 1000), K: 1, Target: 0.2, Max: 1000}
	require.False(t, low.Feasible())
	require.Less(t, low.Pods(10), 1000, "finite when E[S] alone exceeds the target")
}

// TestCapacityPodsIsTheFewestThatMeet: Pods (by the per-pod rate, or by
// the pooled limits) agrees with a search over pod counts with Meets.
func TestCapacityPodsIsTheFewestThatMeet(t *testing.T) {
	q := expQuantiles(0.05, 1000)
	for _, pooled := range []bool{false, true} {
		c := &Capacity{MeanService: 0.05, ServiceSCV: 1, ServiceQuantiles: q, K: 2, Target: 0.15, Percentile: 95, Max: 500, Pooled: pooled}
		for _, lambda := range []float64{0, 0.5, 3, 17, 40, 99.5, 250, 1234} {
			want := 1
			for want < c.Max && !c.Meets(lambda, want) {
				want++
			}
			require.Equal(t, want, c.Pods(lambda), "pooled %v, λ = %v", pooled, lambda)
		}
	}
}

// TestCapacityPooledNeedsFewerPods: one queue in front of all pods (the
// activator) needs no more pods than random routing, and fewer at scale.
func TestCapacityPooledNeedsFewerPods(t *testing.T) {
	random := &Capacity{MeanService: 0.05, ServiceSCV: 1, ServiceQuantiles: expQuantiles(0.05, 1000), K: 1, Target: 0.2, Percentile: 95, Max: 1000}
	pooled := *random
	pooled.Pooled = true
	for _, lambda := range []float64{1, 10, 100, 1000} {
		require.LessOrEqual(t, pooled.Pods(lambda), random.Pods(lambda), "λ = %v", lambda)
	}
	require.Less(t, pooled.Pods(1000), random.Pods(1000)*3/4)
}

// TestCapacityInfeasibleTarget: when the service time alone misses the
// target for more than 1 − p of requests, the budget becomes those requests
// plus 1 − p of the others, and the pods needed stay finite.
func TestCapacityInfeasibleTarget(t *testing.T) {
	// Half the requests take 100 ms, half 300 ms; target 200 ms at p95.
	q := append(repeat(0.1, 500), repeat(0.3, 500)...)
	c := &Capacity{MeanService: 0.2, ServiceSCV: 0.25, ServiceQuantiles: q, K: 1, Target: 0.2, Percentile: 95, Max: 1000}
	require.False(t, c.Feasible())
	require.InDelta(t, 0.5+0.05*0.5, c.Budget(), 1e-12)
	n := c.Pods(50)
	require.Less(t, n, 1000, "not the replica cap")
	require.True(t, c.Meets(50, n))
	require.False(t, c.Meets(50, n-1))
	feasible := *c
	feasible.Target, feasible.budget, feasible.perPod = 0.4, 0, 0
	require.True(t, feasible.Feasible())
	require.InDelta(t, 0.05, feasible.Budget(), 1e-12)
}

func TestNew(t *testing.T) {
	for _, n := range []string{"qas", "qas-reactive", "hpa", "hpa-nocooldown", "hpa-cooldown", "kpa", "oracle", "oracle-pooled", "static:3",
		"predictive-hpa", "khpa-a", "alg1", "alg2", "alg3"} {
		p, err := New(n, params, Future{})
		require.NoError(t, err)
		require.Equal(t, n, p.Name())
	}
	for _, bad := range []string{"static:0", "static:x", "nope"} {
		_, err := New(bad, params, Future{})
		require.Error(t, err, bad)
	}
	_, err := New("nope", params, Future{})
	require.ErrorContains(t, err, "hpa-cooldown", "the error lists the policies")
	require.ErrorContains(t, err, "oracle-pooled", "the error lists the policies")
	_, err = New("oracle", params, Future{Activator: true})
	require.ErrorContains(t, err, "oracle-pooled", "the oracle is Service-routed; the error names the one that is not")
}

// TestHPANoCooldown: without the 5-minute stabilisation the HPA scales down
// at the next sync, and its scale-up limit is the behavior path's
// max(2 × current, current + 4).
func TestHPANoCooldown(t *testing.T) {
	h := NewHPANoCooldown(params, 0.7)
	require.Equal(t, "hpa-nocooldown", h.Name())
	w := newHPAWorld(10)
	require.Equal(t, 10, w.step(h, 0.7, true), "the first sync has no samples")
	require.Equal(t, 10, w.step(h, 0.7, true), "on target: 10 recommended")
	require.Equal(t, 1, w.step(h, 0.06, true), "⌈0.06/0.7 × 10⌉ = 1 at once")
	require.Equal(t, 5, w.step(h, 7, true), "1 + 4 > 2 × 1")
	d := NewHPA(params, 0.7)
	w = newHPAWorld(10)
	w.step(d, 0.7, true)
	w.step(d, 0.7, true)
	require.Equal(t, 10, w.step(d, 0.06, true), "the default HPA keeps the 5-minute maximum")
}

func TestLatencyBoundsAreTheProxys(t *testing.T) {
	require.Equal(t, stats.DefaultLatencyBounds, LatencyBounds[:])
	require.Equal(t, 0, LatencyBucket(0))
	require.Equal(t, 0, LatencyBucket(0.0001))
	require.Equal(t, 1, LatencyBucket(0.00010001))
	require.Equal(t, len(LatencyBounds), LatencyBucket(61))
}

// TestHistQuantileIsTheCollectors: qas reads the latency percentile from the
// simulated histograms exactly as the collector reads the proxies'.
func TestHistQuantileIsTheCollectors(t *testing.T) {
	counts := make([]uint64, len(LatencyBounds)+1)
	for i := range counts {
		counts[i] = uint64((i * 7919) % 13)
	}
	h := stats.Histogram{Bounds: stats.DefaultLatencyBounds, Counts: counts}
	for _, q := range []float64{0.01, 0.5, 0.95, 0.99, 1} {
		require.InDelta(t, h.Quantile(q), histQuantile(counts, h.Total(), q), 1e-12, "q = %v", q)
	}
	require.Zero(t, histQuantile(make([]uint64, len(counts)), 0, 0.95))
}

// TestQASHistory: the past before the run reaches qas as the collector would
// have stored it: 15 s rates and 1-minute means of counts drawn at the
// history's rates, before the observed seconds; without a history nothing
// precedes the run.
func TestQASHistory(t *testing.T) {
	p := params
	p.History = make([]float64, 3600)
	for i := range p.History {
		p.History[i] = 50
	}
	q := NewQAS("qas", p, true)
	o := &Observation{Now: 120, Concurrency: 1}
	for range 120 {
		o.Seconds = append(o.Seconds, Second{Arrivals: 10})
	}
	o.Pods = []Pod{{ID: 1, Ready: true, CPU: 1}}
	s := q.Snapshot(o)
	require.Len(t, s.History, 62, "60 minutes before the run and 2 in it")
	require.Equal(t, simEpoch.Add(-59*time.Minute), s.History[0].Time)
	require.Equal(t, simEpoch.Add(2*time.Minute), s.History[61].Time)
	var sum float64
	for _, h := range s.History[:60] {
		sum += h.Rate
	}
	require.InDelta(t, 50, sum/60, 1, "Poisson counts at 50/s")
	require.Equal(t, 10.0, s.History[60].Rate)
	require.Equal(t, 10.0, s.History[61].Rate)
	require.Len(t, s.ArrivalRates, min(qasHistory, 3600+120)/15, "the hour before the run and the run's two minutes, within the window, in 15 s windows")
	require.Equal(t, 10.0, s.ArrivalRates[len(s.ArrivalRates)-1].Rate)
	require.InDelta(t, 50, s.ArrivalRates[0].Rate, 10)

	// Without a history: only the run.
	s = NewQAS("qas", params, true).Snapshot(o)
	require.Len(t, s.History, 2)
	require.Len(t, s.ArrivalRates, 8)
}

// TestQASRateCV2IsTheCollectors: each cycle's snapshot carries the relative
// variance of the per-second rate over the seconds that ended since the last
// one and the pair joining them to the one before, as collector/aggregate
// stores it; the seconds before are not counted again.
func TestQASRateCV2IsTheCollectors(t *testing.T) {
	q := NewQAS("qas", params, true)
	o := &Observation{Concurrency: 1, Pods: []Pod{{ID: 1, Ready: true, CPU: 1}}}
	counts := []int{50, 0, 100, 50, 0, 150, 0, 50, 100, 0}
	for i, c := range counts {
		o.Seconds = append(o.Seconds, Second{Arrivals: c})
		o.Now = float64(i + 1)
		if o.Now == 5 {
			s := q.Snapshot(o)
			sums, err := ratevar.Of([]int64{50, 0, 100, 50, 0})
			require.NoError(t, err)
			want, err := ratevar.CV2(sums)
			require.NoError(t, err)
			require.InDelta(t, want, s.RateCV2, 1e-12)
			require.Equal(t, 4.0, s.RateCV2Pairs)
		}
	}
	s := q.Snapshot(o)
	sums, err := ratevar.Of([]int64{0, 150, 0, 50, 100, 0})
	require.NoError(t, err)
	want, err := ratevar.CV2(sums)
	require.NoError(t, err)
	require.InDelta(t, want, s.RateCV2, 1e-12)
	require.Equal(t, 5.0, s.RateCV2Pairs, "five seconds and the pair joining them to the last cycle")
	require.Greater(t, s.RateCV2, 0.3, "batches of 50")

	// Constant traffic: no variance beyond Poisson to speak of (the estimate
	// is −1/mean for a constant count).
	o2 := &Observation{Concurrency: 1, Pods: o.Pods}
	for i := range 5 {
		o2.Seconds = append(o2.Seconds, Second{Arrivals: 40})
		o2.Now = float64(i + 1)
	}
	s = NewQAS("qas", params, true).Snapshot(o2)
	require.InDelta(t, -1.0/40, s.RateCV2, 1e-12)
}
