package v1alpha1

import "fmt"

// Summary returns the objective in the short form kubectl shows, e.g. "p95<200ms" or
// "mean<200ms".
func (t LatencyTarget) Summary() string {
	if t.Percentile == nil {
		return "mean<" + t.Latency
	}
	return fmt.Sprintf("p%g<%s", *t.Percentile, t.Latency)
}
