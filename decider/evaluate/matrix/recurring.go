package matrix

import (
	"time"

	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
)

// RecurringHistory is how much of the recurring workload's past the cells
// give the policies (what InfluxDB would hold before the replay): enough for
// the slowest clock the pattern draws (45 minutes) to recur eight times.
const RecurringHistory = 6 * time.Hour

// RecurringWorkload is the synthetic traffic with bursts on a clock
// (trace.Recurring) at ×20, its seventh hour replayed after six hours of
// history.
func RecurringWorkload() Workload {
	return Workload{Name: "recurring-x20", Source: trace.PatternRecurring, Window: hours(6, 7), Scale: 20, History: RecurringHistory}
}

// recurringCells are the recurring workload's cells: seeds 1–3 (each draws
// its own period, size and length) under the first setting, through a
// Service. A cell costs about as much as a one-hour NASA cell (the history
// is read once, not simulated), so three keep `make evaluate` within its
// budget.
func recurringCells() []Cell {
	var cells []Cell
	for seed := uint64(1); seed <= 3; seed++ {
		cells = append(cells, Cell{Workload: RecurringWorkload(), Setting: Settings()[0], Seed: seed, Routing: sim.RouteRandom})
	}
	return cells
}
