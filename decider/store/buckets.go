package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/query"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
)

// BucketsQuery returns the histograms' bucket fields (influx.BucketPrefixes:
// the latency and the service histogram's) of the workload's point at at (the
// newest one WorkloadQuery read), one record per field. Their number depends
// on the proxies' bounds, so they are matched by name rather than listed, and
// read apart from WorkloadQuery: only one point's, not the window's.
func BucketsQuery(bucket string, q Query, at time.Time) string {
	prefixes := make([]string, len(influx.BucketPrefixes))
	for i, p := range influx.BucketPrefixes {
		prefixes[i] = regexp.QuoteMeta(p)
	}
	return pointRange(bucket, at) + workloadFilter(q) +
		"  |> filter(fn: (r) => r._field =~ /^(" + strings.Join(prefixes, "|") + ")/)\n" +
		"  |> keep(columns: [\"_field\", \"_value\"])\n"
}

// readBuckets reads the bucket fields of the workload's point at at
// (BucketsQuery: both histograms' in one read), a field's values summed if
// several series hold it (each is the same point's). A value that is not a
// number is read as NaN, which histogram.buckets refuses.
func (f *Flux) readBuckets(ctx context.Context, q Query, at time.Time) (map[string]float64, error) {
	read := map[string]float64{}
	err := f.each(ctx, BucketsQuery(f.Bucket, q, at), func(r *query.FluxRecord) {
		v, ok := number(r.Value())
		if !ok {
			v = math.NaN()
		}
		read[r.Field()] += v
	})
	if err != nil {
		return nil, fmt.Errorf("store: latency and service buckets: %w", err)
	}
	return read, nil
}

// histogram is a histogram a workload point carries as bucket fields: their
// prefix (one of influx.BucketPrefixes) and its name in what is said of it.
type histogram struct{ prefix, name string }

var (
	latencyHistogram = histogram{influx.LatencyBucketPrefix, "latency"}
	serviceHistogram = histogram{influx.ServiceBucketPrefix, "service"}
)

// buckets reads a workload point's histogram h from its fields
// (influx.BucketField names of h.prefix; the other fields are ignored): the
// buckets ascending by bound, the last +Inf, as decide.Snapshot.LatencyBuckets
// and ServiceBuckets want them, and what was wrong, if anything. A field whose
// name is malformed is skipped and named; the others are kept. A count that is
// not a finite number ≥ 0, or no +Inf bucket (the counts then are no whole
// distribution), gives no histogram; a histogram that counted nothing (an
// idle interval) is none either, without a problem.
func (h histogram) buckets(fields map[string]float64) ([]decide.LatencyBucket, string) {
	var out []decide.LatencyBucket
	var problems []string
	for name, v := range fields {
		bound, isBucket, err := influx.ParseBucketField(h.prefix, name)
		switch {
		case !isBucket:
			continue
		case err != nil:
			problems = append(problems, err.Error()+": skipped")
			continue
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return nil, fmt.Sprintf("store: %s bucket %s counts %v, want a finite number ≥ 0: no %s histogram", h.name, name, v, h.name)
		}
		out = append(out, decide.LatencyBucket{UpperBound: bound, Count: v})
	}
	sort.Strings(problems)
	problem := strings.Join(problems, "; ")
	if len(out) == 0 {
		return nil, problem
	}
	slices.SortFunc(out, func(a, b decide.LatencyBucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
	if !math.IsInf(out[len(out)-1].UpperBound, 1) {
		return nil, joinProblems(problem, fmt.Sprintf("store: %d %s buckets without %s: no whole histogram", len(out), h.name, influx.BucketField(h.prefix, math.Inf(1))))
	}
	total := 0.0
	for _, b := range out {
		total += b.Count
	}
	switch {
	case math.IsInf(total, 0):
		return nil, joinProblems(problem, fmt.Sprintf("store: the %s buckets count more than a float holds: no %s histogram", h.name, h.name))
	case total == 0:
		return nil, problem
	}
	return out, problem
}

func joinProblems(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
