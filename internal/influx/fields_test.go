package influx

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/stats"
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
	for _, f := range []string{FieldArrivalRate, FieldServiceMean, FieldServiceSCV, FieldServiceSamples, FieldLatencyP50, FieldLatencyP95, FieldLatencyP99, FieldOverflowShare, FieldFrontQueueLength,
		FieldExpiredRequeuedRate, FieldExpiredRelayedRate, FieldFrontRefusedFullRate, FieldArrivalRateCV2, FieldArrivalRatePairs} {
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

// TestLatencyBucketFieldRoundTrip: every bound of the proxies' default
// histogram, and the +Inf bucket, names a field that reads back as exactly that
// bound.
func TestLatencyBucketFieldRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		bound float64
		name  string
	}{
		{0.0001, "latency_bucket_le_0.0001"},
		{0.00025, "latency_bucket_le_0.00025"},
		{0.0075, "latency_bucket_le_0.0075"},
		{0.2, "latency_bucket_le_0.2"},
		{1, "latency_bucket_le_1"},
		{7.5, "latency_bucket_le_7.5"},
		{60, "latency_bucket_le_60"},
		{1e-7, "latency_bucket_le_0.0000001"},
		{1e21, "latency_bucket_le_1000000000000000000000"},
		{math.Inf(1), "latency_bucket_le_inf"},
	} {
		require.Equal(t, tc.name, LatencyBucketField(tc.bound))
		got, isBucket, err := ParseLatencyBucketField(tc.name)
		require.NoError(t, err, tc.name)
		require.True(t, isBucket, tc.name)
		require.Equal(t, tc.bound, got, tc.name)
	}
	for _, b := range stats.DefaultLatencyBounds {
		got, _, err := ParseLatencyBucketField(LatencyBucketField(b))
		require.NoError(t, err)
		require.Equal(t, b, got)
	}
}

// TestParseLatencyBucketFieldRefuses: a name with the prefix that
// LatencyBucketField would not write is an error naming it; other fields are
// not buckets and no error.
func TestParseLatencyBucketFieldRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"latency_bucket_le_", "not a number"},
		{"latency_bucket_le_abc", "not a number"},
		{"latency_bucket_le_NaN", "not a number"},
		{"latency_bucket_le_Inf", "not a number"},
		{"latency_bucket_le_+Inf", "not a number"},
		{"latency_bucket_le_infinity", "not a number"},
		{"latency_bucket_le_1e400", "not a number"},
		{"latency_bucket_le_0", "not positive"},
		{"latency_bucket_le_-0.2", "not positive"},
		{"latency_bucket_le_0.20", `canonical form "latency_bucket_le_0.2"`},
		{"latency_bucket_le_+0.2", `canonical form "latency_bucket_le_0.2"`},
		{"latency_bucket_le_1e-4", `canonical form "latency_bucket_le_0.0001"`},
		{"latency_bucket_le_0x1p-2", `canonical form "latency_bucket_le_0.25"`},
		{"latency_bucket_le_<bound>", "not a number"},
	} {
		_, isBucket, err := ParseLatencyBucketField(tc.name)
		require.True(t, isBucket, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.ErrorContains(t, err, strconv.Quote(tc.name), "the error names the field")
	}
	for _, name := range []string{FieldLatencyP95, "latency_bucket", "latency_bucket_le", ""} {
		_, isBucket, err := ParseLatencyBucketField(name)
		require.False(t, isBucket, name)
		require.NoError(t, err, name)
	}
}

// TestWorkloadDeclaresLatencyBuckets: the schema declares the bucket fields by
// their pattern, and only names that parse match it.
func TestWorkloadDeclaresLatencyBuckets(t *testing.T) {
	w, _ := Lookup(Workload)
	p, _ := Lookup(Pod)
	for _, f := range []string{LatencyBucketField(0.2), LatencyBucketField(60), FieldLatencyBucketInf, FieldLatencyP95} {
		require.True(t, w.Declares(f), f)
	}
	for _, f := range []string{"latency_bucket_le_0.20", LatencyBucketPattern, "latency_bucket_le_x", "no_such_field"} {
		require.False(t, w.Declares(f), f)
	}
	require.False(t, p.Declares(LatencyBucketField(0.2)), "qas_pod carries no buckets")
	require.True(t, p.Declares(FieldCPUUsage))
}

// FuzzParseLatencyBucketField: parsing any name never panics; a name it accepts
// is exactly the one LatencyBucketField writes for its bound, and every positive
// bound's name reads back as that bound.
func FuzzParseLatencyBucketField(f *testing.F) {
	for _, s := range []string{"latency_bucket_le_0.0001", "latency_bucket_le_60", "latency_bucket_le_inf", "latency_bucket_le_0.20",
		"latency_bucket_le_1e-4", "latency_bucket_le_-1", "latency_bucket_le_NaN", "latency_p95_seconds", "latency_bucket_le_"} {
		f.Add(s, 0.2)
	}
	f.Add("", 5e-324)
	f.Add("", math.MaxFloat64)
	f.Fuzz(func(t *testing.T, name string, bound float64) {
		v, isBucket, err := ParseLatencyBucketField(name)
		if isBucket && err == nil {
			require.True(t, v > 0, "bound %v of %q", v, name)
			require.Equal(t, name, LatencyBucketField(v))
		}
		if !isBucket {
			require.NoError(t, err)
		}
		if bound > 0 && !math.IsNaN(bound) {
			back, isBucket, err := ParseLatencyBucketField(LatencyBucketField(bound))
			require.NoError(t, err, "bound %v", bound)
			require.True(t, isBucket)
			require.Equal(t, bound, back)
		}
	})
}
