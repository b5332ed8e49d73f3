package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/query"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
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

// rangeFilter is the common head of every query: the window [now-window, now+ahead]
// and the measurement.
func rangeFilter(bucket string, q Query, measurement string) string {
	return fmt.Sprintf("from(bucket: %s)\n  |> range(start: %s, stop: %s)\n  |> filter(fn: (r) => r._measurement == %s)\n",
		FluxString(bucket), fluxTime(q.Now.Add(-q.Window)), fluxTime(q.stop().Add(time.Nanosecond)), FluxString(measurement))
}

func workloadFilter(q Query) string {
	return fmt.Sprintf("  |> filter(fn: (r) => r.namespace == %s and r.workload == %s)\n", FluxString(q.Namespace), FluxString(q.Workload))
}

// The fields each query reads. Only float fields: InfluxDB 1.8 cannot group series of
// different types together ("expected float cursor type").
var (
	workloadFields = append([]string{influx.FieldArrivalRate, influx.FieldServiceMean, influx.FieldServiceSCV, influx.FieldServiceSamples, influx.FieldLatencyP50,
		influx.FieldLatencyP95, influx.FieldLatencyP99, influx.FieldClockOffset, influx.FieldOverflowShare, influx.FieldFrontQueueLength,
		influx.FieldExpiredRequeuedRate, influx.FieldExpiredRelayedRate, influx.FieldFrontRefusedFullRate, influx.FieldArrivalRateCV2, influx.FieldArrivalRatePairs}, influx.ServiceQuantileFields...)
	podFields       = append([]string{influx.FieldServiceMean, influx.FieldCPUUsage, influx.FieldCPURequest, influx.FieldCPULimit}, podQueueFields...)
	neighbourFields = []string{influx.FieldCPUUsage, influx.FieldCPURequest, influx.FieldCPULimit}
	nodeFields      = []string{influx.FieldCPUUsage, influx.FieldCPUAllocatable}
)

func fieldFilter(fields []string) string {
	conds := make([]string, len(fields))
	for i, f := range fields {
		conds[i] = "r._field == " + FluxString(f)
	}
	return "  |> filter(fn: (r) => " + strings.Join(conds, " or ") + ")\n"
}

// nodeFilter keeps the rows of the listed nodes; nodes must not be empty.
func nodeFilter(nodes []string) string {
	conds := make([]string, len(nodes))
	for i, n := range nodes {
		conds[i] = "r." + influx.TagNode + " == " + FluxString(n)
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

// NeighboursQuery returns the newest CPU of every other workload's pod on the listed
// nodes, one row per pod. nodes must not be empty.
func NeighboursQuery(bucket string, q Query, nodes []string) string {
	return rangeFilter(bucket, q, influx.Pod) + nodeFilter(nodes) +
		fmt.Sprintf("  |> filter(fn: (r) => not (r.namespace == %s and r.workload == %s))\n", FluxString(q.Namespace), FluxString(q.Workload)) +
		fieldFilter(neighbourFields) +
		"  |> group(columns: [\"namespace\", \"pod\", \"node\", \"_field\"])\n  |> last()\n" +
		"  |> pivot(rowKey: [\"namespace\", \"pod\", \"node\", \"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n"
}

// NodesQuery returns each listed node's newest values, one row per node. nodes must not
// be empty.
func NodesQuery(bucket string, q Query, nodes []string) string {
	return rangeFilter(bucket, q, influx.Node) + nodeFilter(nodes) + fieldFilter(nodeFields) +
		"  |> group(columns: [\"node\", \"_field\"])\n  |> last()\n" +
		"  |> pivot(rowKey: [\"node\", \"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n"
}

// Snapshot implements Store.
func (f *Flux) Snapshot(ctx context.Context, q Query) (measurement.Workload, error) {
	if err := q.Validate(); err != nil {
		return measurement.Workload{}, err
	}
	var rates []decide.Sample
	last := map[string]float64{}
	var lastTime time.Time
	err := f.each(ctx, WorkloadQuery(f.Bucket, q), func(r *query.FluxRecord) {
		rates = append(rates, decide.Sample{Time: r.Time(), Rate: num(r, influx.FieldArrivalRate)})
		for _, k := range workloadFields[1:] {
			last[k] = num(r, k)
		}
		lastTime = r.Time()
	})
	if err != nil {
		return measurement.Workload{}, err
	}
	if len(rates) == 0 {
		return measurement.Workload{}, ErrNoData
	}
	// The newest point's latency and service buckets join its other fields;
	// without them the rest of the measurement stands.
	bucketsErr := f.readBuckets(ctx, q, lastTime, last)
	podTime := func(p podRow) time.Time { return p.time }
	latest := map[string]podRow{}
	// Pods, nodes and neighbours: their newest values only, looked for within
	// q.Latest of the newest workload point.
	lq := q.latestQuery(lastTime)
	err = f.each(ctx, PodsQuery(f.Bucket, lq), func(r *query.FluxRecord) {
		// The pivot keeps one row per pod and time; fields written at an older time
		// (none in practice: every field is written together) give an older row.
		p := podRowFrom(str(r, influx.TagPod), str(r, influx.TagNode), r.Time(), func(f string) float64 { return num(r, f) })
		newer(latest, p.name, p, podTime)
	})
	if err != nil {
		return measurement.Workload{}, err
	}
	pods := values(latest)
	names := nodeNames(q, pods)
	nodes := map[string]nodeRow{}
	neighbours := map[string]podRow{}
	if len(names) > 0 {
		err = f.each(ctx, NodesQuery(f.Bucket, lq, names), func(r *query.FluxRecord) {
			n := nodeRow{name: str(r, influx.TagNode), time: r.Time(), used: num(r, influx.FieldCPUUsage), allocatable: num(r, influx.FieldCPUAllocatable)}
			newer(nodes, n.name, n, func(n nodeRow) time.Time { return n.time })
		})
		if err != nil {
			return measurement.Workload{}, err
		}
	}
	// Neighbours matter only on the nodes the workload's pods run on (a hot node is
	// one of those); reading them there bounds the query on a big cluster.
	if hosts := nodeNames(Query{}, pods); len(hosts) > 0 {
		err = f.each(ctx, NeighboursQuery(f.Bucket, lq, hosts), func(r *query.FluxRecord) {
			p := podRow{name: str(r, influx.TagNamespace) + "/" + str(r, influx.TagPod), node: str(r, influx.TagNode), time: r.Time(),
				cpuUsage: num(r, influx.FieldCPUUsage), req: num(r, influx.FieldCPURequest), lim: num(r, influx.FieldCPULimit)}
			newer(neighbours, p.name, p, podTime)
		})
		if err != nil {
			return measurement.Workload{}, err
		}
	}
	w := assemble(q, rates, last, lastTime, pods, values(neighbours), values(nodes))
	if bucketsErr != nil {
		// One read of both histograms: both are lost, nothing else.
		w.LatencyBuckets, w.LatencyBucketsError = nil, bucketsErr.Error()
		w.ServiceBuckets, w.ServiceBucketsError = nil, bucketsErr.Error()
	}
	return w, nil
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
	v, _ := number(r.ValueByKey(k))
	return v
}

// number is a field value as a float64: InfluxDB returns floats, integers or
// unsigned integers; false (and 0) for anything else.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func str(r *query.FluxRecord, k string) string {
	s, _ := r.ValueByKey(k).(string)
	return s
}
