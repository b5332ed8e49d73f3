// Package store is the decider's side of InfluxDB: Flux reads what qas-collector
// wrote and returns it as the measurement.Workload the controller consumes (Memory
// holds the same points in process, for the simulator and unit tests); Source judges
// whether those measurements cover the workload, and InfluxSink writes each decision
// back.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/stats"
)

// Store returns one workload's measurements over a window ending at now.
type Store interface {
	// Snapshot fills ArrivalRates (the λ history in the window, oldest first),
	// ServiceTime, ServiceSCV and MeasuredLatency (the newest workload point), Pods
	// (each pod's newest point), Nodes (the newest point of each node the pods run
	// on or the query names), Neighbours (the newest point of every other
	// workload's pod on the nodes the pods run on) and DataTime (the newest workload point's
	// time). It judges nothing: Complete stays false and stale pods stay in
	// (measurement.Workload.Judge). It returns ErrNoData when the window holds no
	// workload point.
	Snapshot(ctx context.Context, q Query) (measurement.Workload, error)
}

// Query selects a workload and a window.
type Query struct {
	Namespace, Workload string
	Now                 time.Time
	Window              time.Duration
	// Percentile selects the measured latency reported: 50, 95 or 99 (the
	// percentiles the collector writes); 0 means 95. Any other percentile is not
	// measured, so MeasuredLatency stays 0 (unknown) rather than misleading.
	Percentile float64
	// Nodes are nodes to read besides those the workload's pods run on (migration
	// destinations).
	Nodes []string
	// Ahead extends the window past Now: points are timed by the collector's clock, and
	// a collector whose clock is ahead of the decider's writes points in the decider's
	// future. Reading them (DataTime then lies after Now) lets the decider report the
	// skew instead of seeing no data; 0 reads up to Now.
	Ahead time.Duration
	// Latest is how far before the newest workload point the pods', the
	// neighbours' and the nodes' newest values are looked for (0: the whole
	// Window). Only their newest value is read, and a pod's older than
	// Source.MaxPodAge before that point is dropped as stale
	// (measurement.Workload.Judge), so reading them over the λ history's
	// window (an hour) scanned every point of every pod for one value each.
	Latest time.Duration
}

// stop is the end of the window.
func (q Query) stop() time.Time { return q.Now.Add(q.Ahead) }

// latestStart is where the pods', neighbours' and nodes' reads begin, given
// the newest workload point's time: Latest before it, never before the
// window's start.
func (q Query) latestStart(newest time.Time) time.Time {
	start := q.Now.Add(-q.Window)
	if q.Latest <= 0 {
		return start
	}
	if s := newest.Add(-q.Latest); s.After(start) {
		return s
	}
	return start
}

// latestQuery is q with its window narrowed to begin at latestStart(newest),
// for the queries that read only the newest value of each pod and node.
func (q Query) latestQuery(newest time.Time) Query {
	lq := q
	lq.Window = q.Now.Sub(q.latestStart(newest))
	return lq
}

// latencyField names the workload field holding the measured latency at the query's
// percentile, or "" when the collector does not write that percentile.
func (q Query) latencyField() string {
	switch q.Percentile {
	case 0, 95:
		return influx.FieldLatencyP95
	case 50:
		return influx.FieldLatencyP50
	case 99:
		return influx.FieldLatencyP99
	}
	return ""
}

// ErrNoData means the window holds no measurement of the workload.
var ErrNoData = errors.New("store: no measurements in the window")

// validWorkloadAt checks what every read names: the workload and the time it is
// read at.
func validWorkloadAt(namespace, workload string, now time.Time) error {
	switch {
	case namespace == "":
		return errors.New("store: namespace is empty")
	case workload == "":
		return errors.New("store: workload is empty")
	case now.IsZero():
		return errors.New("store: now is zero")
	}
	return nil
}

// Validate checks a query.
func (q Query) Validate() error {
	if err := validWorkloadAt(q.Namespace, q.Workload, q.Now); err != nil {
		return err
	}
	switch {
	case q.Window <= 0:
		return fmt.Errorf("store: window %s is not positive", q.Window)
	case q.Ahead < 0:
		return fmt.Errorf("store: ahead %s is negative", q.Ahead)
	case q.Latest < 0:
		return fmt.Errorf("store: latest %s is negative", q.Latest)
	case q.Percentile < 0 || q.Percentile >= 100:
		return fmt.Errorf("store: percentile %v is outside [0, 100)", q.Percentile)
	}
	return nil
}

// podRow and nodeRow are the newest values of a pod and a node. A neighbour's name
// is "namespace/name".
type podRow struct {
	name, node                  string
	time                        time.Time
	service, cpuUsage, req, lim float64
	// The queue: gauges at the interval's end, the in-flight mean over it, and
	// the pod's latency at p50/p95/p99 by field name.
	inFlight, waiting, inFlightMean float64
	latency                         map[string]float64
}

// podQueueFields are the pod fields read for the queue.
var podQueueFields = []string{influx.FieldInFlight, influx.FieldWaiting, influx.FieldInFlightMean,
	influx.FieldLatencyP50, influx.FieldLatencyP95, influx.FieldLatencyP99}

// podRowFrom fills a podRow from a field getter.
func podRowFrom(name, node string, at time.Time, get func(string) float64) podRow {
	return podRow{name: name, node: node, time: at,
		service: get(influx.FieldServiceMean), cpuUsage: get(influx.FieldCPUUsage),
		req: get(influx.FieldCPURequest), lim: get(influx.FieldCPULimit),
		inFlight: get(influx.FieldInFlight), waiting: get(influx.FieldWaiting), inFlightMean: get(influx.FieldInFlightMean),
		latency: map[string]float64{
			influx.FieldLatencyP50: get(influx.FieldLatencyP50),
			influx.FieldLatencyP95: get(influx.FieldLatencyP95),
			influx.FieldLatencyP99: get(influx.FieldLatencyP99),
		}}
}

type nodeRow struct {
	name              string
	time              time.Time
	used, allocatable float64
}

// neighbour is another workload's pod as a measurement: only its CPU matters.
func (p podRow) neighbour() measurement.Pod {
	return measurement.Pod{Name: p.name, Node: p.node, Time: p.time, CPUUsage: p.cpuUsage,
		CPURequest: int64(p.req*1000 + 0.5), CPULimit: int64(p.lim*1000 + 0.5)}
}

// pod is the row as a measurement; latencyField selects the pod's measured latency
// ("" leaves it 0: that percentile is not measured).
func (p podRow) pod(latencyField string) measurement.Pod {
	return measurement.Pod{Name: p.name, Node: p.node, Time: p.time, ServiceTime: p.service, CPUUsage: p.cpuUsage,
		CPURequest: int64(p.req*1000 + 0.5), CPULimit: int64(p.lim*1000 + 0.5),
		InService: p.inFlight, Queued: p.waiting, InFlightMean: p.inFlightMean, MeasuredLatency: p.latency[latencyField]}
}

// nodeNames are the nodes to read: the query's and those the pods run on, sorted.
func nodeNames(q Query, pods []podRow) []string {
	names := slices.Clone(q.Nodes)
	for _, p := range pods {
		if p.node != "" {
			names = append(names, p.node)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// maxRateCV2 bounds a point's arrival_rate_cv2: the collector's estimates of
// real counts are within a few units; a point beyond (written by something
// else) is left out rather than let one value sway the engine's average.
const maxRateCV2 = 1e4

// rateCV2 is the newest workload point's arrival_rate_cv2 and the pairs of
// seconds it is over (arrival_rate_pairs), checked: the engine averages the
// intervals itself, each once (decide/mixture.go), as the simulator's qas
// hands it each interval's. A point without them (none measured, or a
// collector from before them), with a count of pairs that is not a finite
// positive number or with a cv² that is not a number or beyond maxRateCV2,
// gives none (0, 0). (Until 2026-11-29 the store averaged the whole window's
// points, so the controller's average followed a change of traffic over the
// window, an hour, where the simulator's follows it over a few hundred pairs
// of seconds.)
func rateCV2(cv2, pairs float64) (float64, float64) {
	if !(pairs > 0) || math.IsInf(pairs, 0) || math.IsNaN(cv2) || math.Abs(cv2) > maxRateCV2 {
		return 0, 0
	}
	return cv2, pairs
}

// assemble builds the measurement from the rows both implementations extract.
func assemble(q Query, rates []decide.Sample, last map[string]float64, lastTime time.Time, pods, neighbours []podRow, nodes []nodeRow) measurement.Workload {
	w := measurement.Workload{
		ArrivalRates: rates, DataTime: lastTime,
		ServiceTime: last[influx.FieldServiceMean], ServiceSCV: last[influx.FieldServiceSCV],
		ServiceSamples:   serviceSamples(last),
		ProxyClockOffset: last[influx.FieldClockOffset],
	}
	w.OverflowShare, w.FrontQueue, w.ExpiredRequeuedRate, w.ExpiredRelayedRate, w.FrontRefusedRate, w.PooledError = pooledFields(last)
	if f := q.latencyField(); f != "" {
		w.MeasuredLatency = last[f]
	}
	// The latency quantiles the collector writes, for the closed loop (only when all
	// three were measured: an idle interval has none).
	if p50, p95, p99 := last[influx.FieldLatencyP50], last[influx.FieldLatencyP95], last[influx.FieldLatencyP99]; p50 > 0 && p95 >= p50 && p99 >= p95 {
		w.MeasuredQuantiles = []decide.LatencyQuantile{{Percentile: 50, Seconds: p50}, {Percentile: 95, Seconds: p95}, {Percentile: 99, Seconds: p99}}
	}
	w.LatencyBuckets, w.LatencyBucketsError = latencyHistogram.buckets(last)
	w.ServiceQuantiles = serviceQuantiles(last)
	w.ServiceBuckets, w.ServiceBucketsError = serviceHistogram.buckets(last)
	w.RateCV2, w.RateCV2Pairs = rateCV2(last[influx.FieldArrivalRateCV2], last[influx.FieldArrivalRatePairs])
	// The newest point is one scrape interval: the fast path's short window.
	if n := len(rates); n >= 2 && rates[n-1].Time.After(rates[n-2].Time) {
		w.ShortArrivalRate, w.ShortWindow = rates[n-1].Rate, rates[n-1].Time.Sub(rates[n-2].Time)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].name < pods[j].name })
	for _, p := range pods {
		w.Pods = append(w.Pods, p.pod(q.latencyField()))
	}
	sort.Slice(neighbours, func(i, j int) bool { return neighbours[i].name < neighbours[j].name })
	for _, p := range neighbours {
		w.Neighbours = append(w.Neighbours, p.neighbour())
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].name < nodes[j].name })
	for _, n := range nodes {
		w.Nodes = append(w.Nodes, measurement.Node{Name: n.name, Time: n.time, UsedCPU: n.used, AllocatableCPU: int64(n.allocatable*1000 + 0.5)})
	}
	return w
}

// pooledFields reads the newest workload point's pooled data plane fields (0
// when absent: a workload that does not pool). A value that is not a finite
// number ≥ 0 (an overflow share also ≤ 1) is no measurement: it reads as 0 and
// problem names it, and the other fields stand.
func pooledFields(last map[string]float64) (share, queue, requeued, relayed, refused float64, problem string) {
	var bad []string
	get := func(field string, most float64) float64 {
		v := last[field]
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			bad = append(bad, fmt.Sprintf("%s = %v is not a finite number ≥ 0: read as 0", field, v))
			return 0
		case v > most:
			bad = append(bad, fmt.Sprintf("%s = %v is above %v: read as 0", field, v, most))
			return 0
		}
		return v
	}
	share = get(influx.FieldOverflowShare, 1)
	queue = get(influx.FieldFrontQueueLength, math.MaxFloat64)
	requeued = get(influx.FieldExpiredRequeuedRate, math.MaxFloat64)
	relayed = get(influx.FieldExpiredRelayedRate, math.MaxFloat64)
	refused = get(influx.FieldFrontRefusedFullRate, math.MaxFloat64)
	return share, queue, requeued, relayed, refused, strings.Join(bad, "; ")
}

// serviceSamples is the newest workload point's service_samples, or 0
// (unknown: the engine takes λ × the interval) when it is absent (a collector
// that predates it), negative or not finite.
func serviceSamples(last map[string]float64) float64 {
	v := last[influx.FieldServiceSamples]
	if !(v >= 0) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// serviceQuantiles are the newest workload point's service-time quantiles, or
// nil unless every one was written, positive and finite, and they ascend (an
// idle interval writes none; anything else is not a distribution the model
// can use, and it falls back to exponential service).
func serviceQuantiles(last map[string]float64) []decide.LatencyQuantile {
	out := make([]decide.LatencyQuantile, len(influx.ServiceQuantileFields))
	for i, f := range influx.ServiceQuantileFields {
		v := last[f]
		if !(v > 0) || math.IsInf(v, 0) || (i > 0 && v < out[i-1].Seconds) {
			return nil
		}
		out[i] = decide.LatencyQuantile{Percentile: stats.ServicePercentiles[i], Seconds: v}
	}
	return out
}

// podTime and nodeTime are when a pod's or a node's row was written: what
// newer keeps the newest by.
func podTime(p podRow) time.Time   { return p.time }
func nodeTime(n nodeRow) time.Time { return n.time }

// newer keeps, per key, the row with the newest time.
func newer[R any](m map[string]R, key string, r R, at func(R) time.Time) {
	if old, ok := m[key]; !ok || !at(r).Before(at(old)) {
		m[key] = r
	}
}

func values[R any](m map[string]R) []R {
	out := make([]R, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	return out
}
