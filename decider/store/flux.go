package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/query"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
)

// Flux reads snapshots from InfluxDB with Flux queries (InfluxDB 1.8 with
// flux-enabled, or 2.x). Bucket is "db/rp" on 1.8.
type Flux struct {
	Query  api.QueryAPI
	Bucket string
}

// FluxString quotes s as a Flux string literal: backslash, double quote and the
// "${" of string interpolation are escaped, so tag values cannot change the query.
func FluxString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "${", `\${`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func fluxTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// rangeFilter is the common head of every query: the window [now-window, now] and the
// measurement.
func rangeFilter(bucket string, q Query, measurement string) string {
	return fmt.Sprintf("from(bucket: %s)\n  |> range(start: %s, stop: %s)\n  |> filter(fn: (r) => r._measurement == %s)\n",
		FluxString(bucket), fluxTime(q.Now.Add(-q.Window)), fluxTime(q.Now.Add(time.Nanosecond)), FluxString(measurement))
}

func workloadFilter(q Query) string {
	return fmt.Sprintf("  |> filter(fn: (r) => r.namespace == %s and r.workload == %s)\n", FluxString(q.Namespace), FluxString(q.Workload))
}

// The fields each query reads. Only float fields: InfluxDB 1.8 cannot group series of
// different types together ("expected float cursor type").
var (
	workloadFields = []string{"arrival_rate", "service_mean_seconds", "service_scv", "latency_p50_seconds", "latency_p95_seconds", "latency_p99_seconds"}
	podFields      = append([]string{"service_mean_seconds", "cpu_usage_cores", "cpu_request_cores", "cpu_limit_cores"}, podQueueFields...)
)

func fieldFilter(fields []string) string {
	conds := make([]string, len(fields))
	for i, f := range fields {
		conds[i] = "r._field == " + FluxString(f)
	}
	return "  |> filter(fn: (r) => " + strings.Join(conds, " or ") + ")\n"
}

// WorkloadQuery returns the workload points in the window, one row per time.
func WorkloadQuery(bucket string, q Query) string {
	return rangeFilter(bucket, q, influx.Workload) + workloadFilter(q) + fieldFilter(workloadFields) +
		"  |> group()\n  |> pivot(rowKey: [\"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n  |> sort(columns: [\"_time\"])\n"
}

// PodsQuery returns each pod's newest value of every field, one row per pod.
func PodsQuery(bucket string, q Query) string {
	return rangeFilter(bucket, q, influx.Pod) + workloadFilter(q) + fieldFilter(podFields) +
		"  |> group(columns: [\"pod\", \"node\", \"_field\"])\n  |> last()\n" +
		"  |> pivot(rowKey: [\"pod\", \"node\", \"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n"
}

// NodesQuery returns each listed node's newest values, one row per node. nodes must not
// be empty.
func NodesQuery(bucket string, q Query, nodes []string) string {
	conds := make([]string, len(nodes))
	for i, n := range nodes {
		conds[i] = "r.node == " + FluxString(n)
	}
	return rangeFilter(bucket, q, influx.Node) +
		"  |> filter(fn: (r) => " + strings.Join(conds, " or ") + ")\n" +
		"  |> group(columns: [\"node\", \"_field\"])\n  |> last()\n" +
		"  |> pivot(rowKey: [\"node\", \"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n"
}

// Snapshot implements Store.
func (f *Flux) Snapshot(ctx context.Context, q Query) (decide.Snapshot, error) {
	if err := q.Validate(); err != nil {
		return decide.Snapshot{}, err
	}
	var rates []decide.Sample
	last := map[string]float64{}
	var lastTime time.Time
	err := f.each(ctx, WorkloadQuery(f.Bucket, q), func(r *query.FluxRecord) {
		rates = append(rates, decide.Sample{Time: r.Time(), Rate: num(r, "arrival_rate")})
		for _, k := range workloadFields[1:] {
			last[k] = num(r, k)
		}
		lastTime = r.Time()
	})
	if err != nil {
		return decide.Snapshot{}, err
	}
	if len(rates) == 0 {
		return decide.Snapshot{}, ErrNoData
	}
	latest := map[string]podRow{}
	err = f.each(ctx, PodsQuery(f.Bucket, q), func(r *query.FluxRecord) {
		// The pivot keeps one row per pod and time; fields written at an older time
		// (none in practice: every field is written together) give an older row.
		p := podRowFrom(str(r, "pod"), str(r, "node"), r.Time(), func(f string) float64 { return num(r, f) })
		if old, ok := latest[p.name]; !ok || p.time.After(old.time) {
			latest[p.name] = p
		}
	})
	if err != nil {
		return decide.Snapshot{}, err
	}
	pods := sortedPods(latest)
	var nodeNames []string
	seen := map[string]bool{}
	for _, p := range pods {
		if p.node != "" && !seen[p.node] {
			seen[p.node] = true
			nodeNames = append(nodeNames, p.node)
		}
	}
	nodes := map[string]nodeRow{}
	if len(nodeNames) > 0 {
		err = f.each(ctx, NodesQuery(f.Bucket, q, nodeNames), func(r *query.FluxRecord) {
			n := str(r, "node")
			nodes[n] = nodeRow{name: n, used: num(r, "cpu_usage_cores"), allocatable: num(r, "cpu_allocatable_cores")}
		})
		if err != nil {
			return decide.Snapshot{}, err
		}
	}
	var nodeRows []nodeRow
	for _, n := range nodeNames {
		if row, ok := nodes[n]; ok {
			nodeRows = append(nodeRows, row)
		}
	}
	sort.Slice(nodeRows, func(i, j int) bool { return nodeRows[i].name < nodeRows[j].name })
	return assemble(q, rates, last, lastTime, pods, nodeRows), nil
}

func (f *Flux) each(ctx context.Context, flux string, fn func(*query.FluxRecord)) error {
	res, err := f.Query.Query(ctx, flux)
	if err != nil {
		return fmt.Errorf("store: flux query: %w", err)
	}
	defer res.Close()
	for res.Next() {
		fn(res.Record())
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("store: flux result: %w", err)
	}
	return nil
}

func num(r *query.FluxRecord, k string) float64 {
	switch v := r.ValueByKey(k).(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	}
	return 0
}

func str(r *query.FluxRecord, k string) string {
	s, _ := r.ValueByKey(k).(string)
	return s
}
