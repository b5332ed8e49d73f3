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
	// RateWindow is the long window the engine reads λ over: the collector's
	// points (one per scrape) are merged into windows of this length laid
	// back from the newest (measurement.RateWindows), as the simulator's qas
	// reads them, while the newest point alone stays the short window. 0 is
	// measurement.DefaultRateWindow; a negative value keeps the points as
	// they are.
	RateWindow time.Duration
	// MaxPodAge: a pod whose newest point is older than the workload's newest
	// point by more than this counts as missing (default 1 min).
	MaxPodAge time.Duration
	// MaxClockSkew is how far ahead of the decider's clock the collector's may be and
	// its points still be read (default 10 min). The measurement's DataTime then lies
	// in the decider's future, which the controller reports as a ClockSkew condition;
	// the data itself is used.
	MaxClockSkew time.Duration
	// History, when set, adds each workload's long λ history (the recurring
	// burst detector's input). A failed read of it leaves the history empty
	// (the engine is then reactive) and says why in HistoryError; the rest of
	// the measurement stands.
	History *LongHistory
}

// DefaultLatest is how far before the newest workload point the source looks
// for each pod's and node's newest values (Query.Latest) unless MaxPodAge
// asks for more: pods older than MaxPodAge are dropped anyway, and nodes are
// kept at any age within it (metrics-server stamps a node's usage with the
// end of its own window, a minute or so behind the proxies' points).
const DefaultLatest = 5 * time.Minute

// DefaultMaxClockSkew is Source.MaxClockSkew's default.
const DefaultMaxClockSkew = 10 * time.Minute

// Measure implements measurement.Source.
func (s Source) Measure(ctx context.Context, q measurement.Query) (measurement.Workload, error) {
	maxAge := s.MaxPodAge
	if maxAge <= 0 {
		maxAge = time.Minute
	}
	ahead := s.MaxClockSkew
	if ahead <= 0 {
		ahead = DefaultMaxClockSkew
	}
	w, err := s.Store.Snapshot(ctx, Query{Namespace: q.Namespace, Workload: q.Workload, Now: q.Now,
		Window: s.Window, Percentile: q.Percentile, Nodes: q.Nodes, Ahead: ahead, Latest: max(DefaultLatest, maxAge)})
	if err != nil {
		if errors.Is(err, ErrNoData) {
			return measurement.Workload{}, fmt.Errorf("no measurements of %s/%s between %s before and %s after the decider's now: "+
				"is qas-collector running (and its clock within %[4]s of the decider's) and the sidecar injected?", q.Namespace, q.Workload, s.Window, ahead)
		}
		return measurement.Workload{}, fmt.Errorf("read measurements of %s/%s: %w", q.Namespace, q.Workload, err)
	}
	if s.History != nil {
		h, err := s.History.Read(ctx, q.Namespace, q.Workload, q.Now)
		if err != nil {
			w.HistoryError = fmt.Sprintf("read the long λ history of %s/%s: %v", q.Namespace, q.Workload, err)
		} else {
			w.History = h
		}
	}
	rw := s.RateWindow
	if rw == 0 {
		rw = measurement.DefaultRateWindow
	}
	// The window is (now − window, now]: a point at its very start, which the
	// range reads, ends an interval that began before it.
	start := q.Now.Add(-s.Window)
	first := 0
	for first < len(w.ArrivalRates)-1 && !w.ArrivalRates[first].Time.After(start) {
		first++
	}
	w.ArrivalRates = measurement.RateWindows(w.ArrivalRates[first:], rw)
	return w.Judge(q, maxAge), nil
}
