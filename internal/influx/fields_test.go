package influx

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFieldConstantsDeclared: every tag and field the reader names by constant is
// declared on the measurements it reads it from.
func TestFieldConstantsDeclared(t *testing.T) {
	has := func(m, field string) bool {
		meas, ok := Lookup(m)
		require.True(t, ok, m)
		return slices.ContainsFunc(meas.Fields, func(f Field) bool { return f.Name == field })
	}
	tagged := func(m, tag string) bool {
		meas, _ := Lookup(m)
		return slices.Contains(meas.Tags, tag)
	}
	for _, f := range []string{FieldArrivalRate, FieldServiceMean, FieldServiceSCV, FieldLatencyP50, FieldLatencyP95, FieldLatencyP99, FieldOverflowShare, FieldFrontQueueLength,
		FieldArrivalRateCV2, FieldArrivalRatePairs} {
		require.True(t, has(Workload, f), "%s on %s", f, Workload)
	}
	for _, f := range []string{FieldServiceMean, FieldCPUUsage, FieldCPURequest, FieldCPULimit} {
		require.True(t, has(Pod, f), "%s on %s", f, Pod)
	}
	for _, f := range []string{FieldCPUUsage, FieldCPUAllocatable} {
		require.True(t, has(Node, f), "%s on %s", f, Node)
	}
	for _, tag := range []string{TagNamespace, TagWorkload, TagPod, TagNode} {
		require.True(t, tagged(Pod, tag), "tag %s on %s", tag, Pod)
	}
	require.True(t, tagged(Workload, TagNamespace) && tagged(Workload, TagWorkload))
	require.True(t, tagged(Node, TagNode))
}
