// Package store is the decider's read side of InfluxDB: Flux reads what qas-collector
// wrote and turns it into the decide.Snapshot the decision engine consumes (Memory holds
// the same points in process, for the simulator and unit tests); Source judges whether
// those measurements cover the workload, and InfluxSink writes each decision back.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qas-dev/qas/decider/decide"
)

// Store returns one workload's measurements over a window ending at now.
type Store interface {
	// Snapshot fills ArrivalRates (the λ history in the window, oldest first),
	// ServiceTime, ServiceSCV and MeasuredLatency (the newest workload point), Pods
	// (each pod's newest point: node, service time, CPU), Nodes (the newest point of
	// each node the pods run on) and DataTime (the newest workload point's time).
	// It leaves Complete false, and the replica counts and init times zero: only
	// the controller knows how many pods there should be. It returns ErrNoData when
	// the window holds no workload point.
	Snapshot(ctx context.Context, q Query) (decide.Snapshot, error)
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
	// MaxPodAge leaves out pods whose newest point is older than the workload's newest
	// point by more than this (pods that are gone or no longer scraped); 0 keeps all.
	MaxPodAge time.Duration
}

// latencyField names the workload field holding the measured latency at the query's
// percentile, or "" when the collector does not write that percentile.
func (q Query) latencyField() string {
	switch q.Percentile {
	case 0, 95:
		return "latency_p95_seconds"
	case 50:
		return "latency_p50_seconds"
	case 99:
		return "latency_p99_seconds"
	}
	return ""
}

// ErrNoData means the window holds no measurement of the workload.
var ErrNoData = errors.New("store: no measurements in the window")

// Validate checks a query.
func (q Query) Validate() error {
	switch {
	case q.Namespace == "":
		return errors.New("store: namespace is empty")
	case q.Workload == "":
		return errors.New("store: workload is empty")
	case q.Now.IsZero():
		return errors.New("store: now is zero")
	case q.Window <= 0:
		return fmt.Errorf("store: window %s is not positive", q.Window)
	case q.Percentile < 0 || q.Percentile >= 100:
		return fmt.Errorf("store: percentile %v is outside [0, 100)", q.Percentile)
	}
	return nil
}

// podRow and nodeRow are the newest values of a pod and a node.
type podRow struct {
	name, node                  string
	time                        time.Time
	service, cpuUsage, req, lim float64
	// The queue: gauges at the interval's end, the in-flight mean over it, and
	// the pod's latency at p50/p95/p99.
	inFlight, waiting, inFlightMean float64
	latency                         map[string]float64
}

// podQueueFields are the pod fields read for the queue.
var podQueueFields = []string{"in_flight", "waiting", "in_flight_mean", "latency_p50_seconds", "latency_p95_seconds", "latency_p99_seconds"}

// podRowFrom fills a podRow from a field getter.
func podRowFrom(name, node string, at time.Time, get func(string) float64) podRow {
	return podRow{name: name, node: node, time: at,
		service: get("service_mean_seconds"), cpuUsage: get("cpu_usage_cores"),
		req: get("cpu_request_cores"), lim: get("cpu_limit_cores"),
		inFlight: get("in_flight"), waiting: get("waiting"), inFlightMean: get("in_flight_mean"),
		latency: map[string]float64{
			"latency_p50_seconds": get("latency_p50_seconds"),
			"latency_p95_seconds": get("latency_p95_seconds"),
			"latency_p99_seconds": get("latency_p99_seconds"),
		}}
}

type nodeRow struct {
	name              string
	used, allocatable float64
}

// assemble builds the snapshot from the rows both implementations extract.
func assemble(q Query, rates []decide.Sample, last map[string]float64, lastTime time.Time, pods []podRow, nodes []nodeRow) decide.Snapshot {
	s := decide.Snapshot{
		Now: q.Now, ArrivalRates: rates, DataTime: lastTime,
		ServiceTime: last["service_mean_seconds"], ServiceSCV: last["service_scv"],
	}
	if f := q.latencyField(); f != "" {
		s.MeasuredLatency = last[f]
	}
	// The latency quantiles the collector writes, for the closed loop (only
	// when all three were measured: an idle interval has none).
	if p50, p95, p99 := last["latency_p50_seconds"], last["latency_p95_seconds"], last["latency_p99_seconds"]; p50 > 0 && p95 >= p50 && p99 >= p95 {
		s.MeasuredQuantiles = []decide.LatencyQuantile{{Percentile: 50, Seconds: p50}, {Percentile: 95, Seconds: p95}, {Percentile: 99, Seconds: p99}}
	}
	// The newest point is one scrape interval: the fast path's short window.
	if n := len(rates); n >= 2 && rates[n-1].Time.After(rates[n-2].Time) {
		s.ShortArrivalRate, s.ShortWindow = rates[n-1].Rate, rates[n-1].Time.Sub(rates[n-2].Time)
	}
	for _, p := range pods {
		if q.MaxPodAge > 0 && lastTime.Sub(p.time) > q.MaxPodAge {
			continue
		}
		pod := decide.Pod{
			Name: p.name, Node: p.node, Owned: true, ServiceTime: p.service, CPUUsage: p.cpuUsage,
			CPURequest: int64(p.req*1000 + 0.5), CPULimit: int64(p.lim*1000 + 0.5),
			InService: p.inFlight, Queued: p.waiting, InFlightMean: p.inFlightMean,
		}
		if f := q.latencyField(); f != "" {
			pod.MeasuredLatency = p.latency[f]
		}
		s.Pods = append(s.Pods, pod)
	}
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, decide.Node{Name: n.name, UsedCPU: n.used, AllocatableCPU: int64(n.allocatable*1000 + 0.5)})
	}
	return s
}
