package sim

import (
	"math"
	"runtime"
	"sync"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// OracleSearch records how an oracle's schedule was chosen: the cheapest
// that meets the SLO among the schedules the search simulated.
//
// Each candidate sizes second s for h × the mean true arrival rate over the
// w seconds centred on it, [s − ⌊w/2⌋, s − ⌊w/2⌋ + w) cut to the run: its
// need is Capacity.Pods(h · λ̄_w(s)) (with the pooled model when requests go
// through the activator, below), and policy.Oracle turns the need into
// starts and removals with the run's realised init times. A window longer
// than a second lets the queues absorb second-scale noise instead of buying
// pods for every noisy second; h below 1 spends the SLO's budget of late
// requests where pods are dearest.
//
// Requests reach the pods either at random through a Service, the data plane
// of qas and the HPA, or through a capacity-aware proxy in front (as
// Knative's activator: a request goes only to a pod with a free place),
// which pools the pods' queues and can need fewer pods. The oracle policy
// (policy.OracleName) searches Service routing only, so that it differs
// from qas and the HPA in its scaling alone; oracle-pooled
// (policy.PooledOracleName) searches both, for comparisons with the KPA.
//
// For each routing and each window in OracleWindows the search bisects h
// (geometrically, between 1/8 and 8, OracleSteps times) for the smallest h
// whose run meets the SLO: at most Budget of the requests over the target
// (1 − p, or the relaxed budget when the target is infeasible:
// policy.Capacity.Budget). The oracle is the candidate that met it with the
// fewest CPU-core-seconds requested; if none did, the one with the fewest
// requests over the target.
type OracleSearch struct {
	// Policy is the oracle's name: oracle or oracle-pooled.
	Policy string `json:"policy"`
	// Routing is how the chosen schedule's requests reach the pods:
	// "service" (at random) or "activator".
	Routing string `json:"routing"`
	// Window is w, seconds.
	Window int `json:"window_seconds"`
	// Headroom is h.
	Headroom float64 `json:"headroom"`
	// BudgetPct is the share of requests allowed over the target, in %.
	BudgetPct float64 `json:"budget_pct"`
	// Met tells whether the chosen schedule meets the SLO.
	Met bool `json:"met"`
	// Runs counts the simulations of the candidates this oracle chose from.
	Runs int `json:"runs"`
	// Candidates are the best schedule of each routing and window this
	// oracle chose from.
	Candidates []OracleCandidate `json:"candidates"`
}

// OracleCandidate is the best schedule the search found for one routing and
// window: the cheapest that met the SLO, or the highest headroom if none did.
type OracleCandidate struct {
	Routing               string  `json:"routing"`
	Window                int     `json:"window_seconds"`
	Headroom              float64 `json:"headroom"`
	Met                   bool    `json:"met"`
	RequestsOverTargetPct float64 `json:"requests_over_target_pct"`
	PodSeconds            float64 `json:"pod_seconds"`
	CPUCoreSeconds        float64 `json:"cpu_core_seconds"`
}

func routingName(activator bool) string {
	if activator {
		return "activator"
	}
	return "service"
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

type oracleRun struct {
	w         int
	activator bool
	h         float64
	r         *Result
	met       bool
}

// oracleCandidate is one routing and window of the search.
type oracleCandidate struct {
	w         int
	activator bool
}

// oracleRuns are a search's best runs, one per routing and window.
type oracleRuns struct {
	best   []oracleRun
	runs   []int
	budget float64
}

// searchOracles simulates the candidates of every window through the Service
// and, when activator is set, through the activator too: enough for both
// oracles, which then pick among them (oracleRuns.pick).
func searchOracles(cfg Config, p policy.Params, capa *policy.Capacity, activator bool, progress func(done, total int)) *oracleRuns {
	budget := capa.Budget()
	prefix := make([]float64, len(cfg.Rates)+1)
	for i, r := range cfg.Rates {
		prefix[i+1] = prefix[i] + r
	}
	met := func(r *Result) bool { return float64(r.OverTarget) <= budget*float64(r.Requests) }
	run := func(c *policy.Capacity, w int, activator bool, h float64) *Result {
		need := make([]int, len(cfg.Rates))
		sizing := make([]float64, len(cfg.Rates))
		for s := range cfg.Rates {
			lo, hi := max(0, s-w/2), min(len(cfg.Rates), s-w/2+w)
			sizing[s] = h * (prefix[hi] - prefix[lo]) / float64(hi-lo)
			need[s] = c.Pods(sizing[s])
		}
		fut := policy.Future{Rates: cfg.Rates, Capacity: c, InitTime: NewInitTimes(cfg.Init, cfg.Seed).At, Need: need, Sizing: sizing,
			Activator: activator}
		// Named by pick, which may give one run to both oracles.
		return Run(cfg, policy.NewPooledOracle(p, fut))
	}
	routings := []bool{false}
	if activator {
		routings = append(routings, true)
	}
	var cands []oracleCandidate
	for _, activator := range routings {
		for _, w := range OracleWindows {
			cands = append(cands, oracleCandidate{w: w, activator: activator})
		}
	}
	total := len(cands) * (OracleSteps + 1)
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
	if activator {
		pooled = capa.Clone()
		pooled.Pooled = true
		peak := 0.0
		for _, r := range cfg.Rates {
			peak = math.Max(peak, r)
		}
		pooled.Pods(oracleHeadroomHi * peak)
	}
	best := make([]oracleRun, len(cands))
	runs := make([]int, len(cands))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, cand := range cands {
		c := service.Clone()
		if cand.activator {
			c = pooled.Clone()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			lo, hi := oracleHeadroomLo, oracleHeadroomHi
			r := run(c, cand.w, cand.activator, hi)
			runs[i]++
			tick()
			best[i] = oracleRun{w: cand.w, activator: cand.activator, h: hi, r: r, met: met(r)}
			if !best[i].met {
				// Even 8 × the rate misses: more pods do not help.
				for range OracleSteps {
					tick()
				}
				return
			}
			for range OracleSteps {
				mid := math.Sqrt(lo * hi)
				r := run(c, cand.w, cand.activator, mid)
				runs[i]++
				tick()
				if met(r) {
					hi, best[i] = mid, oracleRun{w: cand.w, activator: cand.activator, h: mid, r: r, met: true}
				} else {
					lo = mid
				}
			}
		}()
	}
	wg.Wait()
	return &oracleRuns{best: best, runs: runs, budget: budget}
}

// pick returns the run of the oracle named name and how it was found: the
// cheapest candidate that met the SLO among those it may use (Service routing
// only unless pooled), or the one that missed least if none did.
func (o *oracleRuns) pick(name string, pooled bool) (*Result, OracleSearch) {
	var pick *oracleRun
	n := 0
	var all []OracleCandidate
	for i := range o.best {
		b := &o.best[i]
		if b.activator && !pooled {
			continue
		}
		n += o.runs[i]
		all = append(all, OracleCandidate{Routing: routingName(b.activator), Window: b.w, Headroom: b.h, Met: b.met,
			RequestsOverTargetPct: b.r.OverTargetPct(), PodSeconds: b.r.PodSeconds, CPUCoreSeconds: b.r.CPUCoreSeconds()})
		switch {
		case pick == nil,
			b.met && !pick.met,
			b.met && pick.met && b.r.CPURequested < pick.r.CPURequested,
			!b.met && !pick.met && b.r.OverTarget < pick.r.OverTarget:
			pick = b
		}
	}
	r := *pick.r
	r.Policy = name
	return &r, OracleSearch{Policy: name, Routing: routingName(pick.activator), Window: pick.w, Candidates: all, Headroom: pick.h,
		BudgetPct: 100 * o.budget, Met: pick.met, Runs: n}
}
