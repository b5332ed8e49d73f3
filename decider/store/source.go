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
	// MaxClockSkew is how far ahead of the decider's clock the collector's may be and
	// its points still be read (default 10 min). The measurement's DataTime then lies
	// in the decider's future, which the controller reports as a ClockSkew condition;
	// the data itself is used.
	MaxClockSkew time.Duration
}

// DefaultMaxClockSkew is Source.MaxClockSkew's default.
const DefaultMaxClockSkew = 10 * time.Minute

// Measure implements controller.MetricsSource.
func (s Source) Measure(ctx context.Context, q controller.WorkloadQuery) (controller.Measurement, error) {
	maxAge := s.MaxPodAge
	if maxAge <= 0 {
		maxAge = time.Minute
	}
	ahead := s.MaxClockSkew
	if ahead <= 0 {
		ahead = DefaultMaxClockSkew
	}
	snap, err := s.Store.Snapshot(ctx, Query{Namespace: q.Namespace, Workload: q.Workload, Now: q.Now,
		Window: s.Window, Percentile: q.Percentile, MaxPodAge: maxAge, Ahead: ahead})
	if err != nil {
		if errors.Is(err, ErrNoData) {
			return controller.Measurement{}, fmt.Errorf("no measurements of %s/%s between %s before and %s after the decider's now: "+
				"is qas-collector running (and its clock within %[4]s of the decider's) and the sidecar injected?", q.Namespace, q.Workload, s.Window, ahead)
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
		Pods: map[string]controller.PodUsage{}, Nodes: map[string]controller.NodeUsage{},
	}
	fresh := map[string]bool{}
	for _, p := range snap.Pods {
		if !current[p.Name] {
			continue // a pod that has gone since; its old numbers describe nothing now
		}
		m.Pods[p.Name] = controller.PodUsage{CPUCores: p.CPUUsage, ServiceTime: p.ServiceTime}
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
