package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qas-dev/qas/decider/measurement"
)

// Source is the controller's measurement.Source over the collector's store: it reads
// the workload's window and judges whether the data covers every Ready pod (and node,
// when the decision uses node CPU).
type Source struct {
	Store Store
	// Window is how far back the arrival-rate history reaches.
	Window time.Duration
	// MaxPodAge: a pod whose newest point is older than the workload's newest
	// point by more than this counts as missing (default 1 min).
	MaxPodAge time.Duration
}

// Measure implements measurement.Source.
func (s Source) Measure(ctx context.Context, q measurement.Query) (measurement.Workload, error) {
	maxAge := s.MaxPodAge
	if maxAge <= 0 {
		maxAge = time.Minute
	}
	w, err := s.Store.Snapshot(ctx, Query{Namespace: q.Namespace, Workload: q.Workload, Now: q.Now,
		Window: s.Window, Percentile: q.Percentile, Nodes: q.Nodes})
	if err != nil {
		if errors.Is(err, ErrNoData) {
			return measurement.Workload{}, fmt.Errorf("no measurements of %s/%s in the last %s: is qas-collector running and the sidecar injected?", q.Namespace, q.Workload, s.Window)
		}
		return measurement.Workload{}, fmt.Errorf("read measurements of %s/%s: %w", q.Namespace, q.Workload, err)
	}
	return w.Judge(q, maxAge), nil
}
