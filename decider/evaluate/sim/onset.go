package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// OnsetBound is what a run's largest unforeseeable rise costs any policy that
// does not know the future: the fewest pods that must exist when it begins.
//
// The onset is the second t₀ at which the mean rate over the next lead (the
// init time's mean, I) is the largest multiple of the highest lead mean before
// it (every lead that ends by t₀): the rise the run's own past says least
// about. Pods Ready during [t₀, t₀ + I) exist at t₀ (Ready or starting); a pod
// ordered at t₀ or later is Ready only after its init time. So whatever a
// policy does, the onset's first lead is served by the pods it chose before
// t₀, when all it had seen was the rates before t₀.
//
// The bound gives such a policy everything else: its N pods are all Ready at
// t₀ with empty queues, it sees the onset the moment it begins and orders
// ample pods at once (enough for twice the highest rate of the rest of the
// window), and outside the window [t₀, t₀ + 3I + 2 min] only the service time
// alone puts a request late (P(S > T), which no pod count removes). The
// window's late requests then fall with N, and Pods is the fewest N for which
//
//	late(N) + P(S > T) · (requests of the run − requests of the window) ≤ budget · requests of the run,
//
// found by bisection. A policy holding fewer pods at t₀ misses the SLO in
// expectation however it acts later; and because it cannot tell the rates
// before t₀ from a run that stays calm (the calm twin: a smooth trace), it
// holds them in that twin too.
type OnsetBound struct {
	// Onset is t₀, the second the rise begins (from the start of the run).
	Onset int `json:"onset_second"`
	// Lead is I, seconds: the init time's mean, rounded up.
	Lead int `json:"lead_seconds"`
	// Jump is the mean rate over [t₀, t₀ + I) over RateBefore.
	Jump float64 `json:"jump"`
	// RateBefore is the highest mean rate over any lead that ends by t₀,
	// req/s; RateAfter is the mean over [t₀, t₀ + I).
	RateBefore float64 `json:"rate_before"`
	RateAfter  float64 `json:"rate_after"`
	// CalmPods is what the target needs at RateBefore on the run's data
	// plane (Capacity.Pods; the pooled model where requests wait in one
	// queue, Routing.Spec; measured where neither model is the plane's,
	// calmPods): the most the run's past asks for.
	CalmPods int `json:"calm_pods"`
	// CalmLatePct is the late share of the run's requests, in %, that the
	// bound gives a policy holding CalmPods at t₀: at least that many of
	// its requests are late in expectation.
	CalmLatePct float64 `json:"calm_late_pct"`
	// Pods is the fewest pods at t₀ that can meet the SLO; 0 when even the
	// replica cap cannot.
	Pods int `json:"pods"`
	// LatePct is the bound's late share at Pods, in %.
	LatePct float64 `json:"late_pct"`
	// BudgetPct is the share of requests the SLO allows over the target, in %.
	BudgetPct float64 `json:"budget_pct"`
}

// Ratio is Pods over CalmPods: how many times the pods its past asks for a
// policy must hold before the onset (0 when no count meets the SLO).
func (b OnsetBound) Ratio() float64 {
	if b.CalmPods == 0 || b.Pods == 0 {
		return 0
	}
	return float64(b.Pods) / float64(b.CalmPods)
}

// Sentence says what the bound asks of a policy, for a report.
func (b OnsetBound) Sentence() string {
	pods := fmt.Sprintf("at least %d pods", b.Pods)
	if b.Pods == 0 {
		pods = "more pods than the replica cap"
	}
	return fmt.Sprintf("the largest rise over the run's past is ×%.2f (%.1f → %.1f req/s over a %d s lead) at %d s; "+
		"a policy that does not know the future needs %s when it begins, where the past asks for %d (at %d, at least %.2f %% late)",
		b.Jump, b.RateBefore, b.RateAfter, b.Lead, b.Onset, pods, b.CalmPods, b.CalmPods, b.CalmLatePct)
}

// ErrShortRun is FindOnset's error (wrapped) for rates that cannot hold an
// onset: less than a lead in the run, or two with the history. A caller for
// which a short run simply has no bound tests for it with errors.Is.
var ErrShortRun = errors.New("too short for an onset")

// onsetDrain is how long after the onset's third lead the window still counts
// late requests: the backlog on the pods that were there drains on them alone.
const onsetDrain = 120

// FindOnset returns t₀ (OnsetBound's rule), the jump and the rates on both
// sides of it, for rates per second and a lead of lead seconds. history is
// the rates before the run (oldest first; nil for a cold start): its leads
// count as seen, and t₀ is a second of the run, from its start. It needs a
// lead before t₀ and one after it: at least two leads of history and rates
// together, one of them in the run.
func FindOnset(history, rates []float64, lead int) (onset int, jump, before, after float64, err error) {
	if lead < 1 {
		return 0, 0, 0, 0, fmt.Errorf("onset: lead %d s, want at least 1 s", lead)
	}
	if len(rates) < lead || len(history)+len(rates) < 2*lead {
		return 0, 0, 0, 0, fmt.Errorf("onset: %w: %d s of rates after %d s of history, want a lead (%d s) in the run and two leads in all",
			ErrShortRun, len(rates), len(history), lead)
	}
	all := append(append(make([]float64, 0, len(history)+len(rates)), history...), rates...)
	prefix := make([]float64, len(all)+1)
	for i, r := range all {
		if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			what := fmt.Sprintf("second %d of the run", i-len(history))
			if i < len(history) {
				what = fmt.Sprintf("second %d of the history", i)
			}
			return 0, 0, 0, 0, fmt.Errorf("onset: rate %v at %s is not a finite non-negative number", r, what)
		}
		prefix[i+1] = prefix[i] + r
	}
	mean := func(t int) float64 { return (prefix[t+lead] - prefix[t]) / float64(lead) }
	highest := 0.0
	for t := lead; t < len(history); t++ {
		highest = math.Max(highest, mean(t-lead))
	}
	onset, jump = -1, math.Inf(-1)
	for t := max(lead, len(history)); t+lead <= len(all); t++ {
		highest = math.Max(highest, mean(t-lead))
		m := mean(t)
		j := 1.0
		switch {
		case highest > 0:
			j = m / highest
		case m > 0:
			j = math.Inf(1)
		}
		if j > jump {
			onset, jump, before, after = t-len(history), j, highest, m
		}
	}
	return onset, jump, before, after, nil
}

// FindOnsetBound computes cfg's OnsetBound with the oracle's capacity model
// capa (NewCapacity) and at most maxReplicas pods; history is the rates before
// the run, as FindOnset reads them. cfg.Rates must hold a lead, and with the
// history two; cfg.Percentile must be a percentile (a mean target has no late
// budget to bound).
func FindOnsetBound(cfg Config, history []float64, capa *policy.Capacity, maxReplicas int) (OnsetBound, error) {
	if cfg.Percentile <= 0 || cfg.Percentile >= 100 {
		return OnsetBound{}, fmt.Errorf("onset bound: percentile %v, want one in (0, 100): a mean target has no late budget", cfg.Percentile)
	}
	if maxReplicas < 1 {
		return OnsetBound{}, errors.New("onset bound: maxReplicas must be at least 1")
	}
	if !(cfg.Init.Mean > 0) || math.IsInf(cfg.Init.Mean, 0) {
		return OnsetBound{}, fmt.Errorf("onset bound: init time mean %v s, want a positive finite one", cfg.Init.Mean)
	}
	lead := int(math.Ceil(cfg.Init.Mean))
	onset, jump, before, after, err := FindOnset(history, cfg.Rates, lead)
	if err != nil {
		return OnsetBound{}, err
	}
	// The calm's pods on the cell's own data plane: one shared queue needs
	// fewer than per-pod queues.
	capa = planeCapacity(cfg, capa)
	b := OnsetBound{Onset: onset, Lead: lead, Jump: jump, RateBefore: before, RateAfter: after,
		CalmPods: calmPods(cfg, capa, before), BudgetPct: 100 * capa.Budget()}
	total := 0.0
	for _, r := range cfg.Rates {
		total += r
	}
	// The window starts a second before t₀: a policy's first decision comes
	// one period (1 s) in, so the ample pods are ordered at t₀.
	from := max(onset-1, 0)
	to := min(len(cfg.Rates), onset+3*lead+onsetDrain)
	window := cfg
	window.Rates = cfg.Rates[from:to]
	window.Progress, window.Context = nil, nil
	highest := 0.0
	for _, r := range window.Rates {
		highest = math.Max(highest, r)
	}
	floor := capa.ServiceTail(capa.Target)
	ample := min(maxReplicas, capa.Pods(2*highest))
	seen := map[int]float64{}
	late := func(n int) float64 {
		if l, ok := seen[n]; ok {
			return l
		}
		w := window
		w.InitialReplicas = n
		need := make([]int, len(w.Rates))
		for i := range need {
			need[i] = max(n, ample)
		}
		r := Run(w, policy.NewReactiveOracle("onset-bound", policy.Params{MinReplicas: 1, MaxReplicas: maxReplicas}, need))
		outside := math.Max(0, total-float64(r.Requests))
		seen[n] = 100 * (float64(r.OverTarget) + floor*outside) / math.Max(total, 1)
		return seen[n]
	}
	b.CalmLatePct = late(b.CalmPods)
	if late(maxReplicas) > b.BudgetPct {
		b.LatePct = late(maxReplicas)
		return b, nil
	}
	// The late share falls with the pods: the fewest that meet, by bisection
	// between a count that misses (lo) and one that meets (hi).
	lo, hi := 0, maxReplicas
	if b.CalmLatePct <= b.BudgetPct {
		hi = b.CalmPods
	} else {
		lo = b.CalmPods
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if late(mid) <= b.BudgetPct {
			hi = mid
		} else {
			lo = mid
		}
	}
	b.Pods, b.LatePct = hi, late(hi)
	return b, nil
}

// calmMinutes and calmRequests size calmPods' runs: at least this long and
// this many requests, so that a late share of 5 % is measured to about a
// tenth of itself (clumps included), and at most calmMaxSeconds.
const (
	calmMinutes    = 20
	calmRequests   = 40000
	calmMaxSeconds = 4 * 3600
)

// calmPods is the fewest pods that meet the target at a constant rate on
// cfg's data plane. Where requests queue at random per pod (Capacity.Pods)
// or in one shared queue (the pooled rule; Routing.Spec) the model gives it.
// Least request and peer handoff lie between the two: each sends a request to
// a pod with room where there is one, so they need no more pods than random
// routing and no fewer than one queue. No closed form fits them, so the count
// is measured: the fewest n at which n pods, all Ready, serve the rate held
// constant (calmMinutes and calmRequests long) on the plane with at most the
// budget's share over the target, searched between the pooled rule's count
// and the per-pod rule's. Counted by the per-pod rule there, a least-request
// run's past asked for twice the pods the plane needs, and the bound saw no
// rise a reactive policy could not meet where it had to hold twice the
// calm's pods.
func calmPods(cfg Config, capa *policy.Capacity, rate float64) int {
	if cfg.Routing != RouteLeastRequest && cfg.Routing != RoutePeer || rate <= 0 || capa.Sharing {
		return capa.Pods(rate)
	}
	// The late share falls with the pods: the fewest in [pooled, per-pod)
	// that meet, by bisection, or the per-pod rule's count (taken to meet).
	lo, hi := capa.PooledClone().Pods(rate), capa.Pods(rate)
	if lo >= hi {
		return hi
	}
	return lo + sort.Search(hi-lo, func(i int) bool { return calmLateShare(cfg, rate, lo+i) <= capa.Budget() })
}

// calmLateShare is the share of requests over the target when n pods, all
// Ready, serve rate held constant on cfg's data plane for calmMinutes and
// calmRequests (1 when no request came).
func calmLateShare(cfg Config, rate float64, n int) float64 {
	secs := int(math.Min(calmMaxSeconds, math.Max(60*calmMinutes, math.Ceil(calmRequests/rate))))
	run := cfg
	run.Rates = make([]float64, secs)
	for i := range run.Rates {
		run.Rates[i] = rate
	}
	run.InitialReplicas = n
	run.Progress, run.Context = nil, nil
	r := Run(run, policy.Static{N: n})
	if r.Requests == 0 {
		return 1
	}
	return float64(r.OverTarget) / float64(r.Requests)
}
