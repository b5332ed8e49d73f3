package influx

import (
	"math"
	"slices"
	"strconv"
	"strings"
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

// bucketHistograms are the histograms written as bucket fields, with their
// own naming functions: every test of the names runs for each.
var bucketHistograms = []struct {
	prefix, inf, pattern string
	field                func(float64) string
	parse                func(string) (float64, bool, error)
}{
	{LatencyBucketPrefix, FieldLatencyBucketInf, LatencyBucketPattern, LatencyBucketField, ParseLatencyBucketField},
	{ServiceBucketPrefix, FieldServiceBucketInf, ServiceBucketPattern, ServiceBucketField, ParseServiceBucketField},
}

// TestBucketPrefixes: every histogram's prefix is listed, and none is a prefix
// of another (a name is a bucket of one histogram at most).
func TestBucketPrefixes(t *testing.T) {
	require.Len(t, BucketPrefixes, len(bucketHistograms))
	for i, h := range bucketHistograms {
		require.Equal(t, h.prefix, BucketPrefixes[i])
		require.Equal(t, h.prefix+"inf", h.inf)
		require.Equal(t, BucketPattern(h.prefix), h.pattern)
		for j, other := range BucketPrefixes {
			if i != j {
				require.False(t, strings.HasPrefix(other, h.prefix), "%s begins with %s", other, h.prefix)
			}
		}
	}
}

// TestBucketFieldRoundTrip: for each histogram, every bound of the proxies'
// default histogram, and the +Inf bucket, names a field that reads back as
// exactly that bound, and is no bucket of the other histograms.
func TestBucketFieldRoundTrip(t *testing.T) {
	for _, h := range bucketHistograms {
		t.Run(h.prefix, func(t *testing.T) {
			for _, tc := range []struct {
				bound  float64
				suffix string
			}{
				{0.0001, "0.0001"},
				{0.00025, "0.00025"},
				{0.0075, "0.0075"},
				{0.2, "0.2"},
				{1, "1"},
				{7.5, "7.5"},
				{60, "60"},
				{1e-7, "0.0000001"},
				{1e21, "1000000000000000000000"},
				{math.Inf(1), "inf"},
			} {
				name := h.prefix + tc.suffix
				require.Equal(t, name, h.field(tc.bound))
				require.Equal(t, name, BucketField(h.prefix, tc.bound))
				got, isBucket, err := h.parse(name)
				require.NoError(t, err, name)
				require.True(t, isBucket, name)
				require.Equal(t, tc.bound, got, name)
				for _, other := range BucketPrefixes {
					if other != h.prefix {
						_, isBucket, err := ParseBucketField(other, name)
						require.False(t, isBucket, "%s read as a bucket of %s", name, other)
						require.NoError(t, err)
					}
				}
			}
			require.Equal(t, h.inf, h.field(math.Inf(1)))
			for _, b := range stats.DefaultLatencyBounds {
				got, _, err := h.parse(h.field(b))
				require.NoError(t, err)
				require.Equal(t, b, got)
			}
		})
	}
	require.Equal(t, "latency_bucket_le_0.2", LatencyBucketField(0.2))
	require.Equal(t, "service_bucket_le_0.2", ServiceBucketField(0.2))
	require.Equal(t, "service_bucket_le_inf", FieldServiceBucketInf)
}

// TestParseBucketFieldRefuses: for each histogram, a name with its prefix
// that its field function would not write is an error naming it; other fields
// (the other histogram's buckets too) are not its buckets and no error.
func TestParseBucketFieldRefuses(t *testing.T) {
	for _, h := range bucketHistograms {
		t.Run(h.prefix, func(t *testing.T) {
			for _, tc := range []struct {
				suffix, want string
			}{
				{"", "not a number"},
				{"abc", "not a number"},
				{"NaN", "not a number"},
				{"Inf", "not a number"},
				{"+Inf", "not a number"},
				{"infinity", "not a number"},
				{"1e400", "not a number"},
				{"0", "not positive"},
				{"-0.2", "not positive"},
				{"0.20", `canonical form "` + h.prefix + `0.2"`},
				{"+0.2", `canonical form "` + h.prefix + `0.2"`},
				{"1e-4", `canonical form "` + h.prefix + `0.0001"`},
				{"0x1p-2", `canonical form "` + h.prefix + `0.25"`},
				{"<bound>", "not a number"},
			} {
				name := h.prefix + tc.suffix
				_, isBucket, err := h.parse(name)
				require.True(t, isBucket, name)
				require.ErrorContains(t, err, tc.want, name)
				require.ErrorContains(t, err, strconv.Quote(name), "the error names the field")
			}
			notOurs := []string{FieldLatencyP95, FieldServiceP95, strings.TrimSuffix(h.prefix, "_le_"), strings.TrimSuffix(h.prefix, "_"), ""}
			for _, other := range BucketPrefixes {
				if other != h.prefix {
					notOurs = append(notOurs, other+"0.2", other+"inf", other+"0.20")
				}
			}
			for _, name := range notOurs {
				_, isBucket, err := h.parse(name)
				require.False(t, isBucket, name)
				require.NoError(t, err, name)
			}
		})
	}
}

// TestWorkloadDeclaresBuckets: the schema declares each histogram's bucket
// fields on qas_workload by their pattern, and only names that parse match
// it; qas_pod carries none.
func TestWorkloadDeclaresBuckets(t *testing.T) {
	w, _ := Lookup(Workload)
	p, _ := Lookup(Pod)
	for _, h := range bucketHistograms {
		t.Run(h.prefix, func(t *testing.T) {
			require.True(t, slices.ContainsFunc(w.Fields, func(f Field) bool { return f.Name == h.pattern }), "%s declared by its pattern", h.pattern)
			for _, f := range []string{h.field(0.0001), h.field(0.2), h.field(60), h.inf} {
				require.True(t, w.Declares(f), f)
			}
			for _, f := range []string{h.prefix + "0.20", h.pattern, h.prefix + "x", h.prefix, "no_such_field"} {
				require.False(t, w.Declares(f), f)
			}
			require.False(t, p.Declares(h.field(0.2)), "qas_pod carries no buckets")
		})
	}
	require.True(t, w.Declares(FieldLatencyP95))
	require.True(t, w.Declares(FieldServiceP999))
	require.True(t, p.Declares(FieldCPUUsage))
}

// FuzzParseBucketField: for each histogram's prefix, parsing any name never
// panics; a name it accepts is exactly the one BucketField writes for its
// bound, and every positive bound's name reads back as that bound.
func FuzzParseBucketField(f *testing.F) {
	for _, s := range []string{"latency_bucket_le_0.0001", "latency_bucket_le_60", "latency_bucket_le_inf", "latency_bucket_le_0.20",
		"latency_bucket_le_1e-4", "latency_bucket_le_-1", "latency_bucket_le_NaN", "latency_p95_seconds", "latency_bucket_le_",
		"service_bucket_le_0.0001", "service_bucket_le_inf", "service_bucket_le_0.20", "service_p99_seconds", "service_bucket_le_"} {
		f.Add(s, 0.2)
	}
	f.Add("", 5e-324)
	f.Add("", math.MaxFloat64)
	f.Fuzz(func(t *testing.T, name string, bound float64) {
		buckets := 0
		for _, prefix := range BucketPrefixes {
			v, isBucket, err := ParseBucketField(prefix, name)
			if isBucket {
				buckets++
			}
			if isBucket && err == nil {
				require.True(t, v > 0, "bound %v of %q", v, name)
				require.Equal(t, name, BucketField(prefix, v))
			}
			if !isBucket {
				require.NoError(t, err)
			}
			if bound > 0 && !math.IsNaN(bound) {
				back, isBucket, err := ParseBucketField(prefix, BucketField(prefix, bound))
				require.NoError(t, err, "bound %v", bound)
				require.True(t, isBucket)
				require.Equal(t, bound, back)
			}
		}
		require.LessOrEqual(t, buckets, 1, "%q is a bucket of one histogram at most", name)
	})
}
