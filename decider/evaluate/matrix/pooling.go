package matrix

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
)

// Pooling is the matrix that compares the pooled data planes of issue #20
// (docs/pooling.md): every workload of the matrix, the warm ones too, and
// every setting, seeds 1–3, each through a Service (random), peer handoff
// between sidecars (peer), a capacity-aware front (front) and sidecars
// overflowing to a front (overflow), with the extra hop of
// sim.DefaultHandoff.
func Pooling(nasa string) []Cell {
	return everySettingAndSeed(append(Workloads(nasa), WarmWorkloads()...), sim.RouteRandom, sim.RoutePeer, sim.RouteFront, sim.RouteOverflow)
}

// PoolingOptions are DefaultOptions with the policies qas, kpa and hpa and
// four yardsticks: the clairvoyant and the reactive oracle of the cell's data
// plane, oracle-pooled (the ideal pooled queue's clairvoyant oracle, which the
// costs are divided by) and oracle-reactive-pooled (the cheaper reactive
// oracle of the cell's plane and the ideal pooled queue). The reactive ones
// say what knowing the present perfectly buys: a policy that only reads the
// present is judged against the reactive oracle of its own plane, as the main
// matrix judges qas (issue #15), and the reactive oracles' own rows say how
// far above oracle-pooled the information a reactive policy has leaves even
// a perfect one.
func PoolingOptions() Options {
	o := DefaultOptions()
	o.Policies = []string{"qas", "kpa", "hpa"}
	o.Yardsticks = []string{policy.OracleName, policy.ReactiveOracleName, policy.PooledOracleName, policy.PooledReactiveOracleName}
	return o
}

// PoolingRow is one policy on one data plane across the cells run on it.
type PoolingRow struct {
	Routing string `json:"routing"`
	Policy  string `json:"policy"`
	Cells   int    `json:"cells"`
	// Met counts the cells where it met the SLO.
	Met int `json:"met"`
	// Cost is its CPU-core-seconds ÷ oracle-pooled's on the ideal pooled
	// queue in the same cell (sim.OracleCandidate of routing pooled):
	// median, min and max over the cells, and the median where it met the SLO.
	CostMedian, CostMin, CostMax, CostMetMedian float64 `json:"-"`
	// ReactiveMedian is its CPU-core-seconds ÷ the reactive oracle's of its
	// data plane (sim.Comparison.ReactiveCostRatio: oracle-reactive, or
	// oracle-reactive-pooled for the KPA and the -pooled yardsticks, as the
	// main matrix judges them), median over the cells that ran it (NaN where
	// none did).
	ReactiveMedian float64 `json:"-"`
	// LateMedian and LateMax are the requests over the target, %.
	LateMedian float64 `json:"late_pct_median"`
	LateMax    float64 `json:"late_pct_max"`
	// ExtraHopPct is the median share of requests that paid an extra hop
	// (handed off or through the front), RefusedPct the median share of
	// handoffs refused, both %; HopP50 and HopP95 the extra hops at the
	// median and the 95th percentile of requests in the worst cell.
	ExtraHopPct float64 `json:"extra_hop_pct_median"`
	RefusedPct  float64 `json:"refused_pct_median"`
	HopP50      int     `json:"hops_p50"`
	HopP95      int     `json:"hops_p95"`
}

// MarshalJSON writes the costs as numbers, or null where no cell gave one
// (NaN).
func (r PoolingRow) MarshalJSON() ([]byte, error) {
	type plain PoolingRow
	return json.Marshal(struct {
		plain
		CostMedian    *float64 `json:"cost_over_oracle_pooled_median"`
		CostMin       *float64 `json:"cost_over_oracle_pooled_min"`
		CostMax       *float64 `json:"cost_over_oracle_pooled_max"`
		CostMetMedian *float64 `json:"cost_over_oracle_pooled_median_where_met"`
		Reactive      *float64 `json:"cost_over_reactive_oracle_median"`
		RefusedPct    *float64 `json:"refused_pct_median"`
		ExtraHopPct   *float64 `json:"extra_hop_pct_median"`
	}{plain(r), num(r.CostMedian), num(r.CostMin), num(r.CostMax), num(r.CostMetMedian), num(r.ReactiveMedian), num(r.RefusedPct), num(r.ExtraHopPct)})
}

// pooledOracleCost is the CPU-core-seconds of the cheapest schedule on the
// ideal pooled queue that met the SLO in r (the cheapest of all if none
// did); false if no yardstick searched the pooled queue.
func pooledOracleCost(r *Result) (float64, bool) {
	best, found, met := 0.0, false, false
	for _, o := range r.Oracles {
		for _, c := range o.Candidates {
			if c.Routing != sim.RoutePooled.String() {
				continue
			}
			switch {
			case !found, c.Met && !met, c.Met == met && c.CPUCoreSeconds < best:
				best, found, met = c.CPUCoreSeconds, true, c.Met
			}
		}
	}
	return best, found
}

// PoolingRows summarises the cells by data plane and policy against
// oracle-pooled, in the order the cells and policies ran.
func PoolingRows(rs []*Result) []PoolingRow {
	type key struct{ routing, policy string }
	var order []key
	rows := map[key]*PoolingRow{}
	costs, metCosts, reactive, late, hop, refused := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}, map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	for _, r := range rs {
		base, ok := pooledOracleCost(r)
		if !ok || base <= 0 {
			continue
		}
		for i, s := range r.Summaries {
			if s.Name == policy.PooledOracleName {
				continue
			}
			k := key{r.Cell.Routing.String(), s.Name}
			row := rows[k]
			if row == nil {
				row = &PoolingRow{Routing: k.routing, Policy: k.policy}
				rows[k] = row
				order = append(order, k)
			}
			row.Cells++
			res := r.Comparison.Results[i]
			x := s.CPUCoreSeconds / base
			costs[k] = append(costs[k], x)
			if y := r.Comparison.ReactiveCostRatio(i); !math.IsNaN(y) {
				reactive[k] = append(reactive[k], y)
			}
			if res.MeetsSLO(r.Comparison.Capacity.Budget()) {
				row.Met++
				metCosts[k] = append(metCosts[k], x)
			}
			late[k] = append(late[k], s.RequestsOverTargetPct)
			h := res.Handoff
			started := 0
			for _, c := range h.Hops {
				started += c
			}
			if started > 0 {
				hop = appendPct(hop, k, started-h.Hops[0], started)
			}
			if h.HandedOff+h.Refused > 0 {
				refused = appendPct(refused, k, h.Refused, h.HandedOff+h.Refused)
			}
			row.HopP50, row.HopP95 = max(row.HopP50, h.HopsAt(50)), max(row.HopP95, h.HopsAt(95))
		}
	}
	out := make([]PoolingRow, 0, len(order))
	for _, k := range order {
		row := rows[k]
		row.CostMedian, row.CostMin, row.CostMax = median(costs[k]), minOf(costs[k]), maxOf(costs[k])
		row.CostMetMedian, row.ReactiveMedian = median(metCosts[k]), median(reactive[k])
		row.LateMedian, row.LateMax = median(late[k]), maxOf(late[k])
		row.ExtraHopPct, row.RefusedPct = median(hop[k]), median(refused[k])
		out = append(out, *row)
	}
	return out
}

func appendPct[K comparable](m map[K][]float64, k K, part, whole int) map[K][]float64 {
	m[k] = append(m[k], 100*float64(part)/float64(whole))
	return m
}

// PoolingMarkdown is the comparison's table (docs/pooling.md).
func PoolingMarkdown(rs []*Result, hop float64) string {
	var b strings.Builder
	b.WriteString("## Pooled data planes against oracle-pooled\n\n")
	fmt.Fprintf(&b, "Cost is CPU-core-seconds ÷ oracle-pooled's on the ideal pooled queue in the same cell; ÷ reactive: ÷ the reactive oracle's "+
		"of its data plane (it knows the present rate the moment it changes, not the future; its pods take their init time): the cell's own, "+
		"or for the KPA and the -pooled yardsticks oracle-reactive-pooled, as in the main matrix. The row "+
		"oracle-reactive-pooled is the cheaper reactive oracle of the cell's plane and the ideal pooled queue (the KPA's yardstick in the main matrix), "+
		"from the cell's own search: what knowing the present perfectly costs on the better of the two. Extra hop: share of "+
		"requests that paid at least one (%v each), refused: share of handoffs the peer refused, hops at p50/p95: the extra hops of the "+
		"median and 95th-percentile request in the worst cell.\n\n", time.Duration(hop*float64(time.Second)))
	b.WriteString("| routing | policy | met | cost median | cost min | cost max | cost median where met | ÷ reactive median | late % median | late % max | extra hop % | refused % | hops p50/p95 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range PoolingRows(rs) {
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s | %s | %s | %s | %s | %.2f | %.2f | %s | %s | %d/%d |\n", r.Routing, r.Policy, r.Met, r.Cells,
			f2(r.CostMedian), f2(r.CostMin), f2(r.CostMax), f2(r.CostMetMedian), f2(r.ReactiveMedian), r.LateMedian, r.LateMax, f1(r.ExtraHopPct), f1(r.RefusedPct), r.HopP50, r.HopP95)
	}
	return b.String()
}

// f1 formats a share in %, "—" for NaN (no handoff to refuse).
func f1(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}
