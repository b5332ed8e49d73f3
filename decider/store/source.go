package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qas-dev/qas/decider/controller"
)

// Source is the controller's MetricsSource over the collector's store: it reads
// the workload's window and judges whether the data covers every Ready pod (and node,
// when the decision uses node CPU).
type Source struct {
	Store Store
	// Window is how far back the arrival-rate history reaches.
	Window time.Duration
	// MaxPodAge: a Ready pod whose newest point is older than the workload's newest
	// point by more than this counts as missing (default 1 min).
	MaxPodAge time.Duration
}

// Measure implements controller.MetricsSource.
func (s Source) Measure(ctx context.Context, q controller.WorkloadQuery) (controller.Measurement, error) {
	maxAge := s.MaxPodAge
	if maxAge <= 0 {
		maxAge = time.Minute
	}
	snap, err := s.Store.Snapshot(ctx, Query{Namespace: q.Namespace, Workload: q.Workload, Now: q.Now,
		Window: s.Window, Percentile: q.Percentile, MaxPodAge: maxAge})
	if err != nil {
		if errors.Is(err, ErrNoData) {
			return controller.Measurement{}, fmt.Errorf("no measurements of %s/%s in the last %s: is qas-collector running and the sidecar injected?", q.Namespace, q.Workload, s.Window)
		}
		return controller.Measurement{}, fmt.Errorf("read measurements of %s/%s: %w", q.Namespace, q.Workload, err)
	}
	current := map[string]bool{}
	for _, p := range q.Pods {
		current[p] = true
	}
	m := controller.Measurement{
		ArrivalRates: snap.ArrivalRates, ServiceTime: snap.ServiceTime, ServiceSCV: snap.ServiceSCV,
		MeasuredLatency: snap.MeasuredLatency, DataTime: snap.DataTime,
		MeasuredQuantiles: snap.MeasuredQuantiles, LatencySamples: snap.LatencySamples,
		ShortArrivalRate: snap.ShortArrivalRate, ShortWindow: snap.ShortWindow,
		Pods: map[string]controller.PodUsage{}, Nodes: map[string]controller.NodeUsage{},
	}
	fresh := map[string]bool{}
	for _, p := range snap.Pods {
		if !current[p.Name] {
			continue // a pod that has gone since; its old numbers describe nothing now
		}
		m.Pods[p.Name] = controller.PodUsage{CPUCores: p.CPUUsage, ServiceTime: p.ServiceTime,
			InService: p.InService, Queued: p.Queued, InFlightMean: p.InFlightMean, MeasuredLatency: p.MeasuredLatency}
		fresh[p.Name] = true // the store left out pods with stale data
	}
	for _, n := range snap.Nodes {
		m.Nodes[n.Name] = controller.NodeUsage{CPUCores: n.UsedCPU}
	}
	m.Complete = true
	for _, p := range q.Ready {
		if !fresh[p] {
			m.Complete = false
		}
	}
	if q.NeedNodes {
		for _, p := range snap.Pods {
			if _, ok := m.Nodes[p.Node]; current[p.Name] && p.Node != "" && !ok {
				m.Complete = false
			}
		}
	}
	return m, nil
}
