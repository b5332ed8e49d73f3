package sim

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// OracleSearch records how a yardstick's schedule was chosen: the cheapest
// that meets the SLO among the schedules the search simulated.
//
// The lower bounds are the clairvoyant search with every pod Ready the moment
// it is asked for (no init cost): how close the oracle is to the physical
// limit of the data plane.
//
// Each candidate sizes second s for h × a mean of the true arrival rate over
// w seconds: centred on s for the clairvoyant oracles ([s − ⌊w/2⌋,
// s − ⌊w/2⌋ + w) cut to the run), ending at s for the reactive ones ([s − w + 1,
// s]: they know the present, not the future). Its need is
// Capacity.Pods(h · λ̄_w(s)) (with the pooled model when requests go through a
// pooled queue), and policy.Oracle (clairvoyant: starts each pod just in
// time with the run's realised init times) or policy.ReactiveOracle (sets the
// present need at once; new pods take their init time) follows it. A window
// longer than a second lets the queues absorb second-scale noise instead of
// buying pods for every noisy second; h below 1 spends the SLO's budget of
// late requests where pods are dearest.
//
// Requests reach the pods through the run's data plane (Config.Routing:
// random as a Service, leastRequest, pooled, or a pooled plane as built:
// peer handoff, a front, overflow to a front) or, for the -pooled
// yardsticks, also through a pooled queue in front (as Knative's activator),
// which can need fewer pods. oracle and oracle-reactive search the run's
// data plane only, so that they differ from the policies routed the same way
// in their scaling alone; the -pooled ones search both, for the KPA. On the
// front and overflow planes, which queue what a full pod cannot take in a
// shared front, the run's own plane is searched with both sizing rules, the
// per-pod one and the pooled one (OracleCandidate.Sizing): a uniform headroom
// on the per-pod rule cannot follow the pooled queue's economy of scale
// (fewer pods per request as the rate grows), so alone it made those planes'
// yardsticks dearer than the planes are (the reactive oracle of the overflow
// plane 1.32 × oracle-pooled with the per-pod rule only, docs/pooling.md round
// twenty-one).
//
// For each data plane and each window in OracleWindows the search bisects h
// (geometrically, between 1/8 and 8, OracleSteps times) for the smallest h
// whose run meets the SLO: at most Budget of the requests over the target
// (1 − p, or the relaxed budget when the target is infeasible:
// policy.Capacity.Budget). The yardstick is the candidate that met it with
// the fewest CPU-core-seconds requested; if none did, the one with the
// fewest requests over the target.
type OracleSearch struct {
	// Policy is the yardstick's name (policy.Yardsticks).
	Policy string `json:"policy"`
	// Reactive is true for the reactive oracles.
	Reactive bool `json:"reactive"`
	// ZeroInit is true for the lower bounds: pods Ready at once.
	ZeroInit bool `json:"zero_init"`
	// Routing is the data plane of the chosen schedule: random,
	// leastRequest, pooled, peer, front or overflow.
	Routing string `json:"routing"`
	// Sizing is "pooled" when the chosen schedule on a front or overflow
	// plane was sized by the pooled model ("" for the per-pod one, and on
	// the other planes, whose rule their routing fixes).
	Sizing string `json:"sizing,omitempty"`
	// Window is w, seconds.
	Window int `json:"window_seconds"`
	// Headroom is h.
	Headroom float64 `json:"headroom"`
	// BudgetPct is the share of requests allowed over the target, in %.
	BudgetPct float64 `json:"budget_pct"`
	// Met tells whether the chosen schedule meets the SLO.
	Met bool `json:"met"`
	// Runs counts the simulations of the candidates this yardstick chose from.
	Runs int `json:"runs"`
	// Candidates are the best schedule of each data plane and window this
	// yardstick chose from.
	Candidates []OracleCandidate `json:"candidates"`
}

// OracleCandidate is the best schedule the search found for one data plane
// and window: the cheapest that met the SLO, or the highest headroom if none
// did.
type OracleCandidate struct {
	Routing string `json:"routing"`
	// Sizing is as OracleSearch.Sizing.
	Sizing                string  `json:"sizing,omitempty"`
	Window                int     `json:"window_seconds"`
	Headroom              float64 `json:"headroom"`
	Met                   bool    `json:"met"`
	RequestsOverTargetPct float64 `json:"requests_over_target_pct"`
	PodSeconds            float64 `json:"pod_seconds"`
	CPUCoreSeconds        float64 `json:"cpu_core_seconds"`
}

// OracleWindows are the smoothing windows the oracle's search tries, seconds.
var OracleWindows = []int{1, 10, 60, 300}

const (
	oracleHeadroomLo = 1.0 / 8
	oracleHeadroomHi = 8.0
	// OracleSteps is the bisection steps per window: the headroom found is
	// within 64^(1/2^OracleSteps) − 1 ≈ 1.6 % of the smallest that meets.
	OracleSteps = 8
)

// oracleGroup is one data plane of one kind of yardstick: clairvoyant,
// reactive, or (zeroInit) clairvoyant with pods Ready the moment they are
// asked for, the lower bound; pooledSizing sizes a plane other than pooled
// by the pooled model.
type oracleGroup struct {
	routing      Routing
	reactive     bool
	zeroInit     bool
	pooledSizing bool
}

// sizedPooled tells whether the group's need comes from the pooled model.
func (g oracleGroup) sizedPooled() bool { return g.routing == RoutePooled || g.pooledSizing }

// sizing is the group's OracleSearch.Sizing.
func (g oracleGroup) sizing() string {
	if g.pooledSizing {
		return "pooled"
	}
	return ""
}

type oracleRun struct {
	w   int
	g   oracleGroup
	h   float64
	r   *Result
	met bool
}

// oracleRuns are a search's best runs, one per group and window.
type oracleRuns struct {
	best   []oracleRun
	runs   []int
	budget float64
}

// yardstickGroups are the groups yardstick name chooses from when the run's
// data plane is base.
func yardstickGroups(name string, base Routing) []oracleGroup {
	reactive := name == policy.ReactiveOracleName || name == policy.PooledReactiveOracleName
	zero := name == policy.LowerBoundName || name == policy.PooledLowerBoundName
	gs := []oracleGroup{{routing: base, reactive: reactive, zeroInit: zero}}
	if base != RoutePooled && base.Spec() == decide.RoutingPooled {
		gs = append(gs, oracleGroup{routing: base, reactive: reactive, zeroInit: zero, pooledSizing: true})
	}
	pooled := name == policy.PooledOracleName || name == policy.PooledReactiveOracleName || name == policy.PooledLowerBoundName
	if pooled && base != RoutePooled {
		gs = append(gs, oracleGroup{routing: RoutePooled, reactive: reactive, zeroInit: zero})
	}
	return gs
}

// searchOracles simulates the candidates of every window of every group:
// enough for every yardstick asked for, which then pick among them
// (oracleRuns.pick).
func searchOracles(cfg Config, p policy.Params, capa *policy.Capacity, groups []oracleGroup, progress func(done, total int)) *oracleRuns {
	budget := capa.Budget()
	prefix := make([]float64, len(cfg.Rates)+1)
	for i, r := range cfg.Rates {
		prefix[i+1] = prefix[i] + r
	}
	met := func(r *Result) bool {
		if capa.Percentile == 0 && !capa.Feasible() {
			return r.MeanLatency <= capa.MeanService+capa.Target
		}
		return r.MeetsSLO(budget)
	}
	run := func(c *policy.Capacity, w int, g oracleGroup, h float64) *Result {
		need := make([]int, len(cfg.Rates))
		sizing := make([]float64, len(cfg.Rates))
		for s := range cfg.Rates {
			lo, hi := max(0, s-w/2), min(len(cfg.Rates), s-w/2+w)
			if g.reactive {
				lo, hi = max(0, s-w+1), s+1
			}
			sizing[s] = h * (prefix[hi] - prefix[lo]) / float64(hi-lo)
			need[s] = c.Pods(sizing[s])
		}
		rc := cfg
		rc.Routing = g.routing
		// Named by pick, which may give one run to several yardsticks.
		if g.reactive {
			return Run(rc, policy.NewReactiveOracle(policy.ReactiveOracleName, p, need))
		}
		fut := policy.Future{Rates: cfg.Rates, Capacity: c, InitTime: NewInitTimes(cfg.Init, cfg.Seed).At, Need: need, Sizing: sizing}
		if g.zeroInit {
			rc.Init = Dist{Kind: Constant}
			fut.InitTime = func(int) float64 { return 0 }
		}
		return Run(rc, policy.NewPooledOracle(p, fut))
	}
	type cand struct {
		w int
		g oracleGroup
	}
	windows, steps := OracleWindows, OracleSteps
	if len(cfg.OracleWindows) > 0 {
		windows = cfg.OracleWindows
	}
	if cfg.OracleSteps > 0 {
		steps = cfg.OracleSteps
	}
	var cands []cand
	for _, g := range groups {
		for _, w := range windows {
			cands = append(cands, cand{w: w, g: g})
		}
	}
	total := len(cands) * (steps + 1)
	var mu sync.Mutex
	done := 0
	tick := func() {
		mu.Lock()
		defer mu.Unlock()
		done++
		if progress != nil {
			progress(done, total)
		}
	}
	// Each candidate sizes with its own copy of the capacity, made here before
	// the runs start (a Capacity is not safe for concurrent use). The pooled
	// model's table of limits per pod count is filled once, up to the highest
	// rate any run sizes for (hi × the peak rate, as each candidate's first
	// run does), and copied, instead of being found again by every window.
	service := capa.Clone()
	var pooled *policy.Capacity
	for _, g := range groups {
		if g.sizedPooled() && pooled == nil {
			pooled = capa.PooledClone()
			peak := 0.0
			for _, r := range cfg.Rates {
				peak = math.Max(peak, r)
			}
			pooled.Pods(oracleHeadroomHi * peak)
		}
	}
	best := make([]oracleRun, len(cands))
	runs := make([]int, len(cands))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, cd := range cands {
		c := service.Clone()
		if cd.g.sizedPooled() {
			c = pooled.Clone()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			lo, hi := oracleHeadroomLo, oracleHeadroomHi
			r := run(c, cd.w, cd.g, hi)
			runs[i]++
			tick()
			best[i] = oracleRun{w: cd.w, g: cd.g, h: hi, r: r, met: met(r)}
			if !best[i].met {
				// Even 8 × the rate misses: more pods do not help.
				for range steps {
					tick()
				}
				return
			}
			for range steps {
				mid := math.Sqrt(lo * hi)
				r := run(c, cd.w, cd.g, mid)
				runs[i]++
				tick()
				if met(r) {
					hi, best[i] = mid, oracleRun{w: cd.w, g: cd.g, h: mid, r: r, met: true}
				} else {
					lo = mid
				}
			}
		}()
	}
	wg.Wait()
	return &oracleRuns{best: best, runs: runs, budget: budget}
}

// pick returns the run of the yardstick named name and how it was found: the
// cheapest candidate that met the SLO among the groups it may use, or the
// one that missed least if none did.
func (o *oracleRuns) pick(name string, groups []oracleGroup) (*Result, OracleSearch) {
	var pick *oracleRun
	n := 0
	var all []OracleCandidate
	for i := range o.best {
		b := &o.best[i]
		if !slices.Contains(groups, b.g) {
			continue
		}
		n += o.runs[i]
		all = append(all, OracleCandidate{Routing: b.g.routing.String(), Sizing: b.g.sizing(), Window: b.w, Headroom: b.h, Met: b.met,
			RequestsOverTargetPct: b.r.OverTargetPct(), PodSeconds: b.r.PodSeconds, CPUCoreSeconds: b.r.CPUCoreSeconds()})
		switch {
		case pick == nil,
			b.met && !pick.met,
			b.met && pick.met && b.r.CPURequested < pick.r.CPURequested,
			!b.met && !pick.met && missBy(b.r) < missBy(pick.r):
			pick = b
		}
	}
	r := *pick.r
	r.Policy = name
	return &r, OracleSearch{Policy: name, Reactive: pick.g.reactive, ZeroInit: pick.g.zeroInit, Routing: pick.g.routing.String(), Sizing: pick.g.sizing(),
		Window: pick.w, Candidates: all,
		Headroom: pick.h, BudgetPct: 100 * o.budget, Met: pick.met, Runs: n}
}

// missBy is how far a run misses its objective: its mean latency for a
// mean target, else its requests over the target.
func missBy(r *Result) float64 {
	if r.pct == 0 {
		return r.MeanLatency
	}
	return float64(r.OverTarget)
}
