package matrix

import (
	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
)

// Pooling is the subset of the matrix that compares the pooled data planes
// of issue #20 (docs/pooling.md): four workloads (a NASA hour, seed 000's
// flash crowd, synthetic bursts and MMPP), both settings, seeds 1 and 2,
// each through a Service (random), peer handoff between sidecars (peer) and
// a capacity-aware front (front), with the extra hop of
// sim.DefaultHandoff.
func Pooling(nasa string) []Cell {
	keep := map[string]bool{"nasa-2jul-10h-x50": true, "flash-crowd-x5": true, "bursts-x20": true, "mmpp-x20": true}
	var cells []Cell
	for _, w := range Workloads(nasa) {
		if !keep[w.Name] {
			continue
		}
		for _, s := range Settings() {
			for seed := uint64(1); seed <= 2; seed++ {
				for _, r := range []sim.Routing{sim.RouteRandom, sim.RoutePeer, sim.RouteFront} {
					cells = append(cells, Cell{Workload: w, Setting: s, Seed: seed, Routing: r})
				}
			}
		}
	}
	return cells
}

// PoolingOptions are DefaultOptions with the policies qas, kpa and hpa and
// two yardsticks, the clairvoyant oracle of the cell's data plane and the
// one on the ideal pooled queue (oracle-pooled), which keeps the 48 cells
// within a quarter of an hour on 2 cores.
func PoolingOptions() Options {
	o := DefaultOptions()
	o.Policies = []string{"qas", "kpa", "hpa"}
	o.Yardsticks = []string{policy.OracleName, policy.PooledOracleName}
	return o
}
