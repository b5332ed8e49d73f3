package controller_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestUnreachableTargetIsReported: a target no allocation can meet (below the
// service time, or at a percentile so far out that its latency exceeds the target
// whatever the pod count) is said in the status (ScalingLimited, reason
// TargetUnreachable) and in a Warning event, instead of reading as healthy.
func TestUnreachableTargetIsReported(t *testing.T) {
	for _, tc := range []struct {
		name       string
		latency    string
		percentile float64
	}{
		{"1ms at p95 with 50ms requests", "1ms", 95},
		{"200ms at p99.999", "200ms", 99.999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.deployment(t, "web", 2)
			e.queueAutoscalerWith(t, "web", "web", false, map[string]any{
				"target": map[string]any{"latency": tc.latency, "percentile": tc.percentile},
			})
			e.metrics.set(10, 0.05, e.clock.Now())
			d, err := e.reconcile(t, e.ctrl, "web")
			require.NoError(t, err)
			require.Contains(t, d.Explanation.Reason, "unreachable")

			qa := e.get(t, "web")
			limited := condition(qa, "ScalingLimited")
			require.Equal(t, metav1.ConditionTrue, limited.Status, limited.Message)
			require.Equal(t, "TargetUnreachable", limited.Reason)
			require.Contains(t, limited.Message, tc.latency)
			evs := e.events(t, "TargetUnreachable")
			require.NotEmpty(t, evs)
			require.Equal(t, corev1.EventTypeWarning, evs[0].Type)
			require.Contains(t, evs[0].Message, "unreachable")
		})
	}
}
