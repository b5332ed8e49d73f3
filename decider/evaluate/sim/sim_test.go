package sim

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// erlangCWait is the test's own M/M/c mean wait: Erlang C by its textbook sum,
// independent of decider/queueing and of policy.Capacity.
func erlangCWait(c int, lambda, mu float64) float64 {
	a := lambda / mu
	sum, term := 0.0, 1.0
	for k := 0; k < c; k++ {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	last := term * a / float64(c) // a^c / c!
	pc := last / (1 - a/float64(c))
	pw := pc / (sum + pc)
	return pw / (float64(c)*mu - lambda)
}

// sineRates is a load of mean + amplitude·sin(t/scale) requests per second at second t
// (a period of 2π·scale seconds), for seconds seconds.
func sineRates(mean, amplitude, scale float64, seconds int) []float64 {
	r := make([]float64, seconds)
	for i := range r {
		r[i] = mean + amplitude*math.Sin(float64(i)/scale)
	}
	return r
}

func constRates(rate float64, seconds int) []float64 {
	r := make([]float64, seconds)
	for i := range r {
		r[i] = rate
	}
	return r
}

// meanAndCI runs seeds independent replications and returns the grand mean of
// the mean latency and its standard error.
func meanAndSE(t *testing.T, cfg Config, pol func() policy.Policy, seeds int) (float64, float64) {
	t.Helper()
	var xs []float64
	for s := 1; s <= seeds; s++ {
		cfg.Seed = uint64(s)
		r := Run(cfg, pol())
		require.Positive(t, r.Requests)
		xs = append(xs, r.MeanLatency)
	}
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	v /= float64(len(xs) - 1)
	return m, math.Sqrt(v / float64(len(xs)))
}

// TestQueueingTheory checks the simulator against closed forms: one pod with
// concurrency c is an M/M/c queue (Erlang C); c pods with concurrency 1 behind
// random routing are c independent M/M/1 queues fed λ/c. The tolerance is 4
// standard errors of the mean over 10 independent replications (Student t
// with 9 degrees of freedom: a false failure about once in 300 runs, and the
// seeds are fixed so the test is deterministic), plus the 1 % bias a warm-up
// from an empty system could add.
// activated is a policy behind an activator that never leaves the path.
type activated struct{ policy.Static }

func (activated) ActivatorRouting() bool { return true }

func TestQueueingTheory(t *testing.T) {
	exp1s := mustDist(t, "exp:1s")
	const1s := mustDist(t, "const:1s")
	for _, tc := range []struct {
		name        string
		pods, k     int
		lambda      float64
		service     Dist
		sharing     bool
		activator   bool
		routing     Routing
		cpu         float64
		wantLatency float64
	}{
		{name: "M/M/4 in one pod", pods: 1, k: 4, lambda: 3, service: exp1s, cpu: 1, wantLatency: 1 + erlangCWait(4, 3, 1)},
		{name: "M/M/2 in one pod", pods: 1, k: 2, lambda: 1.2, service: exp1s, cpu: 1, wantLatency: 1 + erlangCWait(2, 1.2, 1)},
		{name: "3 pods, random routing: M/M/1 each", pods: 3, k: 1, lambda: 1.8, service: exp1s, cpu: 1, wantLatency: 1 / (1 - 0.6)},
		// Behind an activator (central queue, a request goes only to a pod with
		// a free place) the same three pods are one M/M/3.
		{name: "3 pods behind the activator: M/M/3", pods: 3, k: 1, lambda: 1.8, service: exp1s, cpu: 1, activator: true,
			wantLatency: 1 + erlangCWait(3, 1.8, 1)},
		// The pooled data plane (Config.Routing) is the same activator for every policy.
		{name: "3 pods, pooled routing: M/M/3", pods: 3, k: 1, lambda: 1.8, service: exp1s, cpu: 1, routing: RoutePooled,
			wantLatency: 1 + erlangCWait(3, 1.8, 1)},
		// Processor sharing: M/G/1-PS's mean response time is E[S]/(1−ρ) whatever
		// the distribution (FCFS M/D/1 would be 1 + 0.6/(2·0.4) = 1.75 s).
		{name: "processor sharing, constant service: M/D/1-PS", pods: 1, k: 1000, lambda: 0.6, service: const1s, sharing: true, cpu: 1,
			wantLatency: 1 / (1 - 0.6)},
		// A 2-core pod whose requests use 1 core each: with exponential service
		// the number in the pod is M/M/2's birth-death chain, so is the mean.
		{name: "processor sharing, 2 cores, 1 core per request: as M/M/2", pods: 1, k: 1000, lambda: 1.2, service: exp1s, sharing: true, cpu: 2,
			wantLatency: 1 + erlangCWait(2, 1.2, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Rates: constRates(tc.lambda, 20000), Service: tc.service, Init: exp1s, Concurrency: tc.k,
				CPU: tc.cpu, Sharing: tc.sharing, Target: 10, Percentile: 95, InitialReplicas: tc.pods, Routing: tc.routing}
			m, se := meanAndSE(t, cfg, func() policy.Policy {
				if tc.activator {
					return activated{policy.Static{N: tc.pods}}
				}
				return policy.Static{N: tc.pods}
			}, 10)
			require.InDelta(t, tc.wantLatency, m, 4*se+0.01*tc.wantLatency, "mean latency %.4f ± %.4f, theory %.4f", m, se, tc.wantLatency)
			t.Logf("mean latency %.4f ± %.4f (s.e.), theory %.4f", m, se, tc.wantLatency)
			if tc.sharing {
				// Work is conserved: the cores used average λ·E[S]·(cores per request).
				cfg.Seed = 1
				r := Run(cfg, policy.Static{N: tc.pods})
				require.InDelta(t, tc.lambda, r.CPUUsedSeconds()/20000, 0.03*tc.lambda)
			}
		})
	}
}

func TestDeterministicPerSeed(t *testing.T) {
	svc := mustDist(t, "lognormal:50ms,cv=1.5")
	init := mustDist(t, "exp:20s")
	rates := sineRates(20, 15, 60, 900)
	cfg := Config{Rates: rates, Service: svc, Init: init, Concurrency: 1, CPU: 0.5, Target: 0.2, Percentile: 95}
	p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}
	names := []string{"qas", "hpa", "kpa", "oracle"}
	var arrivals [][]int
	run := func(seed uint64) []Summary {
		cfg.Seed = seed
		c, err := Compare(cfg, names, p, nil)
		require.NoError(t, err)
		arrivals = arrivals[:0]
		for _, r := range c.Results {
			arrivals = append(arrivals, r.Arrivals)
		}
		return c.Summaries
	}
	a, b, other := run(7), run(7), run(8)
	require.Equal(t, a, b, "same seed, same results")
	require.NotEqual(t, a[0].Requests, other[0].Requests, "another seed draws other arrivals")
	for i := range arrivals[1:] {
		require.Equal(t, arrivals[0], arrivals[i+1], "%s sees the same arrivals as %s (common random numbers)", names[i+1], names[0])
	}
}

func TestElasticity(t *testing.T) {
	for _, tc := range []struct {
		name           string
		demand, supply []int
		want           Spec
	}{
		{name: "exact", demand: []int{2, 2, 2, 2}, supply: []int{2, 2, 2, 2}, want: Spec{}},
		{name: "half under all the time", demand: []int{4, 4}, supply: []int{2, 2}, want: Spec{ThetaU: 50, TauU: 100}},
		// θ and τ are per second; one minute is one sample for instability
		// and jitter, so neither has a step here.
		{name: "double over half the time", demand: []int{2, 2}, supply: []int{2, 4}, want: Spec{ThetaO: 50, TauO: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Elasticity(tc.demand, tc.supply))
		})
	}
}

// perSecond spreads one value per minute over its 60 seconds.
func perSecond(minutes ...int) []int {
	var out []int
	for _, v := range minutes {
		for range SpecSample {
			out = append(out, v)
		}
	}
	return out
}

func TestInstabilityAndJitterPerMinute(t *testing.T) {
	// Demand 2, 4, 4, 2 pods by minute; supply follows one minute late on the
	// way up and on time on the way down. Steps: demand up while supply stays
	// (unstable), supply up while demand stays (unstable), both down (stable):
	// υ = 2/3. Both change twice in 4 minutes: jitter 0.
	demand, supply := perSecond(2, 4, 4, 2), perSecond(2, 2, 4, 2)
	m := Elasticity(demand, supply)
	require.InDelta(t, 200.0/3, m.Instability, 1e-9)
	require.Zero(t, m.Jitter)
	require.InDelta(t, 100.0/8, m.ThetaU, 1e-9, "under by half for one minute of four")
	require.InDelta(t, 25, m.TauU, 1e-9)

	// Demand that flips between 4 and 5 every second has a per-minute mean of
	// 4.5 (rounded to 5) each minute: it does not move, and a supply held at 5
	// is stable, not unstable 100 % of the time.
	var noisy []int
	for i := range 4 * SpecSample {
		noisy = append(noisy, 4+i%2)
	}
	m = Elasticity(noisy, perSecond(5, 5, 5, 5))
	require.Zero(t, m.Instability)
	require.Zero(t, m.Jitter)

	// A supply that changes every minute against a constant demand: every step
	// unstable, 3 adaptations and no demand change in 4 minutes: jitter 0.75.
	m = Elasticity(perSecond(3, 3, 3, 3), perSecond(3, 4, 3, 4))
	require.InDelta(t, 100, m.Instability, 1e-9)
	require.InDelta(t, 0.75, m.Jitter, 1e-9)

	// A supply that lags demand changes by a minute adapts as often as demand
	// changes (jitter 0) but is unstable at every step.
	m = Elasticity(perSecond(1, 2, 3, 4, 5), perSecond(1, 1, 2, 3, 4))
	require.InDelta(t, 25, m.Instability, 1e-9, "only the first step (demand up, supply still) is unstable; then both rise together")
	require.InDelta(t, -1.0/5, m.Jitter, 1e-9, "3 adaptations against 4 changes in 5 minutes")
}

func TestResample(t *testing.T) {
	require.Equal(t, []int{2, 4, 5}, Resample([]int{1, 2, 3, 4, 4, 4, 5}, 3), "means 2, 4 and 5 (a short last group)")
	require.Equal(t, []int{3}, Resample([]int{2, 3}, 60), "2.5 rounds half away from zero")
	require.Empty(t, Resample(nil, 60))
}

func TestSeedRequestedVsRunning(t *testing.T) {
	// N(k) running, N(k+1) requested: 1→2 (under by 1/2), 2→2, 2→1 (over by
	// 1/1), 1→4 (under by 3/4).
	m := SeedRequestedVsRunning([]DecisionSample{{At: 60, Running: 1, Requested: 2}, {At: 120, Running: 2, Requested: 2},
		{At: 180, Running: 2, Requested: 1}, {At: 240, Running: 1, Requested: 4}})
	require.Equal(t, RequestedVsRunning{ThetaU: 100 * (0.5 + 0.75) / 4, ThetaO: 100 * 1.0 / 4, TauU: 50, TauO: 25, Intervals: 4}, m)
	require.Equal(t, RequestedVsRunning{}, SeedRequestedVsRunning(nil))
}

// scripted requests a replica count that changes at given times.
type scripted struct {
	at    []float64
	count []int
}

func (scripted) Name() string    { return "scripted" }
func (scripted) Period() float64 { return 1 }
func (s scripted) Decide(o *policy.Observation) policy.Decision {
	n := len(o.Pods)
	for i, t := range s.at {
		if o.Now >= t {
			n = s.count[i]
		}
	}
	return policy.Decision{Replicas: n}
}

// TestRequestedVsRunningSeesScaleDowns: a scale-down removes Ready pods at
// once, so comparing requested with Ready pods after the decision (as the
// per-second curves do) never sees it; the seed's variant compares the
// request with what was running when it was made.
func TestRequestedVsRunningSeesScaleDowns(t *testing.T) {
	svc := mustDist(t, "exp:50ms")
	init := mustDist(t, "5s")
	cfg := Config{Rates: constRates(10, 120), Service: svc, Init: init, Concurrency: 1, CPU: 1, Target: 1, Percentile: 95,
		InitialReplicas: 4, Seed: 1}
	r := Run(cfg, scripted{at: []float64{60}, count: []int{2}})
	m := SeedRequestedVsRunning(r.Decisions)
	require.Len(t, r.Decisions, 120)
	require.InDelta(t, 100*(4.0-2)/2/120, m.ThetaO, 1e-9, "one interval over by (4 − 2)/2")
	require.InDelta(t, 100.0/120, m.TauO, 1e-9)
	require.Zero(t, m.ThetaU)
}

// TestSeed004CountsCreatedPods: seed 004's N(k) is the Deployment's
// status.replicas, the pods created whether Ready or not, so a scale-up
// whose pods are still starting is not under-provisioning on its metric at
// the next decision (comparing with Ready pods, as before, counted 30 s of
// it after every scale-up).
func TestSeed004CountsCreatedPods(t *testing.T) {
	cfg := Config{Rates: constRates(10, 120), Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 1,
		Target: 1, Percentile: 95, InitialReplicas: 1, Seed: 1}
	r := Run(cfg, scripted{at: []float64{10}, count: []int{4}})
	var at11 DecisionSample
	for _, d := range r.Decisions {
		if d.At == 11 {
			at11 = d
		}
	}
	require.Equal(t, DecisionSample{At: 11, Running: 4, Ready: 1, Requested: 4}, at11)
	m := SeedRequestedVsRunning(r.Decisions)
	require.InDelta(t, 100*(4.0-1)/4/120, m.ThetaU, 1e-9, "only the decision that asked for more is under")
	require.InDelta(t, 100.0/120, m.TauU, 1e-9)
}

// TestFrontQueueDrainsInOrder: requests that wait in front while no pod is
// Ready all go to the pods once one is Ready, ahead of later arrivals.
func TestFrontQueueDrainsInOrder(t *testing.T) {
	svc := mustDist(t, "const:100ms")
	init := mustDist(t, "10s")
	// 2 req/s for 60 s, then nothing for a minute to finish; the only pod
	// goes at 20 s and a new one is asked for at 21 s (Ready at 31 s).
	rates := append(constRates(2, 60), constRates(0, 60)...)
	cfg := Config{Rates: rates, Service: svc, Init: init, Concurrency: 1, CPU: 1, Target: 1, Percentile: 95, InitialReplicas: 1, Seed: 2}
	r := Run(cfg, scripted{at: []float64{20, 21}, count: []int{0, 1}})
	arrived := 0
	for _, a := range r.Arrivals {
		arrived += a
	}
	require.Equal(t, arrived, r.Requests, "every request that waited in front is served")
	// The requests of the outage wait about 11 s at most (they arrive from
	// 20 s, the pod is Ready at 31 s, and a 100 ms request per 0.5 s leaves
	// the pod mostly idle); none waits for the end of the run.
	require.Less(t, r.Latency.Quantile(100), 13.0)

	// White box: a pod that becomes Ready takes the waiting requests in
	// arrival order, and a later arrival queues behind them.
	s := &sim{cfg: cfg, rngArr: newRand(1, 1), rngSvc: newRand(1, 2), rngRoute: newRand(1, 3), initSeq: NewInitTimes(init, 1), curCPU: 1}
	s.res = newResult("white box", cfg)
	id := s.addPod()
	for i := range 5 {
		s.now = float64(i)
		s.arrive()
	}
	require.Equal(t, 5, s.front.size)
	s.now = 5
	s.makeReady(id)
	require.Zero(t, s.front.size)
	s.now = 6
	s.arrive()
	p := &s.pods[id]
	require.Equal(t, 1, p.inService)
	var order []float64
	for p.queue.size > 0 {
		order = append(order, p.queue.pop().arr)
	}
	require.Equal(t, []float64{1, 2, 3, 4, 6}, order, "the first request is in service, the rest queue in arrival order")
}

// TestInitTimesAreTheOraclesToKnow: pod start number j takes InitTimes.At(j)
// seconds, whatever the policy, so the oracle's copy of the sequence is the
// run's.
func TestInitTimesAreTheOraclesToKnow(t *testing.T) {
	svc := mustDist(t, "exp:50ms")
	init := mustDist(t, "exp:20s")
	cfg := Config{Rates: constRates(5, 400), Service: svc, Init: init, Concurrency: 1, CPU: 1, Target: 1, Percentile: 95,
		InitialReplicas: 1, Seed: 9}
	rec := &recorder{scripted: scripted{at: []float64{10, 100, 200}, count: []int{4, 1, 6}}}
	Run(cfg, rec)
	require.Equal(t, 3+5, rec.last.PodStarts, "3 pods started at 10 s, 5 at 200 s")
	want := NewInitTimes(init, 9)
	var expect []float64
	for j := range rec.last.PodStarts {
		expect = append(expect, want.At(j))
	}
	// The initial replica's init time comes first, known from the start.
	require.Equal(t, StartingInitTimes(cfg), rec.last.InitTimes[:1])
	got := append([]float64(nil), rec.last.InitTimes[1:]...)
	require.Len(t, got, 8)
	sort.Float64s(got)
	sort.Float64s(expect)
	require.InDeltaSlice(t, expect, got, 1e-9, "creation→Ready times are the sequence's")
}

type recorder struct {
	scripted
	last policy.Observation
}

func (r *recorder) Decide(o *policy.Observation) policy.Decision {
	r.last = *o
	r.last.InitTimes = append([]float64(nil), o.InitTimes...)
	return r.scripted.Decide(o)
}

// TestStartingPodsInitTimesKnownFromTheStart: the initial replicas' init
// times are in the first observation, before any new pod is Ready, so
// predictive-hpa (seed 000 averages over every pod ever Ready) is not blind
// until its first new pod; and they do not shift the run's own sequence.
func TestStartingPodsInitTimesKnownFromTheStart(t *testing.T) {
	cfg := Config{Rates: constRates(1, 30), Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "exp:135s"), Concurrency: 1, CPU: 1,
		Target: 1, Percentile: 95, InitialReplicas: 3, Seed: 4}
	rec := &recorder{scripted: scripted{at: []float64{1}, count: []int{3}}}
	Run(cfg, rec)
	require.Len(t, rec.last.InitTimes, 3)
	require.Equal(t, StartingInitTimes(cfg), rec.last.InitTimes)
	for _, v := range rec.last.InitTimes {
		require.Positive(t, v)
	}
	require.NotEqual(t, NewInitTimes(cfg.Init, cfg.Seed).At(0), rec.last.InitTimes[0], "their own stream")
}

// mustDist parses a distribution the test spells out.
func mustDist(t testing.TB, spec string) Dist {
	t.Helper()
	d, err := ParseDist(spec)
	require.NoError(t, err)
	return d
}

func TestParseDist(t *testing.T) {
	for _, tc := range []struct {
		in        string
		mean, scv float64
		wantErr   string
	}{
		{in: "50ms", mean: 0.05},
		{in: "exp:50ms", mean: 0.05, scv: 1},
		{in: "lognormal:50ms,cv=1.5", mean: 0.05, scv: 2.25},
		{in: "bimodal:10ms,110ms,p=0.5", mean: 0.06, scv: (0.5*0.0001+0.5*0.0121)/0.0036 - 1},
		{in: "lognormal:50ms", wantErr: "missing cv"},
		{in: "lognormal:50ms,cv=0", wantErr: "cv must be positive"},
		{in: "exp:-1s", wantErr: "positive duration"},
		{in: "weird:1s", wantErr: "unknown kind"},
		{in: "exp:1s,cv=2", wantErr: "fields"},
		{in: "bimodal:1s,2s,p=2", wantErr: "p must be"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDist(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.mean, d.Mean, 1e-12)
			require.InDelta(t, tc.scv, d.SCV(), 1e-9)
			back, err := ParseDist(d.String())
			require.NoError(t, err)
			require.InDelta(t, d.Mean, back.Mean, 1e-12)
		})
	}
}

func TestDistSampleMean(t *testing.T) {
	d := mustDist(t, "lognormal:50ms,cv=1.5")
	r := newRand(5, 1)
	const n = 400000
	s := 0.0
	for i := 0; i < n; i++ {
		s += d.Sample(r)
	}
	// Standard error of the mean: cv·mean/√n; allow 5 of them.
	require.InDelta(t, 0.05, s/n, 5*1.5*0.05/math.Sqrt(n))
	require.InDelta(t, d.Quantile(50), 0.05/math.Sqrt(1+2.25), 1e-9, "the lognormal median is mean/√(1+cv²)")
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"50ms", "exp:1s", "lognormal:50ms,cv=1.5", "bimodal:1ms,2ms,p=0.1", "x:", ":", "bimodal:,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			return
		}
		require.Positive(t, d.Mean)
		require.False(t, math.IsNaN(d.SCV()))
	})
}

// TestLeastRequestSitsBetween checks the least-request data plane (two random
// choices, the fewer requests wins) against the two it lies between: three
// k = 1 pods at ρ = 0.8 wait less than three M/M/1 (random routing) and more
// than one M/M/3 (pooled), each beyond 4 standard errors.
func TestLeastRequestSitsBetween(t *testing.T) {
	exp1s := mustDist(t, "exp:1s")
	cfg := Config{Rates: constRates(2.4, 20000), Service: exp1s, Init: exp1s, Concurrency: 1, CPU: 1, Target: 10,
		Percentile: 95, InitialReplicas: 3, Routing: RouteLeastRequest}
	m, se := meanAndSE(t, cfg, func() policy.Policy { return policy.Static{N: 3} }, 10)
	random, pooled := 1/(1-0.8), 1+erlangCWait(3, 2.4, 1)
	t.Logf("least-request mean latency %.3f ± %.3f; pooled %.3f, random %.3f", m, se, pooled, random)
	require.Less(t, m+4*se, random)
	require.Greater(t, m-4*se, pooled)
}

// TestRoutingSpec: qas is told the spec.routing a user would write for each
// data plane.
func TestRoutingSpec(t *testing.T) {
	for _, tc := range []struct {
		r    Routing
		want decide.Routing
	}{
		{RouteRandom, decide.RoutingRandom},
		{RouteLeastRequest, decide.RoutingLeastRequest},
		{RoutePooled, decide.RoutingPooled},
		{RouteFront, decide.RoutingPooled},
		{RouteOverflow, decide.RoutingPooled},
		{RoutePeer, decide.RoutingRandom},
	} {
		require.Equal(t, tc.want, tc.r.Spec(), tc.r.String())
	}
	require.Len(t, Routings, 6, "a new data plane needs its spec.routing here")
}

// TestCompareTellsQASItsRouting: in a comparison, qas on a pooled data plane
// runs exactly as a qas told spec.routing pooled (the same pod-seconds and
// late requests, runs being deterministic per seed), and not as one left at
// random routing.
func TestCompareTellsQASItsRouting(t *testing.T) {
	exp := mustDist(t, "exp:50ms")
	rates := make([]float64, 900)
	for i := range rates {
		rates[i] = 40
		if i >= 300 && i < 600 {
			rates[i] = 120
		}
	}
	cfg := Config{Rates: rates, Service: exp, Init: mustDist(t, "30s"), Concurrency: 1, CPU: 0.5, Target: 0.2,
		Percentile: 95, Seed: 1, Routing: RouteOverflow, InitialReplicas: 4}
	p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 200}
	cmp, err := Compare(cfg, []string{"qas"}, p, nil)
	require.NoError(t, err)
	run := func(r decide.Routing) *Result {
		pp := p
		pp.Routing = r
		return Run(cfg, policy.NewQAS("qas", pp, true))
	}
	pooled, random := run(decide.RoutingPooled), run(decide.RoutingRandom)
	require.Equal(t, pooled.PodSeconds, cmp.Results[0].PodSeconds)
	require.Equal(t, pooled.OverTarget, cmp.Results[0].OverTarget)
	require.Less(t, pooled.PodSeconds, random.PodSeconds, "sized for the pooled queue, qas needs fewer pods")
}

func TestParseRouting(t *testing.T) {
	for _, r := range Routings {
		got, err := ParseRouting(r.String())
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := ParseRouting("roundRobin")
	require.ErrorContains(t, err, `"roundRobin"`)
}

// probe records what a policy is told every 5 minutes (its windows tile the
// run), holding N pods.
type probe struct {
	policy.Static
	p95, mean, inflight []float64
	conserved           []bool
}

func (*probe) Period() float64 { return policy.LatencyHistory }

func (p *probe) Decide(o *policy.Observation) policy.Decision {
	if q, ok := o.Latency.Quantile(policy.LatencyHistory, 95); ok {
		p.p95 = append(p.p95, q)
	}
	if m, ok := o.MeanLatency(policy.LatencyHistory); ok {
		p.mean = append(p.mean, m)
	}
	in := 0
	for _, s := range o.Seconds {
		in += s.Arrivals - s.Completions
	}
	p.conserved = append(p.conserved, in == o.InFlightNow())
	p.inflight = append(p.inflight, float64(o.InFlightNow()))
	return p.Static.Decide(o)
}

// TestObservationMeasuresQueuesAndLatency checks what a policy may measure
// beyond rates: the requests each pod holds (in service and queued) and those
// in front add up to arrivals minus completions at every decision; the
// measured p95 and mean response times of one M/M/1 pod at ρ = 0.5 match the
// closed forms (sojourn time exponential with rate μ − λ: p95 = ln 20 / 0.5 s,
// mean 2 s); an overloaded pod shows its queue.
func TestObservationMeasuresQueuesAndLatency(t *testing.T) {
	exp1s := mustDist(t, "exp:1s")
	cfg := Config{Rates: constRates(0.5, 30000), Service: exp1s, Init: exp1s, Concurrency: 1, CPU: 1, Target: 10,
		Percentile: 95, InitialReplicas: 1, Seed: 3}
	p := &probe{Static: policy.Static{N: 1}}
	r := Run(cfg, p)
	require.NotContains(t, p.conserved, false, "in service + queued + in front = arrivals − completions")
	avg := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	require.Len(t, p.p95, 100)
	// The windows tile the run: their means average to the run's mean.
	require.InDelta(t, r.MeanLatency, avg(p.mean), 0.01*r.MeanLatency, "measured mean")
	require.InDelta(t, 2, avg(p.mean), 0.05*2, "measured mean against M/M/1")
	require.InDelta(t, math.Log(20)/0.5, avg(p.p95), 0.05*math.Log(20)/0.5, "measured p95 against M/M/1")

	// Twice the pod's rate: the queue grows by about one request a second.
	cfg.Rates = constRates(2, 1200)
	over := &probe{Static: policy.Static{N: 1}}
	Run(cfg, over)
	require.NotContains(t, over.conserved, false)
	require.Greater(t, over.inflight[0], 200.0)
	require.Greater(t, over.inflight[1], over.inflight[0]+200)
}

// queueRecorder is a static policy that keeps what it observed.
type queueRecorder struct {
	policy.Static
	inPod []int
}

func (r *queueRecorder) Period() float64 { return 1 }

func (r *queueRecorder) Decide(o *policy.Observation) policy.Decision {
	for _, p := range o.Pods {
		r.inPod = append(r.inPod, p.InService+p.Queued)
	}
	return r.Static.Decide(o)
}

// TestObservationCarriesQueueAndLatency: the per-pod gauges a policy sees
// average to the M/M/1 number in system (ρ/(1−ρ)), and every completion is
// counted once in its second's latency histogram, in the bucket of its latency.
func TestObservationCarriesQueueAndLatency(t *testing.T) {
	exp1s := mustDist(t, "exp:1s")
	cfg := Config{Rates: constRates(0.6, 40000), Service: exp1s, Init: exp1s, Concurrency: 1, CPU: 1,
		Target: 10, Percentile: 95, InitialReplicas: 1, Seed: 3}
	rec := &queueRecorder{Static: policy.Static{N: 1}}
	r := Run(cfg, rec)
	sum := 0
	for _, n := range rec.inPod {
		sum += n
	}
	mean := float64(sum) / float64(len(rec.inPod))
	require.InDelta(t, 0.6/0.4, mean, 0.15, "time-average requests in the pod")
	var late, total uint64
	for _, s := range r.seconds {
		var n uint32
		for _, c := range s.Latency {
			n += c
		}
		require.Equal(t, uint32(s.Completions), n, "every completion is in its second's histogram")
		total += uint64(n)
		for i := policy.LatencyBucket(10) + 1; i < len(s.Latency); i++ {
			late += uint64(s.Latency[i])
		}
	}
	// Buckets above the one holding 10 s count exactly the requests over 10 s
	// (10 s is a bucket bound).
	require.Equal(t, uint64(r.OverTarget), late)
	require.Positive(t, total)
}

// TestMinuteOverCountsWhereTheLateRequestsAre: the late requests of each
// minute add up to the run's, and a minute that overloads the pods holds them.
// Two pods of 50 ms serve 5/s per pod well within 200 ms for two minutes; in
// the third the rate is 60/s, beyond their 40/s, and the queue that builds
// there is late; the fourth drains it at 5/s.
func TestMinuteOverCountsWhereTheLateRequestsAre(t *testing.T) {
	var rates []float64
	for _, r := range []float64{10, 10, 60, 10} {
		rates = append(rates, constRates(r, 60)...)
	}
	cfg := Config{Rates: rates, Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "exp:20s"), Concurrency: 1, CPU: 0.5,
		Target: 0.2, Percentile: 95, InitialReplicas: 2, Seed: 3}
	r := Run(cfg, policy.Static{N: 2})
	require.Len(t, r.MinuteOver, 4)
	sum := 0
	for _, n := range r.MinuteOver {
		sum += n
	}
	require.Equal(t, r.OverTarget, sum, "every late request is counted in the minute it completed")
	require.Greater(t, r.MinuteOver[2], 10*max(r.MinuteOver[0], r.MinuteOver[1]), "the overloaded minute holds the late requests: %v", r.MinuteOver)
	require.Equal(t, r.MinuteOver, Summarize(r, nil).LatePerMinute, "the summary (simulate --json, results.json) carries them")
}
