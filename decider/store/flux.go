package store

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/query"
	"golang.org/x/sync/errgroup"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
)

// Flux reads snapshots from InfluxDB with Flux queries (InfluxDB 1.8 with
// flux-enabled, or 2.x). Bucket is "db/rp" on 1.8.
type Flux struct {
	Query  api.QueryAPI
	Bucket string

	// sequential reads a round's queries one after the other, as Snapshot did
	// until 2026-11-29: only BenchmarkFluxSnapshot sets it, to measure what
	// reading them at once saves in the same run.
	sequential bool
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

// WorkloadQuery returns the workload's λ history in the window, the
// arrival_rate of each of its points, oldest first. The point's other fields
// are read at the newest point alone (NewestQuery): until 2026-11-29 this
// read every field of every point in the window, pivoted into rows, and the
// default window grew from one hour to six (measurement.DefaultWindow).
func WorkloadQuery(bucket string, q Query) string {
	return rangeFilter(bucket, q, influx.Workload) + workloadFilter(q) + fieldFilter(workloadFields[:1]) +
		"  |> group()\n  |> keep(columns: [\"_time\", \"_value\"])\n  |> sort(columns: [\"_time\"])\n"
}

// NewestQuery returns the fields but λ (workloadFields) of the workload's
// point at at, the newest WorkloadQuery read, one record per field.
func NewestQuery(bucket string, q Query, at time.Time) string {
	return pointRange(bucket, at) + workloadFilter(q) + fieldFilter(workloadFields[1:]) +
		"  |> keep(columns: [\"_field\", \"_value\"])\n"
}

// pointRange is the head of a query of the workload points at at alone.
func pointRange(bucket string, at time.Time) string {
	return fmt.Sprintf("from(bucket: %s)\n  |> range(start: %s, stop: %s)\n  |> filter(fn: (r) => r._measurement == %s)\n",
		FluxString(bucket), fluxTime(at), fluxTime(at.Add(time.Nanosecond)), FluxString(influx.Workload))
}

// PodsQuery returns each pod's newest value of every field, one row per pod.
func PodsQuery(bucket string, q Query) string {
	return rangeFilter(bucket, q, influx.Pod) + workloadFilter(q) + fieldFilter(podFields) +
		"  |> group(columns: [\"pod\", \"node\", \"_field\"])\n  |> last()\n" +
		"  |> pivot(rowKey: [\"pod\", \"node\", \"_time\"], columnKey: [\"_field\"], valueColumn: \"_value\")\n"
}

// NeighboursQuery returns the newest CPU of every other workload's pod on the listed
// nodes, one row per pod. nodes must not be empty. Every filter is of comparisons
// InfluxDB pushes down to its storage read, the fields' included: "not the workload"
// is written r.namespace != … or r.workload != … rather than not (… and …), which
// it evaluates over every field of every pod on the nodes instead (the query took
// 1.8 × as long on BenchmarkFluxSnapshot's data).
func NeighboursQuery(bucket string, q Query, nodes []string) string {
	return rangeFilter(bucket, q, influx.Pod) + nodeFilter(nodes) + fieldFilter(neighbourFields) +
		fmt.Sprintf("  |> filter(fn: (r) => r.namespace != %s or r.workload != %s)\n", FluxString(q.Namespace), FluxString(q.Workload)) +
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

// Snapshot implements Store. It reads in three rounds, the queries of a round
// at once: InfluxDB 1.8 spends 17-77 ms on any Flux query however small, so
// the five queries one after the other cost a snapshot 100-120 ms even idle,
// and the controller's decision waits for them. Each round needs what the one
// before read: the workload points give the newest point's time, which the
// buckets and the pods are read at; the pods give the nodes they run on, whose
// nodes and neighbours are read then.
func (f *Flux) Snapshot(ctx context.Context, q Query) (measurement.Workload, error) {
	if err := q.Validate(); err != nil {
		return measurement.Workload{}, err
	}
	rates, lastTime, err := f.readWorkload(ctx, q)
	if err != nil {
		return measurement.Workload{}, err
	}
	// Pods, nodes and neighbours: their newest values only, looked for within
	// q.Latest of the newest workload point.
	lq := q.latestQuery(lastTime)
	var pods []podRow
	var last, buckets map[string]float64
	var bucketsErr error
	err = f.concurrently(ctx,
		func(ctx context.Context) (err error) {
			last, err = f.readNewestPoint(ctx, q, lastTime)
			return err
		},
		// The newest point's latency and service buckets join its other fields
		// once the round is read; without them the rest of the measurement
		// stands, so their error fails nothing and cancels no other read.
		func(ctx context.Context) error {
			buckets, bucketsErr = f.readBuckets(ctx, q, lastTime)
			return nil
		},
		func(ctx context.Context) (err error) {
			pods, err = f.readPods(ctx, lq)
			return err
		},
	)
	if err != nil {
		return measurement.Workload{}, err
	}
	maps.Copy(last, buckets)
	var nodes []nodeRow
	var neighbours []podRow
	err = f.concurrently(ctx,
		func(ctx context.Context) (err error) {
			nodes, err = f.readNodes(ctx, lq, nodeNames(q, pods))
			return err
		},
		// Neighbours matter only on the nodes the workload's pods run on (a hot
		// node is one of those); reading them there bounds the query on a big
		// cluster.
		func(ctx context.Context) (err error) {
			neighbours, err = f.readNeighbours(ctx, lq, nodeNames(Query{}, pods))
			return err
		},
	)
	if err != nil {
		return measurement.Workload{}, err
	}
	w := assemble(q, rates, last, lastTime, pods, neighbours, nodes)
	if bucketsErr != nil {
		// One read of both histograms: both are lost, nothing else.
		w.LatencyBuckets, w.LatencyBucketsError = nil, bucketsErr.Error()
		w.ServiceBuckets, w.ServiceBucketsError = nil, bucketsErr.Error()
	}
	return w, nil
}

// concurrently runs a round's reads at once and returns when every one has
// returned, with the first error any returned. That error fails the snapshot,
// so it cancels the context the others read with: what they would read is
// lost anyway, and they would hold InfluxDB and a connection for nothing.
// With f.sequential the reads run one after the other instead.
func (f *Flux) concurrently(ctx context.Context, reads ...func(context.Context) error) error {
	if f.sequential {
		for _, read := range reads {
			if err := read(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, read := range reads {
		g.Go(func() error { return read(ctx) })
	}
	return g.Wait()
}

// readWorkload reads the workload's λ history in q's window (WorkloadQuery),
// oldest first, and the newest point's time. No point is ErrNoData.
func (f *Flux) readWorkload(ctx context.Context, q Query) (rates []decide.Sample, lastTime time.Time, err error) {
	err = f.each(ctx, WorkloadQuery(f.Bucket, q), func(r *query.FluxRecord) {
		v, _ := number(r.Value())
		rates = append(rates, decide.Sample{Time: r.Time(), Rate: v})
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("store: workload points: %w", err)
	}
	if len(rates) == 0 {
		return nil, time.Time{}, ErrNoData
	}
	return rates, rates[len(rates)-1].Time, nil
}

// readNewestPoint reads the fields but λ of the workload's point at at
// (NewestQuery); one the point lacks is absent (0).
func (f *Flux) readNewestPoint(ctx context.Context, q Query, at time.Time) (map[string]float64, error) {
	fields := map[string]float64{}
	err := f.each(ctx, NewestQuery(f.Bucket, q, at), func(r *query.FluxRecord) {
		fields[r.Field()], _ = number(r.Value())
	})
	if err != nil {
		return nil, fmt.Errorf("store: newest workload point: %w", err)
	}
	return fields, nil
}

// readPods reads each of the workload's pods' newest values (PodsQuery).
func (f *Flux) readPods(ctx context.Context, q Query) ([]podRow, error) {
	// The pivot keeps one row per pod and time; fields written at an older time
	// (none in practice: every field is written together) give an older row.
	return readNewest(ctx, f, "pods", PodsQuery(f.Bucket, q), podTime, func(r *query.FluxRecord) (string, podRow) {
		p := podRowFrom(str(r, influx.TagPod), str(r, influx.TagNode), r.Time(), func(f string) float64 { return num(r, f) })
		return p.name, p
	})
}

// readNodes reads the newest values of the named nodes (NodesQuery); none
// named, it reads nothing.
func (f *Flux) readNodes(ctx context.Context, q Query, names []string) ([]nodeRow, error) {
	if len(names) == 0 {
		return nil, nil
	}
	return readNewest(ctx, f, "nodes", NodesQuery(f.Bucket, q, names), nodeTime, func(r *query.FluxRecord) (string, nodeRow) {
		n := nodeRow{name: str(r, influx.TagNode), time: r.Time(), used: num(r, influx.FieldCPUUsage), allocatable: num(r, influx.FieldCPUAllocatable)}
		return n.name, n
	})
}

// readNeighbours reads the newest CPU of every other workload's pod on the
// named nodes (NeighboursQuery); none named, it reads nothing.
func (f *Flux) readNeighbours(ctx context.Context, q Query, hosts []string) ([]podRow, error) {
	if len(hosts) == 0 {
		return nil, nil
	}
	return readNewest(ctx, f, "neighbours", NeighboursQuery(f.Bucket, q, hosts), podTime, func(r *query.FluxRecord) (string, podRow) {
		p := podRow{name: str(r, influx.TagNamespace) + "/" + str(r, influx.TagPod), node: str(r, influx.TagNode), time: r.Time(),
			cpuUsage: num(r, influx.FieldCPUUsage), req: num(r, influx.FieldCPURequest), lim: num(r, influx.FieldCPULimit)}
		return p.name, p
	})
}

// readNewest reads flux's records as rows (row gives each one's key and row)
// and keeps each key's newest by at; a failed read is named by part.
func readNewest[R any](ctx context.Context, f *Flux, part, flux string, at func(R) time.Time, row func(*query.FluxRecord) (string, R)) ([]R, error) {
	newest := map[string]R{}
	err := f.each(ctx, flux, func(rec *query.FluxRecord) {
		key, r := row(rec)
		newer(newest, key, r, at)
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", part, err)
	}
	return values(newest), nil
}

// each runs flux and calls fn on each record. Its error says whether the query
// or its result failed; the caller names the part of the read it was
// ("store: pods: flux query: …").
func (f *Flux) each(ctx context.Context, flux string, fn func(*query.FluxRecord)) error {
	res, err := f.Query.Query(ctx, flux)
	if err != nil {
		return fmt.Errorf("flux query: %w", err)
	}
	defer res.Close()
	for res.Next() {
		fn(res.Record())
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("flux result: %w", err)
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
