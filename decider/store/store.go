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
	// Ahead extends the window past Now: points are timed by the collector's clock, and
	// a collector whose clock is ahead of the decider's writes points in the decider's
	// future. Reading them (DataTime then lies after Now) lets the decider report the
	// skew instead of seeing no data; 0 reads up to Now.
	Ahead time.Duration
}

// stop is the end of the window.
func (q Query) stop() time.Time { return q.Now.Add(q.Ahead) }

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
	case q.Ahead < 0:
		return fmt.Errorf("store: ahead %s is negative", q.Ahead)
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
	for _, p := range pods {
		if q.MaxPodAge > 0 && lastTime.Sub(p.time) > q.MaxPodAge {
			continue
		}
		s.Pods = append(s.Pods, decide.Pod{
			Name: p.name, Node: p.node, Owned: true, ServiceTime: p.service, CPUUsage: p.cpuUsage,
			CPURequest: int64(p.req*1000 + 0.5), CPULimit: int64(p.lim*1000 + 0.5),
		})
	}
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, decide.Node{Name: n.name, UsedCPU: n.used, AllocatableCPU: int64(n.allocatable*1000 + 0.5)})
	}
	return s
}
