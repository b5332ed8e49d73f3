package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestSummary(t *testing.T) {
	require.Equal(t, "p95<200ms", LatencyTarget{Latency: "200ms", Percentile: ptr(95.0)}.Summary())
	require.Equal(t, "p99.9<1s", LatencyTarget{Latency: "1s", Percentile: ptr(99.9)}.Summary())
	require.Equal(t, "mean<200ms", LatencyTarget{Latency: "200ms"}.Summary())
}
