package matrix

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
)

// Shape is what issue #15's goals call a workload's traffic: most are
// judged against the reactive oracle alone; a smooth curve also against the
// clairvoyant one, and bursts on a clock below the reactive one.
type Shape int

const (
	// ShapeTrace is a trace, its bursts, or synthetic bursts: no goal beyond
	// the matrix's.
	ShapeTrace Shape = iota
	// ShapeSmooth is a rate on a smooth curve (issue #15: ≤ 1.10 × the
	// clairvoyant oracle of the same routing, median).
	ShapeSmooth
	// ShapeRecurring is bursts on a clock the history shows (issue #15: below
	// the reactive oracle).
	ShapeRecurring
)

// The goals' thresholds (issue #15; issue #20 for the pooled planes).
const (
	// GoalReactive is the most qas may cost over the reactive oracle of its
	// data plane, median over a plane's cells.
	GoalReactive = 1.10
	// GoalSmooth is the most it may cost over the clairvoyant oracle of its
	// data plane on smooth traffic, median.
	GoalSmooth = 1.10
	// GoalPooled is the most it may cost over oracle-pooled on a pooled data
	// plane, median.
	GoalPooled = 1.30
)

// Goals is where one policy stands, in a run, against the goals of issue #15
// (and of issue #20 on the pooled planes), each figure from the run's cells.
type Goals struct {
	Policy string `json:"policy"`
	// Cells ran the policy; Met of them met the SLO. RuledOut counts the
	// misses whose onset bound asks for more pods than the cell's past does
	// (or more than the replica cap): no policy that does not know the
	// future meets those at the past's cost.
	Cells    int `json:"cells"`
	Met      int `json:"met"`
	RuledOut int `json:"misses_ruled_out"`
	// Planes are the goals per data plane, in the order the planes first ran.
	Planes []PlaneGoals `json:"planes"`
	// Smooth is the goal on smooth traffic (ShapeSmooth cells), Recurring
	// the one where bursts recur (ShapeRecurring); nil where no such cell ran.
	Smooth    *ShapeGoals `json:"smooth,omitempty"`
	Recurring *ShapeGoals `json:"recurring,omitempty"`
	// KPA compares it with the KPAs where they met the SLO; nil where no KPA
	// ran.
	KPA *KPAGoals `json:"kpa,omitempty"`
}

// PlaneGoals are one data plane's cells.
type PlaneGoals struct {
	Routing string `json:"routing"`
	Cells   int    `json:"cells"`
	Met     int    `json:"met"`
	// Reactive is the median of the policy's CPU-core-seconds ÷ the reactive
	// oracle's of the plane (GoalReactive); NaN where none ran.
	Reactive float64 `json:"-"`
	// Pooled is, on a plane that pools the pods' queues (handoff, a front or
	// the ideal pooled queue), the median of its CPU-core-seconds ÷
	// oracle-pooled's (GoalPooled); NaN on the others, or where no yardstick
	// searched the pooled queue.
	Pooled float64 `json:"-"`
}

// ShapeGoals are the cells of one shape of traffic.
type ShapeGoals struct {
	Cells int `json:"cells"`
	Met   int `json:"met"`
	// Median is the median cost ratio the shape's goal reads: ÷ the
	// clairvoyant oracle for smooth traffic, ÷ the reactive one where bursts
	// recur. Within counts the cells that meet the goal: at or under it for
	// smooth traffic, under it where bursts recur.
	Median float64 `json:"-"`
	Within int     `json:"within_goal"`
	Goal   float64 `json:"goal"`
}

// KPAGoals are the pairs of a cell and a KPA (kpa or kpa-delay) that met the
// SLO there: issue #15 asks that qas meet it too, at no more cost.
type KPAGoals struct {
	Pairs int `json:"pairs"`
	// Missed counts the pairs where the policy missed the SLO.
	Missed int `json:"missed"`
	// NoMoreCPU counts the pairs it met at no more CPU-core-seconds, each on
	// its own data plane: the goal, read as it is written, though the
	// KPA's plane (its activator's pooled queue) is cheaper than a Service's
	// random routing by itself. NoDearer counts those it met at no more cost
	// each ÷ the clairvoyant oracle of its own plane, which takes the planes'
	// difference out.
	NoDearer  int `json:"no_dearer_over_own_oracle"`
	NoMoreCPU int `json:"no_more_cpu_core_seconds"`
}

// MarshalJSON writes the medians as numbers, or null where none (NaN).
func (p PlaneGoals) MarshalJSON() ([]byte, error) {
	type plain PlaneGoals
	return json.Marshal(struct {
		plain
		Reactive *float64 `json:"cost_over_reactive_oracle_median"`
		Pooled   *float64 `json:"cost_over_oracle_pooled_median"`
	}{plain(p), num(p.Reactive), num(p.Pooled)})
}

// MarshalJSON writes the median as a number, or null where none (NaN).
func (s ShapeGoals) MarshalJSON() ([]byte, error) {
	type plain ShapeGoals
	return json.Marshal(struct {
		plain
		Median *float64 `json:"cost_median"`
	}{plain(s), num(s.Median)})
}

// pools says whether a data plane shares the pods' queues (issue #20's goal
// applies there).
func pools(r sim.Routing) bool { return r == sim.RoutePooled || r.HandsOff() }

// ruledOut says whether a cell's onset bound asks for more pods than its
// past does, or more than the cap: a miss there is not the policy's alone.
func ruledOut(b *sim.OnsetBound) bool {
	return b != nil && (b.Pods == 0 || b.Pods > b.CalmPods)
}

// run is what the goals read of one policy in one cell.
type run struct {
	routing sim.Routing
	shape   Shape
	met     bool
	// ruledOut: the cell's onset bound asks for more pods than its past.
	ruledOut bool
	cpu      float64
	// The cost ratios: ÷ the clairvoyant and the reactive oracle of its
	// plane, and ÷ oracle-pooled (NaN where not searched).
	clairvoyant, reactive, pooled float64
	// kpas are the KPAs that ran in the cell.
	kpas []kpaRun
}

type kpaRun struct {
	met              bool
	cpu, clairvoyant float64
}

// GoalsOf is where the policy named stands against the issues' goals over
// the results; ok is false when it ran in no cell.
func GoalsOf(rs []*Result, name string) (Goals, bool) {
	var runs []run
	for _, r := range rs {
		i := r.Comparison.Index(name)
		if i < 0 {
			continue
		}
		budget := r.Comparison.Capacity.Budget()
		x := run{routing: r.Cell.Routing, shape: r.Cell.Workload.Shape, met: r.Comparison.Results[i].MeetsSLO(budget),
			ruledOut: ruledOut(r.OnsetBound), cpu: r.Summaries[i].CPUCoreSeconds,
			clairvoyant: ratio(r.CostRatio[i]), reactive: ratio(r.ReactiveCostRatio[i]), pooled: math.NaN()}
		if base, ok := pooledOracleCost(r); ok && base > 0 {
			x.pooled = x.cpu / base
		}
		for _, k := range []string{"kpa", policy.KPADelayName} {
			if j := r.Comparison.Index(k); j >= 0 {
				x.kpas = append(x.kpas, kpaRun{met: r.Comparison.Results[j].MeetsSLO(budget), cpu: r.Summaries[j].CPUCoreSeconds,
					clairvoyant: ratio(r.CostRatio[j])})
			}
		}
		runs = append(runs, x)
	}
	if len(runs) == 0 {
		return Goals{Policy: name}, false
	}
	return goalsOf(name, runs), true
}

// ratio is a cost ratio, NaN where none.
func ratio(c *float64) float64 {
	if c == nil {
		return math.NaN()
	}
	return *c
}

// goalsOf counts the runs against the goals.
func goalsOf(name string, runs []run) Goals {
	g := Goals{Policy: name}
	type planeAcc struct {
		g                *PlaneGoals
		reactive, pooled []float64
	}
	planes := map[sim.Routing]*planeAcc{}
	var order []sim.Routing
	var smooth, recurring []float64
	var smoothG, recurringG ShapeGoals
	var kpa KPAGoals
	kpaRan := false
	for _, x := range runs {
		g.Cells++
		if x.met {
			g.Met++
		} else if x.ruledOut {
			g.RuledOut++
		}
		p := planes[x.routing]
		if p == nil {
			p = &planeAcc{g: &PlaneGoals{Routing: x.routing.String()}}
			planes[x.routing] = p
			order = append(order, x.routing)
		}
		p.g.Cells++
		if x.met {
			p.g.Met++
		}
		if !math.IsNaN(x.reactive) {
			p.reactive = append(p.reactive, x.reactive)
		}
		if !math.IsNaN(x.pooled) && pools(x.routing) {
			p.pooled = append(p.pooled, x.pooled)
		}
		switch {
		case x.shape == ShapeSmooth && !math.IsNaN(x.clairvoyant):
			smooth = append(smooth, x.clairvoyant)
			smoothG.add(x.met, x.clairvoyant <= GoalSmooth)
		case x.shape == ShapeRecurring && !math.IsNaN(x.reactive):
			recurring = append(recurring, x.reactive)
			recurringG.add(x.met, x.reactive < 1)
		}
		for _, k := range x.kpas {
			kpaRan = true
			if !k.met {
				continue
			}
			kpa.Pairs++
			if !x.met {
				kpa.Missed++
				continue
			}
			if x.cpu <= k.cpu {
				kpa.NoMoreCPU++
			}
			if x.clairvoyant <= k.clairvoyant {
				kpa.NoDearer++
			}
		}
	}
	for _, rt := range order {
		p := planes[rt]
		p.g.Reactive, p.g.Pooled = median(p.reactive), median(p.pooled)
		g.Planes = append(g.Planes, *p.g)
	}
	if smoothG.Cells > 0 {
		smoothG.Median, smoothG.Goal = median(smooth), GoalSmooth
		g.Smooth = &smoothG
	}
	if recurringG.Cells > 0 {
		recurringG.Median, recurringG.Goal = median(recurring), 1
		g.Recurring = &recurringG
	}
	if kpaRan {
		g.KPA = &kpa
	}
	return g
}

func (s *ShapeGoals) add(met, within bool) {
	s.Cells++
	if met {
		s.Met++
	}
	if within {
		s.Within++
	}
}

// holds is "yes" or "no" for a goal's verdict, "—" where there is no figure.
func holds(ok, known bool) string {
	switch {
	case !known:
		return "—"
	case ok:
		return "yes"
	}
	return "no"
}

// GoalsMarkdown is the policy's standing against the issues' goals, one row
// a goal, each with the figure it reads and whether it holds in this run.
func GoalsMarkdown(g Goals) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Goals (issues #15 and #20): %s\n\n", g.Policy)
	b.WriteString("Each goal read from this run's cells: the SLO in every cell; on each data plane CPU-core-seconds ≤ 1.10 × the reactive oracle's " +
		"of that plane (median); on smooth traffic ≤ 1.10 × the clairvoyant oracle's (median), and below the reactive oracle where bursts recur; " +
		"where a KPA meets the SLO, qas too at no more CPU-core-seconds, each on its own data plane; on a plane that pools the queues ≤ 1.30 × oracle-pooled's (median). " +
		"A miss the onset bound rules out is one no policy that does not know the future avoids at its past's cost.\n\n")
	b.WriteString("| goal | this run | holds |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| the SLO in every cell | %d/%d met; %d of the %d misses ruled out by the onset bound | %s |\n",
		g.Met, g.Cells, g.RuledOut, g.Cells-g.Met, holds(g.Met == g.Cells, true))
	for _, p := range g.Planes {
		fmt.Fprintf(&b, "| ≤ %.2f × the reactive oracle, %s (median) | %s over %d cells (%d met) | %s |\n",
			GoalReactive, p.Routing, f3(p.Reactive), p.Cells, p.Met, holds(p.Reactive <= GoalReactive, !math.IsNaN(p.Reactive)))
	}
	if s := g.Smooth; s != nil {
		fmt.Fprintf(&b, "| ≤ %.2f × the clairvoyant oracle on smooth traffic (median) | %s over %d cells, %d within, %d met | %s |\n",
			s.Goal, f3(s.Median), s.Cells, s.Within, s.Met, holds(s.Median <= s.Goal, !math.IsNaN(s.Median)))
	}
	if s := g.Recurring; s != nil {
		fmt.Fprintf(&b, "| below the reactive oracle where bursts recur (median) | %s over %d cells, %d below, %d met | %s |\n",
			f3(s.Median), s.Cells, s.Within, s.Met, holds(s.Median < s.Goal, !math.IsNaN(s.Median)))
	}
	if k := g.KPA; k != nil {
		fmt.Fprintf(&b, "| where a KPA meets the SLO, the SLO at no more CPU-core-seconds | %d pairs: missed in %d; met at no more CPU-core-seconds in %d, "+
			"at no more ÷ its own plane's clairvoyant oracle in %d | %s |\n", k.Pairs, k.Missed, k.NoMoreCPU, k.NoDearer, holds(k.NoMoreCPU == k.Pairs, k.Pairs > 0))
	}
	for _, p := range g.Planes {
		if math.IsNaN(p.Pooled) {
			continue
		}
		fmt.Fprintf(&b, "| every cell at ≤ %.2f × oracle-pooled, %s (median) | %s over %d cells, %d met | %s |\n",
			GoalPooled, p.Routing, f3(p.Pooled), p.Cells, p.Met, holds(p.Met == p.Cells && p.Pooled <= GoalPooled, true))
	}
	return b.String()
}

// f3 formats a ratio to three places, "—" for NaN.
func f3(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.3f", x)
}
