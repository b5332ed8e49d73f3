package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// peerCfg is n k = 1 pods at ρ = rho with exponential 1 s service.
func peerCfg(t *testing.T, n int, rho float64, routing Routing, h Handoff) Config {
	exp1s := mustDist(t, "exp:1s")
	return Config{Rates: constRates(rho*float64(n), 20000), Service: exp1s, Init: exp1s, Concurrency: 1, CPU: 1, Target: 10,
		Percentile: 95, InitialReplicas: n, Routing: routing, Handoff: h}
}

func static(n int) func() policy.Policy { return func() policy.Policy { return policy.Static{N: n} } }

// TestPeerHandoffSitsBetween checks peer handoff with fresh advertisements
// and no hop cost against the closed forms it lies between: six k = 1 pods
// at ρ = 0.8 wait less than six M/M/1 (random routing, mean latency 5 s) and
// more than one M/M/6 (the pooled queue, which also serves a queued request
// the moment any slot frees, where a proxy hands its queue off only on its
// tick), each beyond 4 standard errors.
func TestPeerHandoffSitsBetween(t *testing.T) {
	cfg := peerCfg(t, 6, 0.8, RoutePeer, Handoff{Fresh: true})
	m, se := meanAndSE(t, cfg, static(6), 6)
	random, pooled := 1/(1-0.8), 1+erlangCWait(6, 4.8, 1)
	t.Logf("peer handoff mean latency %.3f ± %.3f; pooled M/M/6 %.3f, random M/M/1 %.3f", m, se, pooled, random)
	require.Less(t, m+4*se, random)
	require.Greater(t, m-4*se, pooled)
}

// TestFrontFreshIsThePooledQueue checks the capacity-aware front's limit:
// checked at every arrival and with no hop cost, it is in the path whenever
// a pod is busy, and a request routed at random while every pod is free
// finds a free slot anyway, so three k = 1 pods are one M/M/3.
func TestFrontFreshIsThePooledQueue(t *testing.T) {
	cfg := peerCfg(t, 3, 0.6, RouteFront, Handoff{Fresh: true})
	m, se := meanAndSE(t, cfg, static(3), 6)
	want := 1 + erlangCWait(3, 1.8, 1)
	t.Logf("front (fresh, no hop) mean latency %.4f ± %.4f, M/M/3 %.4f", m, se, want)
	require.InDelta(t, want, m, 4*se+0.01*want)
}

// TestOverflowFreshIsThePooledQueue: with no hop cost, sidecars that
// overflow to a front from which free pods pull keep every slot busy while
// requests wait, so three k = 1 pods are one M/M/3; only requests that find
// their pod full go through the front.
func TestOverflowFreshIsThePooledQueue(t *testing.T) {
	cfg := peerCfg(t, 3, 0.6, RouteOverflow, Handoff{})
	m, se := meanAndSE(t, cfg, static(3), 6)
	want := 1 + erlangCWait(3, 1.8, 1)
	t.Logf("overflow (no hop) mean latency %.4f ± %.4f, M/M/3 %.4f", m, se, want)
	require.InDelta(t, want, m, 4*se+0.01*want)
	cfg.Seed = 1
	r := Run(cfg, policy.Static{N: 3})
	// A request finds its random pod busy with probability ρ = 0.6.
	h := r.Handoff
	pulled := h.Hops[2+pullWaitingHops] + h.Hops[2+pullOnFreeHops]
	share := float64(h.ViaFront) / float64(h.Hops[0]+pulled)
	require.InDelta(t, 0.6, share, 0.02)
	// Each overflow pays two hops and its pull's three (a pull was waiting)
	// or four (the slot had just freed); the last few still wait in front at
	// the end.
	require.Equal(t, h.Hops[0]+pulled, sum(h.Hops[:]))
	require.Positive(t, h.Hops[2+pullWaitingHops])
	require.Positive(t, h.Hops[2+pullOnFreeHops])
	require.LessOrEqual(t, pulled, h.ViaFront)
}

// TestPeerHopLimit runs peer handoff where handoffs are frequent and often
// refused (ρ = 0.9, advertisements every 2 s, 0.5 ms hops): accepted
// handoffs and refusals both happen, no request starts after two accepted
// handoffs, every accepted handoff paid at least one hop, and each refusal
// a second one.
func TestPeerHopLimit(t *testing.T) {
	cfg := peerCfg(t, 8, 0.9, RoutePeer, Handoff{Hop: 0.0005, Period: 2})
	cfg.Rates = cfg.Rates[:5000]
	cfg.Seed = 3
	r := Run(cfg, policy.Static{N: 8})
	h := r.Handoff
	t.Logf("handoff stats %+v of %d requests", h, r.Requests)
	require.Positive(t, h.HandedOff)
	require.Positive(t, h.Refused)
	require.Zero(t, h.HandedTwice)
	require.Zero(t, h.ViaFront)
	paid := sum(h.Hops[1:])
	require.GreaterOrEqual(t, paid, h.HandedOff)
	require.GreaterOrEqual(t, sum(h.Hops[2:]), h.Refused/2, "a refusal costs its request a second hop")
	started := h.Hops[0] + paid
	require.GreaterOrEqual(t, started, r.Requests)
}

// TestStaleAdvertisementsDegradeTowardRandom checks that the older the
// advertisements, the worse peer handoff does: with fresh ones it waits
// least, with 1 s ones more, with 20 s ones more still (more of its handoffs
// are refused), and never worse than random routing (a refused request goes
// back to the queue it would have waited in), each step beyond 4 standard
// errors except the last, which is an upper bound.
func TestStaleAdvertisementsDegradeTowardRandom(t *testing.T) {
	const n, rho = 8, 0.85
	fresh, seF := meanAndSE(t, peerCfg(t, n, rho, RoutePeer, Handoff{Fresh: true, Period: 1}), static(n), 6)
	stale1, se1 := meanAndSE(t, peerCfg(t, n, rho, RoutePeer, Handoff{Period: 1}), static(n), 6)
	stale20, se20 := meanAndSE(t, peerCfg(t, n, rho, RoutePeer, Handoff{Period: 20}), static(n), 6)
	random := 1 / (1 - rho)
	t.Logf("mean latency: fresh %.3f ± %.3f, 1 s %.3f ± %.3f, 20 s %.3f ± %.3f, random M/M/1 %.3f", fresh, seF, stale1, se1, stale20, se20, random)
	require.Less(t, fresh+4*seF, stale1-4*se1)
	require.Less(t, stale1+4*se1, stale20-4*se20)
	require.Less(t, stale20-4*se20, random)

	refusedShare := func(h Handoff) float64 {
		cfg := peerCfg(t, n, rho, RoutePeer, h)
		cfg.Seed = 1
		r := Run(cfg, policy.Static{N: n})
		return float64(r.Handoff.Refused) / float64(r.Handoff.Refused+r.Handoff.HandedOff)
	}
	f, s1, s20 := refusedShare(Handoff{Fresh: true, Period: 1}), refusedShare(Handoff{Period: 1}), refusedShare(Handoff{Period: 20})
	t.Logf("refused share of handoffs: fresh %.3f, 1 s %.3f, 20 s %.3f", f, s1, s20)
	require.Zero(t, f, "fresh advertisements count the requests on their way")
	require.Less(t, s1, s20)
}

// TestNoHandoffWithoutQueue checks that the extra hop costs nothing when no
// queue forms: with more slots than requests ever in flight, peer handoff
// hands nothing off and the front never enters the path, so both give
// exactly the latencies of random routing on the same seed.
func TestNoHandoffWithoutQueue(t *testing.T) {
	base := peerCfg(t, 4, 0.5, RouteRandom, DefaultHandoff)
	base.Concurrency = 1000
	base.Rates = base.Rates[:3000]
	base.Seed = 7
	random := Run(base, policy.Static{N: 4})
	for _, routing := range []Routing{RoutePeer, RouteFront, RouteOverflow} {
		cfg := base
		cfg.Routing = routing
		r := Run(cfg, policy.Static{N: 4})
		// Hops counts starts, Requests completions: the last requests are still in service.
		require.GreaterOrEqual(t, r.Handoff.Hops[0], r.Requests)
		require.Equal(t, HandoffStats{Hops: [8]int{r.Handoff.Hops[0]}}, r.Handoff, routing.String())
		require.Equal(t, random.Requests, r.Requests)
		require.Equal(t, random.MeanLatency, r.MeanLatency, routing.String())
	}
}

// TestFrontHopIsPaidInThePath checks the front's cost: at ρ = 0.8 on four
// k = 1 pods it is in the path most of the time, the requests through it
// each pay one hop (so their count equals the one-hop starts), and a 50 ms
// hop raises the mean latency by about the hop times the share of requests
// through the front.
func TestFrontHopIsPaidInThePath(t *testing.T) {
	noHop := peerCfg(t, 4, 0.8, RouteFront, Handoff{Period: 1})
	noHop.Rates = noHop.Rates[:10000]
	noHop.Seed = 2
	withHop := noHop
	withHop.Handoff.Hop = 0.05
	a, b := Run(noHop, policy.Static{N: 4}), Run(withHop, policy.Static{N: 4})
	h := b.Handoff
	t.Logf("front: %.0f of %d s in the path, %d of %d requests through it; mean latency %.4f → %.4f",
		h.FrontInPath, len(noHop.Rates), h.ViaFront, b.Requests, a.MeanLatency, b.MeanLatency)
	require.Greater(t, h.FrontInPath, 0.5*float64(len(noHop.Rates)))
	require.Equal(t, h.ViaFront, h.Hops[1])
	share := float64(h.ViaFront) / float64(b.Requests)
	require.InDelta(t, 0.05*share, b.MeanLatency-a.MeanLatency, 0.05*share)
}

// TestPeerAndFrontDeterministicPerSeed checks that the new data planes, with
// their random phases and choices, repeat exactly for a seed.
func TestPeerAndFrontDeterministicPerSeed(t *testing.T) {
	for _, routing := range []Routing{RoutePeer, RouteFront, RouteOverflow} {
		cfg := peerCfg(t, 5, 0.9, routing, DefaultHandoff)
		cfg.Rates = cfg.Rates[:2000]
		cfg.Seed = 11
		a, b := Run(cfg, policy.Static{N: 5}), Run(cfg, policy.Static{N: 5})
		require.Equal(t, a.Handoff, b.Handoff, routing.String())
		require.Equal(t, a.MeanLatency, b.MeanLatency, routing.String())
	}
}

func TestHopsAt(t *testing.T) {
	h := HandoffStats{Hops: [8]int{60, 30, 10}}
	require.Equal(t, 0, h.HopsAt(50))
	require.Equal(t, 1, h.HopsAt(90))
	require.Equal(t, 2, h.HopsAt(95))
	pulled := HandoffStats{Hops: [8]int{40, 0, 0, 0, 0, 35, 25}}
	require.Equal(t, 5, pulled.HopsAt(75))
	require.Equal(t, 6, pulled.HopsAt(76))
	require.Equal(t, 0, HandoffStats{}.HopsAt(50))
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestPullHoldsTheSlot: on RouteOverflow a pulled request holds its puller's
// slot for the pull's hops before its service (three when a pull was
// waiting, four when the slot had just freed), and they count as hops it
// paid; the other planes' fronts push, and nothing is added there.
func TestPullHoldsTheSlot(t *testing.T) {
	req := request{arr: 1, svc: 0.05, paid: 2}
	for _, tc := range []struct {
		routing Routing
		onFree  bool
		svc     float64
		paid    uint8
	}{
		{RouteOverflow, false, 0.05 + 3*0.01, 5},
		{RouteOverflow, true, 0.05 + 4*0.01, 6},
		{RoutePooled, true, 0.05, 2},
		{RouteFront, false, 0.05, 2},
	} {
		s := &sim{cfg: Config{Routing: tc.routing, Handoff: Handoff{Hop: 0.01}}}
		got := s.pull(req, tc.onFree)
		require.InDelta(t, tc.svc, got.svc, 1e-12, "%v onFree=%v", tc.routing, tc.onFree)
		require.Equal(t, tc.paid, got.paid)
		require.Equal(t, req.arr, got.arr)
	}
}

// TestOverflowHopsCostLatency: with a hop of 50 ms against 1 s of service,
// three k = 1 pods at ρ = 0.6 on RouteOverflow wait longer than with none,
// by at least the five hops each overflowed request pays itself (two to the
// front, three or more for its pull); the slots the pulls hold make the
// others wait too, so the difference is larger still.
func TestOverflowHopsCostLatency(t *testing.T) {
	const hop = 0.05
	none, _ := meanAndSE(t, peerCfg(t, 3, 0.6, RouteOverflow, Handoff{}), static(3), 6)
	cfg := peerCfg(t, 3, 0.6, RouteOverflow, Handoff{Hop: hop})
	with, se := meanAndSE(t, cfg, static(3), 6)
	cfg.Seed = 1
	r := Run(cfg, policy.Static{N: 3})
	share := float64(r.Handoff.ViaFront) / float64(r.Requests)
	t.Logf("mean latency %.4f without hops, %.4f ± %.4f with %v s hops; %.2f of the requests through the front", none, with, se, hop, share)
	require.Greater(t, with-4*se, none+share*5*hop)
}
