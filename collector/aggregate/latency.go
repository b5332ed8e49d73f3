package aggregate

import (
	"fmt"
	"slices"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/stats"
)

// latencyBounds chooses the bucket bounds of the workload's merged latency
// histogram: those of the pods (not fronts) whose histograms counted most of
// the interval's completions, the first pod's on a tie. Proxies normally share
// one set (stats.DefaultLatencyBounds); during a rollout that changes them they
// differ, and counts of different buckets cannot be added, so the others are
// left out rather than mixed. skipped names, sorted, the pods left out that
// had completions (an idle pod's histogram loses nothing).
func latencyBounds(ivs []scrape.Interval) (bounds []float64, skipped []string) {
	type group struct {
		bounds []float64
		total  uint64
	}
	var groups []group
	for _, iv := range ivs {
		if iv.Front || len(iv.Latency.Counts) == 0 {
			continue
		}
		i := slices.IndexFunc(groups, func(g group) bool { return slices.Equal(g.bounds, iv.Latency.Bounds) })
		if i < 0 {
			groups = append(groups, group{bounds: iv.Latency.Bounds})
			i = len(groups) - 1
		}
		groups[i].total += iv.Latency.Total()
	}
	if len(groups) == 0 {
		return nil, nil
	}
	best := groups[0]
	for _, g := range groups[1:] {
		if g.total > best.total {
			best = g
		}
	}
	for _, iv := range ivs {
		if !iv.Front && !slices.Equal(iv.Latency.Bounds, best.bounds) && iv.Latency.Total() > 0 {
			skipped = append(skipped, iv.Key())
		}
	}
	slices.Sort(skipped)
	return best.bounds, skipped
}

// inBounds reports whether h has the bounds latencyBounds chose (the pods whose
// histograms combine merges).
func inBounds(h stats.Histogram, bounds []float64) bool { return slices.Equal(h.Bounds, bounds) }

// checkHistogram checks what the workload point writes of a merged histogram
// (Latency, Service), named name: none, or one of a valid shape
// (stats.Histogram.CheckShape). The counts are whole numbers ≥ 0 whatever a
// validated /stats document holds, and are written as floats (exact up to 2⁵³).
func checkHistogram(name string, h stats.Histogram) error {
	if len(h.Bounds) == 0 && len(h.Counts) == 0 {
		return nil
	}
	if err := h.CheckShape(name); err != nil {
		return fmt.Errorf("aggregate: %w", err)
	}
	return nil
}
