package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// Summary is one policy's figures, the JSON contract of `simulate --json`.
type Summary struct {
	Name                  string  `json:"name"`
	Requests              int     `json:"requests"`
	RequestsOverTargetPct float64 `json:"requests_over_target_pct"`
	MinutesOverTargetPct  float64 `json:"minutes_over_target_pct"`
	// LatePerMinute counts the requests over the target that completed in
	// each simulated minute (Result.MinuteOver): where the late share comes
	// from, a burst's first minutes or the steady state.
	LatePerMinute      []int    `json:"late_per_minute"`
	PodSeconds         float64  `json:"pod_seconds"`
	CPUCoreSeconds     float64  `json:"cpu_core_seconds"`
	CPUUsedCoreSeconds float64  `json:"cpu_used_core_seconds"`
	Actions            int      `json:"actions"`
	Resizes            int      `json:"resizes"`
	Migrations         int      `json:"migrations"`
	Latency            Quantile `json:"latency_seconds"`
	MeanLatency        float64  `json:"mean_latency_seconds"`
	// Routing is the data plane the policy's requests went through: random,
	// leastRequest or pooled (for a yardstick, the one its search chose:
	// OracleSearch.Routing; the KPA is pooled while its activator is in the
	// path).
	Routing string `json:"routing,omitempty"`
	// Handoff counts the extra hops (peer handoffs, passes through the
	// front) when there were any.
	Handoff *HandoffStats `json:"handoff,omitempty"`

	// Spec compares Ready pods (supply) with the demand curve.
	Spec Spec `json:"spec"`
	// SpecRequested is seed 004's variant: the replicas requested at each
	// decision against the ones running.
	SpecRequested RequestedVsRunning `json:"spec_requested_vs_running"`
}

// Quantile holds latency percentiles in seconds.
type Quantile struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Comparison is a run of several policies on one workload.
type Comparison struct {
	Results   []*Result
	Summaries []Summary
	// Demand is the SPEC RG demand curve (policy.Demand): for each simulated
	// second, the fewest pods the oracle's sizing rule says meet the target at
	// that second's true arrival rate.
	Demand   []int
	Capacity *policy.Capacity
	// Oracles tell how each oracle's schedule was found (oracle,
	// oracle-pooled), in the order they ran.
	Oracles []OracleSearch
	// Seed000 is seed 000's statistic of predictive-hpa against
	// hpa-cooldown, when both ran.
	Seed000 *Seed000Stat
}

// DropSeries drops every run's series (Result.DropSeries) and the demand
// curve: the summaries, the yardsticks' searches and the cost ratios stay.
func (c *Comparison) DropSeries() {
	for _, r := range c.Results {
		r.DropSeries()
	}
	c.Demand = nil
}

// NewCapacity is the oracle's sizing rule for cfg (it knows the true
// service-time distribution). With processor sharing a pod has
// SharingPlaces(cfg) full-speed places and a request alone runs
// max(1, unit/CPU) times slower than its sampled service time.
func NewCapacity(cfg Config, maxReplicas int) *policy.Capacity {
	const points = 1000
	scale, k := 1.0, max(cfg.Concurrency, 1)
	if cfg.Sharing {
		u := psUnitOf(cfg)
		scale, k = math.Max(1, u/cfg.CPU), SharingPlaces(cfg)
	}
	q := make([]float64, points)
	for i := range q {
		q[i] = scale * cfg.Service.Quantile(100*(float64(i)+0.5)/points)
	}
	return &policy.Capacity{
		MeanService: scale * cfg.Service.Mean, ServiceSCV: cfg.Service.SCV(),
		ServiceQuantiles: q, K: k, Sharing: cfg.Sharing,
		Target: cfg.Target, Percentile: cfg.Percentile, Max: maxReplicas,
	}
}

// planeCapacity is the oracle's sizing rule (capa) on cfg's data plane: as it
// is where each pod queues its own requests, its pooled rule where requests
// wait in one queue (Routing.Spec). A run's first pods and the onset bound's
// calm are counted with it. capa itself is not changed.
func planeCapacity(cfg Config, capa *policy.Capacity) *policy.Capacity {
	if cfg.Routing.Spec() != decide.RoutingPooled || capa.Pooled {
		return capa
	}
	return capa.PooledClone()
}

// SharingPlaces is how many requests a processor-sharing pod serves at full
// speed at once: ⌊CPU / cores per request⌋, at least 1, at most Concurrency.
// It is also the concurrency QAS is told, as a user would configure it for a
// CPU-bound service.
func SharingPlaces(cfg Config) int {
	return min(max(1, int(math.Floor(cfg.CPU/psUnitOf(cfg)+1e-9))), max(cfg.Concurrency, 1))
}

// Compare runs each named policy on cfg with the same seed. The yardsticks
// (policy.Yardsticks; "yardsticks" stands for all) are found by one search
// (searchOracles) over the data planes they may use, or computed (the lower
// bounds, LowerBound). When cfg.Context ends, the run under way stops at its next
// simulated second and Compare returns an error wrapping the context's cause.
func Compare(cfg Config, names []string, p policy.Params, progress func(policy string, second, total int)) (*Comparison, error) {
	capa := NewCapacity(cfg, max(p.MaxReplicas, 1))
	names = ExpandYardsticks(names)
	pols := make([]policy.Policy, len(names))
	var groups []oracleGroup
	for i, n := range names {
		if policy.IsYardstick(n) {
			for _, g := range yardstickGroups(n, cfg.Routing) {
				if !slices.Contains(groups, g) {
					groups = append(groups, g)
				}
			}
			continue
		}
		pp := p
		if pp.Routing == "" {
			// A user tells QAS the data plane in front of its pods.
			pp.Routing = cfg.Routing.Spec()
		}
		if cfg.Sharing && (n == "qas" || n == "qas-reactive") {
			pp.Concurrency = SharingPlaces(cfg)
		}
		pol, err := policy.New(n, pp, policy.Future{})
		if err != nil {
			return nil, err
		}
		pols[i] = pol
	}
	c := &Comparison{Demand: policy.Demand(cfg.Rates, capa), Capacity: capa}
	if cfg.InitialReplicas == 0 {
		// Start every policy where the oracle would: enough pods for the
		// first pod start's init time, so that no run begins with a backlog
		// it could not have prevented, counted on the run's data plane (per
		// pod, a shared-queue run began with 3–5 × the pods its own
		// yardsticks hold, which a reactive policy paid to keep until its
		// history showed it could let them go).
		first := NewInitTimes(cfg.Init, cfg.Seed).At(0)
		start := planeCapacity(cfg, capa)
		for s := 0; s < len(cfg.Rates) && float64(s) <= first; s++ {
			cfg.InitialReplicas = max(cfg.InitialReplicas, start.Pods(cfg.Rates[s]))
		}
	}
	var search *oracleRuns
	for i, name := range names {
		run := cfg
		if progress != nil {
			run.Progress = func(s, t int) { progress(name, s, t) }
		}
		var r *Result
		routing := cfg.Routing.String()
		switch {
		case policy.IsYardstick(name):
			if search == nil {
				var prog func(int, int)
				if progress != nil {
					prog = func(d, t int) { progress("oracle search", d, t) }
				}
				run.Progress = nil
				search = searchOracles(run, p, capa, groups, prog)
			}
			var found OracleSearch
			r, found = search.pick(name, yardstickGroups(name, cfg.Routing))
			c.Oracles = append(c.Oracles, found)
			routing = found.Routing
		default:
			r = Run(run, pols[i])
			if _, ok := pols[i].(ActivatorRouter); ok && cfg.Routing != RoutePooled {
				routing = "pooled while the activator is in the path, else " + cfg.Routing.String()
			}
		}
		if err := stoppedAfter(cfg, i, names); err != nil {
			return nil, err
		}
		c.Results = append(c.Results, r)
		sum := Summarize(r, c.Demand)
		sum.Routing = routing
		c.Summaries = append(c.Summaries, sum)
	}
	var pred, react *Result
	for _, r := range c.Results {
		switch r.Policy {
		case "predictive-hpa":
			pred = r
		case "hpa-cooldown":
			react = r
		}
	}
	if pred != nil && react != nil {
		st := Seed000Compare(pred, react)
		c.Seed000 = &st
	}
	return c, nil
}

// stoppedAfter returns, when cfg's context has ended, an error that says how far
// the comparison got (the runs of names before i finished; the one of names[i]
// was cut short) and wraps the context's cause.
func stoppedAfter(cfg Config, i int, names []string) error {
	if cfg.Context == nil || cfg.Context.Err() == nil {
		return nil
	}
	return fmt.Errorf("simulation stopped during %s (%d of %d policies and yardsticks done): %w",
		names[i], i, len(names), context.Cause(cfg.Context))
}

// ExpandYardsticks replaces policy.YardsticksName in names by every
// yardstick not listed otherwise.
func ExpandYardsticks(names []string) []string {
	var out []string
	for _, n := range names {
		if n != policy.YardsticksName {
			out = append(out, n)
			continue
		}
		for _, y := range policy.Yardsticks {
			if !slices.Contains(names, y) && !slices.Contains(out, y) {
				out = append(out, y)
			}
		}
	}
	return out
}

// Summarize computes a run's figures against demand.
func Summarize(r *Result, demand []int) Summary {
	sum := Summary{
		Name: r.Policy, Requests: r.Requests, RequestsOverTargetPct: r.OverTargetPct(),
		MinutesOverTargetPct: r.MinutesOverTargetPct(), LatePerMinute: r.MinuteOver, PodSeconds: r.PodSeconds,
		CPUCoreSeconds: r.CPUCoreSeconds(), CPUUsedCoreSeconds: r.CPUUsedSeconds(), Actions: r.Actions, Resizes: r.Resizes, Migrations: r.Migrations,
		Latency:     Quantile{P50: r.Latency.Quantile(50), P95: r.Latency.Quantile(95), P99: r.Latency.Quantile(99)},
		MeanLatency: r.MeanLatency,
		Spec:        Elasticity(demand, r.Ready), SpecRequested: SeedRequestedVsRunning(r.Decisions),
	}
	if h := r.Handoff; h.HandedOff+h.Refused+h.ViaFront > 0 {
		sum.Handoff = &h
	}
	return sum
}

// Table formats the summaries as a fixed-width table.
func Table(s []Summary) string {
	out := fmt.Sprintf("%-22s %9s %7s %7s %9s %9s %9s %9s %10s %10s %7s %6s %6s %6s %6s %6s %7s\n",
		"policy", "requests", ">T %", "min>T%", "mean ms", "p50 ms", "p95 ms", "p99 ms", "pod-s", "cpu-s", "actions",
		"θU%", "θO%", "τU%", "τO%", "inst%", "jitter")
	for _, x := range s {
		out += fmt.Sprintf("%-22s %9d %7.2f %7.1f %9.1f %9.1f %9.1f %9.1f %10.0f %10.0f %7d %6.1f %6.1f %6.1f %6.1f %6.1f %7.2f\n",
			x.Name, x.Requests, x.RequestsOverTargetPct, x.MinutesOverTargetPct, 1000*x.MeanLatency, 1000*x.Latency.P50, 1000*x.Latency.P95,
			1000*x.Latency.P99, x.PodSeconds, x.CPUCoreSeconds, x.Actions, x.Spec.ThetaU, x.Spec.ThetaO, x.Spec.TauU,
			x.Spec.TauO, x.Spec.Instability, x.Spec.Jitter)
	}
	return out
}

// YardstickOf names the clairvoyant oracle and the lower bound of the data
// plane policy name was routed on: the pooled ones for the KPA (its
// activator pools requests whenever it is in the path) and for the -pooled
// yardsticks, the run's own otherwise.
func YardstickOf(name string) (oracle, lowerBound string) {
	if judgedPooled(name) {
		return policy.PooledOracleName, policy.PooledLowerBoundName
	}
	return policy.OracleName, policy.LowerBoundName
}

// judgedPooled reports whether policy name is held to the pooled data plane's
// yardsticks: the KPA's (its activator pools requests whenever it is in the
// path) and the -pooled yardsticks themselves.
func judgedPooled(name string) bool {
	return name == "kpa" || name == policy.KPADelayName || strings.HasSuffix(name, "-pooled")
}

// Index is the position of policy name in the comparison, −1 when it did
// not run.
func (c *Comparison) Index(name string) int {
	for i, s := range c.Summaries {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// CostRatio is policy i's CPU-core-seconds over those of the clairvoyant
// oracle of its data plane (YardstickOf); NaN when that oracle did not run.
func (c *Comparison) CostRatio(i int) float64 {
	o, _ := YardstickOf(c.Summaries[i].Name)
	return c.costOver(i, o)
}

// ReactiveCostRatio is policy i's CPU-core-seconds over those of the reactive
// oracle of its data plane (the pooled one for the policies YardstickOf holds
// to the pooled plane), the yardstick of issue #15's cost goal; NaN when that
// oracle did not run.
func (c *Comparison) ReactiveCostRatio(i int) float64 {
	if judgedPooled(c.Summaries[i].Name) {
		return c.costOver(i, policy.PooledReactiveOracleName)
	}
	return c.costOver(i, policy.ReactiveOracleName)
}

func (c *Comparison) costOver(i int, yardstick string) float64 {
	j := c.Index(yardstick)
	if j < 0 || c.Summaries[j].CPUCoreSeconds == 0 {
		return math.NaN()
	}
	return c.Summaries[i].CPUCoreSeconds / c.Summaries[j].CPUCoreSeconds
}
