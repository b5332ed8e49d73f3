package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/query"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/stats"
)

// BenchmarkFluxSnapshot reads one workload's snapshot from a real InfluxDB
// holding an hour of the collector's 5 s points for it and its 20 pods on 4
// nodes, beside another workload's 20 pods on the same nodes (its neighbours),
// over an hour's window (the controller's --window until 2026-11-29; the six
// hours of λ it reads now are BenchmarkFluxWorkloadWindow's), two ways: the pods', nodes'
// and neighbours' newest values looked for over the whole hour (Query.Latest
// 0, as until 2026-11-29) and within DefaultLatest of the newest point (what
// Source asks). Each is read with the queries of a round one after the other
// (Flux.sequential, as until 2026-11-29) and at once (what Snapshot does),
// after checking that both read the same snapshot. Compare their ns/op in the
// same run; the λ history's read is the same in all. Needs influxd (bash
// test/infra/env.sh go test -bench ...).
func BenchmarkFluxSnapshot(b *testing.B) {
	concurrent := benchFlux(b)
	sequential := &Flux{Query: concurrent.Query, Bucket: concurrent.Bucket, sequential: true}
	now := t0.Add(benchPoints * 5 * time.Second)
	for _, bc := range []struct {
		name   string
		latest time.Duration
	}{{"pods-over-the-hour", 0}, {"pods-near-the-newest-point", DefaultLatest}} {
		b.Run(bc.name, func(b *testing.B) {
			q := Query{Namespace: "ns", Workload: "w", Now: now, Window: time.Hour, Latest: bc.latest}
			one, err := sequential.Snapshot(context.Background(), q)
			require.NoError(b, err)
			other, err := concurrent.Snapshot(context.Background(), q)
			require.NoError(b, err)
			require.Equal(b, one, other, "the same snapshot read one query after the other and at once")
			for _, rc := range []struct {
				name string
				fl   *Flux
			}{{"sequential", sequential}, {"concurrent", concurrent}} {
				b.Run(rc.name, func(b *testing.B) {
					for b.Loop() {
						w, err := rc.fl.Snapshot(context.Background(), q)
						require.NoError(b, err)
						require.Len(b, w.Pods, benchPods)
						require.Len(b, w.Nodes, benchNodes)
						require.Len(b, w.Neighbours, benchPods)
					}
				})
			}
		})
	}
}

const benchPods, benchNodes, benchPoints = 20, 4, 720

// benchFlux is a real InfluxDB holding an hour of 5 s points of workload
// ns/w, its benchPods pods and benchNodes nodes, and benchPods pods of
// workload ns/db on the same nodes, from t0.
func benchFlux(b *testing.B) *Flux {
	const pods, nodes, points = benchPods, benchNodes, benchPoints
	var pts []*write.Point
	for i := range points {
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"},
			map[string]any{"arrival_rate": 40.0 + float64(i%7), "service_mean_seconds": 0.05, "service_scv": 1.2,
				"latency_p95_seconds": 0.2, "service_samples": 200.0}, at))
		for _, workload := range []string{"w", "db"} {
			for p := range pods {
				pts = append(pts, write.NewPoint(influx.Pod, map[string]string{"namespace": "ns", "workload": workload,
					"pod": fmt.Sprintf("%s-%d", workload, p), "node": fmt.Sprintf("n%d", p%nodes)},
					map[string]any{"service_mean_seconds": 0.05, "cpu_usage_cores": 0.3, "cpu_request_cores": 0.5, "cpu_limit_cores": 1.0,
						"in_flight": 1.0, "waiting": 0.0, "in_flight_mean": 0.8}, at))
			}
		}
		for n := range nodes {
			pts = append(pts, write.NewPoint(influx.Node, map[string]string{"node": fmt.Sprintf("n%d", n)},
				map[string]any{"cpu_usage_cores": 2.0, "cpu_allocatable_cores": 4.0}, at))
		}
	}
	return &Flux{Query: influxWith(b, pts...), Bucket: influxtest.Bucket}
}

// BenchmarkFluxWorkloadWindow reads a workload's λ history over the
// controller's default window (measurement.DefaultWindow, six hours of the
// collector's 5 s points, each with every field the store reads and both
// histograms' buckets, as the collector writes them) two ways, in the same
// run: every field of every point, pivoted into one row per point
// (pivotWorkloadQuery, as the store read it until 2026-11-29), and what
// Snapshot reads now, λ over the window (WorkloadQuery) and the other fields
// of the newest point alone (NewestQuery), one after the other. Compare their
// ns/op. Needs influxd (bash test/infra/env.sh go test -bench ...).
func BenchmarkFluxWorkloadWindow(b *testing.B) {
	points := int(measurement.DefaultWindow / (5 * time.Second))
	var pts []*write.Point
	for i := range points {
		fields := map[string]any{}
		for j, f := range workloadFields {
			fields[f] = 1.0 + float64(j) + float64(i%7)
		}
		for _, prefix := range influx.BucketPrefixes {
			for _, bound := range append(slices.Clone(stats.DefaultLatencyBounds), math.Inf(1)) {
				fields[influx.BucketField(prefix, bound)] = float64(i % 11)
			}
		}
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"}, fields,
			t0.Add(time.Duration(i)*5*time.Second)))
	}
	fl := &Flux{Query: influxWith(b, pts...), Bucket: influxtest.Bucket}
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(time.Duration(points-1) * 5 * time.Second), Window: measurement.DefaultWindow}
	ctx := context.Background()
	b.Run("pivot-every-field", func(b *testing.B) {
		for b.Loop() {
			rows := 0
			require.NoError(b, fl.each(ctx, pivotWorkloadQuery(fl.Bucket, q), func(*query.FluxRecord) { rows++ }))
			require.Equal(b, points, rows)
		}
	})
	b.Run("lambda-then-newest", func(b *testing.B) {
		for b.Loop() {
			rates, at, err := fl.readWorkload(ctx, q)
			require.NoError(b, err)
			require.Len(b, rates, points)
			last, err := fl.readNewestPoint(ctx, q, at)
			require.NoError(b, err)
			require.Len(b, last, len(workloadFields)-1)
		}
	})
}

// pivotWorkloadQuery is the workload query as it was until 2026-11-29: every
// field of every point in the window, one row per point.
func pivotWorkloadQuery(bucket string, q Query) string {
	return rangeFilter(bucket, q, influx.Workload) + workloadFilter(q) + fieldFilter(workloadFields) +
		"  |> group()\n  |> pivot(rowKey: [\"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n  |> sort(columns: [\"_time\"])\n"
}
