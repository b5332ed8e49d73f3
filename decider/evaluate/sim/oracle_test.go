package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/trace"
)

// TestOracleIsTheCheapestThatMeetsTheSLO: on several workloads the oracle
// (routed at random through a Service, as qas and the HPA are) meets the SLO
// (at most 1 − p of requests over the target) and costs no more
// CPU-core-seconds than qas, qas-reactive or hpa whenever they meet it too;
// oracle-pooled (the routing free, so the activator too) meets it and costs
// no more than the oracle, nor than kpa (whose activator also pools requests)
// when kpa meets it.
func TestOracleIsTheCheapestThatMeetsTheSLO(t *testing.T) {
	sine := sineRates(30, 25, 120, 1200)
	step := append(constRates(10, 300), constRates(80, 300)...)
	step = append(step, constRates(10, 300)...)
	incdec, err := trace.Load(trace.Options{Source: "pattern:increase-decrease", Scale: 1, Compress: 1})
	require.NoError(t, err)
	compared := map[string]int{}
	names := []string{"oracle", "oracle-pooled", "qas", "qas-reactive", "hpa", "kpa"}
	// Whom each oracle is held to, when they meet the SLO.
	against := map[string][]string{
		"oracle":        {"qas", "qas-reactive", "hpa"},
		"oracle-pooled": {"oracle", "kpa"},
	}
	for _, tc := range []struct {
		name          string
		rates         []float64
		service, init string
		target        float64
		initial       int
	}{
		{name: "sine, exp service, 20 s init", rates: sine, service: "exp:50ms", init: "20s", target: 0.2},
		{name: "step, constant service", rates: step, service: "const:50ms", init: "20s", target: 0.2},
		{name: "seed 000 increase-decrease, 135 s init", rates: incdec.Rates, service: "exp:250ms", init: "135s", target: 1, initial: 1},
		{name: "sine, lognormal service, exponential init", rates: sine, service: "lognormal:50ms,cv=1.5", init: "exp:30s", target: 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Rates: tc.rates, Service: mustDist(t, tc.service), Init: mustDist(t, tc.init), Concurrency: 1, CPU: 0.5,
				Target: tc.target, Percentile: 95, InitialReplicas: tc.initial, Seed: 1}
			p := policy.Params{Target: tc.target, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}
			c, err := Compare(cfg, names, p, nil)
			require.NoError(t, err)
			require.Len(t, c.Oracles, 2)
			byName := map[string]*Result{}
			for i, r := range c.Results {
				require.Equal(t, names[i], r.Policy)
				byName[r.Policy] = r
				s := c.Summaries[i]
				t.Logf("%s: %.2f %% over, %.0f core-s, routing %q", s.Name, s.RequestsOverTargetPct, s.CPUCoreSeconds, s.Routing)
			}
			meets := func(r *Result) bool { return float64(r.OverTarget) <= 0.05*float64(r.Requests) }
			for i, o := range c.Oracles {
				require.Equal(t, names[i], o.Policy)
				require.True(t, o.Met, o.Policy)
				require.Equal(t, o.Routing, c.Summaries[i].Routing)
				r := byName[o.Policy]
				require.True(t, meets(r), "%s meets p95 ≤ target", o.Policy)
				for _, other := range against[o.Policy] {
					if q := byName[other]; meets(q) {
						compared[o.Policy]++
						require.LessOrEqual(t, r.CPURequested, q.CPURequested, "%s meets the SLO for less than %s", other, o.Policy)
					}
				}
			}
			require.Equal(t, "random", c.Oracles[0].Routing, "the oracle is routed as qas and the HPA are")
			for _, cand := range c.Oracles[0].Candidates {
				require.Equal(t, "random", cand.Routing, "the oracle searches the run's data plane only")
			}
		})
	}
	require.Positive(t, compared["oracle"], "qas, qas-reactive or hpa met the SLO somewhere, so the oracle's cost was compared")
	require.Positive(t, compared["oracle-pooled"], "the pooled oracle's cost was compared")
}

// TestOracleDemandWhenTheTargetIsInfeasible: a target below the service
// time's own p95 cannot be met by any pod count; the demand stays a finite
// function of the rate instead of jumping to the replica cap.
func TestOracleDemandWhenTheTargetIsInfeasible(t *testing.T) {
	svc := mustDist(t, "exp:100ms")
	init := mustDist(t, "10s")
	rates := append(constRates(10, 300), constRates(40, 300)...)
	cfg := Config{Rates: rates, Service: svc, Init: init, Concurrency: 1, CPU: 1, Target: 0.25, Percentile: 95, Seed: 1}
	capa := NewCapacity(cfg, 200)
	require.False(t, capa.Feasible(), "P(S > 250 ms) = e^−2.5 ≈ 8 % > 5 %")
	d := policy.Demand(rates, capa)
	require.Less(t, d[0], d[599], "more load needs more pods")
	require.Less(t, d[599], 200, "not the replica cap")
	c, err := Compare(cfg, []string{"oracle", "static:200"}, policy.Params{Target: 0.25, Percentile: 95, Concurrency: 1, CPU: 1,
		MinReplicas: 1, MaxReplicas: 200}, nil)
	require.NoError(t, err)
	require.InDelta(t, 100*(math.Exp(-2.5)+0.05*(1-math.Exp(-2.5))), c.Oracles[0].BudgetPct, 0.2)
	require.True(t, c.Oracles[0].Met, "the relaxed budget is met")
	require.Less(t, c.Summaries[0].CPUCoreSeconds, c.Summaries[1].CPUCoreSeconds/4)
}

// TestYardsticksOnEveryDataPlane: on each data plane (random, leastRequest,
// pooled) the clairvoyant and the reactive oracle meet the SLO on a step
// load, are searched on that plane, and knowing the future is worth
// something (the clairvoyant oracle costs no more than the reactive one); the
// -pooled ones, free to add a pooled queue, cost no more than the plain ones;
// the lower bounds (pods Ready at once) cost no more than the oracles.
func TestYardsticksOnEveryDataPlane(t *testing.T) {
	step := append(constRates(10, 300), constRates(60, 300)...)
	step = append(step, constRates(10, 300)...)
	for _, routing := range Routings {
		t.Run(routing.String(), func(t *testing.T) {
			cfg := Config{Rates: step, Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 0.5,
				Target: 0.2, Percentile: 95, Seed: 2, Routing: routing}
			p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}
			c, err := Compare(cfg, []string{"yardsticks"}, p, nil)
			require.NoError(t, err)
			by := map[string]Summary{}
			for i, s := range c.Summaries {
				require.Equal(t, policy.Yardsticks[i], s.Name)
				by[s.Name] = s
				t.Logf("%-24s %6.2f %% over, %7.0f pod-s, routing %s", s.Name, s.RequestsOverTargetPct, s.PodSeconds, s.Routing)
			}
			require.Len(t, c.Oracles, 6)
			for _, o := range c.Oracles {
				require.True(t, o.Met, o.Policy)
				require.Equal(t, o.Policy == policy.ReactiveOracleName || o.Policy == policy.PooledReactiveOracleName, o.Reactive)
				require.Equal(t, o.Policy == policy.LowerBoundName || o.Policy == policy.PooledLowerBoundName, o.ZeroInit)
				if o.Policy == policy.OracleName || o.Policy == policy.ReactiveOracleName || o.Policy == policy.LowerBoundName {
					require.Equal(t, routing.String(), o.Routing, "%s is on the run's data plane", o.Policy)
					sizings := map[string]bool{}
					for _, cand := range o.Candidates {
						require.Equal(t, routing.String(), cand.Routing)
						sizings[cand.Sizing] = true
					}
					// The front and overflow planes queue in a shared front:
					// their own plane is searched with the pooled rule too.
					shared := routing == RouteFront || routing == RouteOverflow
					require.True(t, sizings[""], "%s: the per-pod rule is always searched", o.Policy)
					require.Equal(t, shared, sizings["pooled"], "%s: %+v", o.Policy, o.Candidates)
					require.Len(t, o.Candidates, map[bool]int{false: len(OracleWindows), true: 2 * len(OracleWindows)}[shared], o.Policy)
				}
			}
			require.LessOrEqual(t, by["oracle"].CPUCoreSeconds, by["oracle-reactive"].CPUCoreSeconds, "the future is worth something")
			require.LessOrEqual(t, by["oracle-pooled"].CPUCoreSeconds, by["oracle"].CPUCoreSeconds)
			require.LessOrEqual(t, by["oracle-reactive-pooled"].CPUCoreSeconds, by["oracle-reactive"].CPUCoreSeconds)
			require.LessOrEqual(t, by["lower-bound"].CPUCoreSeconds, by["oracle"].CPUCoreSeconds, "init time costs pods")
			require.LessOrEqual(t, by["lower-bound-pooled"].CPUCoreSeconds, by["lower-bound"].CPUCoreSeconds)
			require.LessOrEqual(t, by["lower-bound-pooled"].CPUCoreSeconds, by["oracle-pooled"].CPUCoreSeconds)
		})
	}
}

// TestSharedQueuePlanesSizedBothWays: on the overflow plane the search runs
// its own plane with both sizing rules and each yardstick is the cheapest
// candidate that meets the SLO, never dearer than the per-pod rule alone. On a
// load that steps between 20/s and 80/s every 150 s, the reactive oracle is
// cheaper sized by the pooled model: a headroom on the per-pod rule that
// covers the steps' first init time at 20/s holds too many pods at 80/s,
// where a pooled queue needs fewer per request.
func TestSharedQueuePlanesSizedBothWays(t *testing.T) {
	var steps []float64
	for s := range 900 {
		steps = append(steps, map[bool]float64{true: 20, false: 80}[s%300 < 150])
	}
	cfg := Config{Rates: steps, Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 0.5,
		Target: 0.2, Percentile: 95, Seed: 3, Routing: RouteOverflow}
	p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 200}
	c, err := Compare(cfg, []string{policy.OracleName, policy.ReactiveOracleName}, p, nil)
	require.NoError(t, err)
	for i, o := range c.Oracles {
		require.True(t, o.Met, o.Policy)
		perPod := math.Inf(1)
		for _, cand := range o.Candidates {
			require.Equal(t, "overflow", cand.Routing)
			if cand.Sizing == "" && cand.Met {
				perPod = math.Min(perPod, cand.CPUCoreSeconds)
			}
		}
		require.LessOrEqual(t, c.Summaries[i].CPUCoreSeconds, perPod, "%s is the cheapest candidate", o.Policy)
		t.Logf("%s: %.0f core-s (sizing %q), the per-pod rule alone %.0f", o.Policy, c.Summaries[i].CPUCoreSeconds, o.Sizing, perPod)
		if o.Policy == policy.ReactiveOracleName {
			require.Equal(t, "pooled", o.Sizing)
			require.Less(t, c.Summaries[i].CPUCoreSeconds, perPod)
		}
	}
}

// TestReactiveOracleKnowsOnlyThePresent: the reactive oracle, given the
// need of each second sized from its own true rate, asks for more pods the
// moment a step arrives (the decision at t = 300 s, recorded in second 299),
// not before, and its new pods take their 30 s init time to be Ready.
func TestReactiveOracleKnowsOnlyThePresent(t *testing.T) {
	rates := append(constRates(5, 300), constRates(50, 300)...)
	cfg := Config{Rates: rates, Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 0.5,
		Target: 0.2, Percentile: 95, Seed: 1, InitialReplicas: 2}
	capa := NewCapacity(cfg, 100)
	r := Run(cfg, policy.NewReactiveOracle(policy.ReactiveOracleName, policy.Params{MinReplicas: 1, MaxReplicas: 100},
		policy.Demand(rates, capa)))
	low, high := capa.Pods(5), capa.Pods(50)
	require.Less(t, low, high)
	require.Equal(t, low, r.Desired[298], "nothing before the step")
	require.Equal(t, high, r.Desired[299], "the step's need at once")
	require.Equal(t, low, r.Ready[320], "new pods are not Ready before their init time")
	require.Equal(t, high, r.Ready[331])
}

// TestRunsStartWithThePlanesOwnPods: with no InitialReplicas given, Compare
// starts every policy with the first init time's highest need counted by the
// cell's own data plane: the per-pod rule where each pod queues its own
// requests, the pooled rule where they wait in one queue. Counted per pod on a
// shared-queue plane, a run began with pods no yardstick of that plane holds.
func TestRunsStartWithThePlanesOwnPods(t *testing.T) {
	rates := append(append(constRates(30, 20), constRates(60, 20)...), constRates(10, 200)...)
	p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 200}
	for _, tc := range []struct {
		routing Routing
		pooled  bool
	}{
		{RouteRandom, false}, {RouteLeastRequest, false}, {RoutePeer, false},
		{RoutePooled, true}, {RouteFront, true}, {RouteOverflow, true},
	} {
		t.Run(tc.routing.String(), func(t *testing.T) {
			cfg := Config{Rates: rates, Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 0.5,
				Target: 0.2, Percentile: 95, Seed: 2, Routing: tc.routing}
			c, err := Compare(cfg, []string{"static:1"}, p, nil)
			require.NoError(t, err)
			perPod := NewCapacity(cfg, 200)
			pooled := perPod.PooledClone()
			// The need peaks at 60/s within the first 30 s init time.
			want := perPod.Pods(60)
			if tc.pooled {
				want = pooled.Pods(60)
			}
			require.Less(t, pooled.Pods(60), perPod.Pods(60), "the rules differ at 60/s")
			require.Equal(t, want, c.Results[0].Initial)
			require.Equal(t, want, c.Results[0].Ready[0], "Ready at time 0")
		})
	}
}

// TestPooledCloneLeavesTheOriginal: PooledClone sizes for one queue in front
// of all pods, fewer than per-pod queues at 60/s, and leaves the capacity it
// copies sizing per pod.
func TestPooledCloneLeavesTheOriginal(t *testing.T) {
	cfg := Config{Service: mustDist(t, "exp:50ms"), Concurrency: 1, CPU: 0.5, Target: 0.2, Percentile: 95}
	capa := NewCapacity(cfg, 200)
	perPod := capa.Pods(60)
	pooled := capa.PooledClone()
	require.True(t, pooled.Pooled)
	require.False(t, capa.Pooled)
	require.Less(t, pooled.Pods(60), perPod)
	require.Equal(t, perPod, capa.Pods(60))
}
