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

// LatencyBucketsQuery returns the latency bucket fields of the workload's point
// at at (the newest one WorkloadQuery read), one record per field. Their number
// depends on the proxies' bounds, so they are matched by name rather than
// listed, and read apart from WorkloadQuery: only one point's, not the window's.
func LatencyBucketsQuery(bucket string, q Query, at time.Time) string {
	return fmt.Sprintf("from(bucket: %s)\n  |> range(start: %s, stop: %s)\n  |> filter(fn: (r) => r._measurement == %s)\n",
		FluxString(bucket), fluxTime(at), fluxTime(at.Add(time.Nanosecond)), FluxString(influx.Workload)) +
		workloadFilter(q) +
		"  |> filter(fn: (r) => r._field =~ /^" + regexp.QuoteMeta(influx.LatencyBucketPrefix) + "/)\n" +
		"  |> keep(columns: [\"_field\", \"_value\"])\n"
}

// readLatencyBuckets adds the latency bucket fields of the workload's point at
// at to fields, a field's values summed if several series hold it (each is
// the same point's). A value that is not a number is added as NaN, which
// latencyBuckets refuses.
func (f *Flux) readLatencyBuckets(ctx context.Context, q Query, at time.Time, fields map[string]float64) error {
	read := map[string]float64{}
	err := f.each(ctx, LatencyBucketsQuery(f.Bucket, q, at), func(r *query.FluxRecord) {
		v, ok := number(r.Value())
		if !ok {
			v = math.NaN()
		}
		read[r.Field()] += v
	})
	if err != nil {
		return fmt.Errorf("store: latency buckets: %w", err)
	}
	for k, v := range read {
		fields[k] = v
	}
	return nil
}

// latencyBuckets reads a workload point's latency histogram from its fields
// (influx.LatencyBucketField names): the buckets ascending by bound, the last
// +Inf, as decide.Snapshot.LatencyBuckets wants them, and what was wrong, if
// anything. A field whose name is malformed is skipped and named; the others
// are kept. A count that is not a finite number ≥ 0, or no +Inf bucket (the
// counts then are no whole distribution), gives no histogram; a histogram that
// counted nothing (an idle interval) is none either, without a problem.
func latencyBuckets(fields map[string]float64) ([]decide.LatencyBucket, string) {
	var out []decide.LatencyBucket
	var problems []string
	for name, v := range fields {
		bound, isBucket, err := influx.ParseLatencyBucketField(name)
		switch {
		case !isBucket:
			continue
		case err != nil:
			problems = append(problems, err.Error()+": skipped")
			continue
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return nil, fmt.Sprintf("store: latency bucket %s counts %v, want a finite number ≥ 0: no latency histogram", name, v)
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
		return nil, joinProblems(problem, fmt.Sprintf("store: %d latency buckets without %s: no whole histogram", len(out), influx.FieldLatencyBucketInf))
	}
	total := 0.0
	for _, b := range out {
		total += b.Count
	}
	switch {
	case math.IsInf(total, 0):
		return nil, joinProblems(problem, "store: the latency buckets count more than a float holds: no latency histogram")
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
