package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKHPAA(t *testing.T) {
	// Without nodes KHPA-A is KHPA: ⌈Σ relative utilisation / target⌉.
	k := NewKHPAA(params, 0.8)
	f := newFeeder(4)
	f.step(k, 0)
	require.Equal(t, 5, f.step(k, 0.9), "⌈4 × 0.9 / 0.8⌉")

	// With nodes, the absolute utilisation comes from the fitted line through
	// (pod relative, node absolute) pairs: one pod per 1-core node running 0.5
	// cores of other work, so absolute = 0.5 + 0.5·relative.
	k = NewKHPAA(params, 0.8)
	now := 0.0
	pods := []Pod{{ID: 1, Ready: true, CPU: 0.5, Node: 0}, {ID: 2, Ready: true, CPU: 0.5, Node: 1}}
	nodes := []Node{{CPU: 1}, {CPU: 1}}
	var got int
	for _, rel := range [][2]float64{{0, 0}, {0.2, 0.6}, {0.4, 0.8}, {1, 1}} {
		now += KHPAAPeriod
		for i := range pods {
			pods[i].BusyCum += rel[i] * pods[i].CPU * KHPAAPeriod
			nodes[i].UsedCum += (0.5 + 0.5*rel[i]) * KHPAAPeriod
		}
		got = k.Decide(&Observation{Now: now, Pods: pods, Nodes: nodes}).Replicas
	}
	// Last step: absolute 1.0 on both nodes → ⌈2 / 0.8⌉ = 3.
	require.Equal(t, 3, got)
}
