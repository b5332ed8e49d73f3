package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// BenchmarkFluxSnapshot reads one workload's snapshot from a real InfluxDB
// holding an hour of the collector's 5 s points for it and its 20 pods on 4
// nodes, beside another workload's 20 pods on the same nodes (its neighbours),
// the controller's window (--window 1h), two ways: the pods', nodes'
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
