package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/query"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
)

// The long λ history (issue #15 item 7): the recurring-burst detector needs
// hours to a day of λ, far more than a cycle's window. It is read downsampled
// (the mean of each Step, InfluxDB's aggregateWindow) and kept between cycles
// (LongHistory), so a cycle reads only the windows that completed since the
// last one.
const (
	// DefaultHistorySpan and DefaultHistoryStep are LongHistory's defaults: a
	// day of 1-minute means (1,440 samples per workload). A daily period needs
	// a longer span (three occurrences: more than two days).
	DefaultHistorySpan = 24 * time.Hour
	DefaultHistoryStep = time.Minute
	// MaxHistorySamples bounds Span/Step: a workload's history in memory.
	MaxHistorySamples = 100_000
	// historyReread is how many of the newest windows each refresh reads
	// again: a point the collector wrote late (a slow scrape, a retried
	// write) lands in a window already read.
	historyReread = 2
)

// HistoryQuery selects a workload's long λ history: the means of λ over the
// Step-long windows (aligned on the Unix epoch) that end in
// (From, Now truncated to Step], From being Now − Span unless later. Only
// complete windows: the one Now is in is left out.
type HistoryQuery struct {
	Namespace, Workload string
	Now                 time.Time
	Span, Step          time.Duration
	// From, when after Now − Span, starts the read later (a refresh).
	From time.Time
}

// Validate checks a history query.
func (q HistoryQuery) Validate() error {
	if err := validWorkloadAt(q.Namespace, q.Workload, q.Now); err != nil {
		return err
	}
	switch {
	case q.Step <= 0 || q.Step%time.Second != 0:
		return fmt.Errorf("store: history step %s is not a positive whole number of seconds", q.Step)
	case q.Span < q.Step:
		return fmt.Errorf("store: history span %s is shorter than its step %s", q.Span, q.Step)
	case q.Span/q.Step > MaxHistorySamples:
		return fmt.Errorf("store: history span %s over step %s is more than %d samples", q.Span, q.Step, MaxHistorySamples)
	}
	return nil
}

// bounds are the range read: [start, stop), both on the step.
func (q HistoryQuery) bounds() (start, stop time.Time) {
	stop = truncate(q.Now, q.Step)
	start = stop.Add(-q.Span)
	if f := truncate(q.From, q.Step); f.After(start) {
		start = f
	}
	return start, stop
}

// truncate rounds t down to a multiple of step since the Unix epoch (Flux's
// window alignment).
func truncate(t time.Time, step time.Duration) time.Time {
	ns := t.UnixNano()
	r := ns % int64(step)
	if r < 0 {
		r += int64(step)
	}
	return time.Unix(0, ns-r).UTC()
}

// HistoryStore reads a workload's long λ history; Flux and Memory implement it.
type HistoryStore interface {
	// History returns the step means, oldest first, each timed at its
	// window's end; windows without a point are left out.
	History(ctx context.Context, q HistoryQuery) ([]decide.Sample, error)
}

// HistoryFluxQuery is the Flux of a history read: λ's mean per step
// (aggregateWindow, timed at the window's end), over whole windows only.
func HistoryFluxQuery(bucket string, q HistoryQuery) string {
	start, stop := q.bounds()
	return fmt.Sprintf("from(bucket: %s)\n  |> range(start: %s, stop: %s)\n  |> filter(fn: (r) => r._measurement == %s)\n",
		FluxString(bucket), fluxTime(start), fluxTime(stop), FluxString(influx.Workload)) +
		workloadFilter(Query{Namespace: q.Namespace, Workload: q.Workload}) +
		fieldFilter([]string{influx.FieldArrivalRate}) +
		fmt.Sprintf("  |> group()\n  |> aggregateWindow(every: %ds, fn: mean, createEmpty: false)\n  |> sort(columns: [\"_time\"])\n",
			int64(q.Step/time.Second))
}

// History implements HistoryStore.
func (f *Flux) History(ctx context.Context, q HistoryQuery) ([]decide.Sample, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	start, stop := q.bounds()
	var out []decide.Sample
	err := f.each(ctx, HistoryFluxQuery(f.Bucket, q), func(r *query.FluxRecord) {
		// Only windows that end inside (start, stop]: InfluxDB 1.8's Flux
		// also labels a window ending at the range's start (seen in
		// TestFluxHistoryMatchesMemory).
		if v, ok := r.Value().(float64); ok && r.Time().After(start) && !r.Time().After(stop) {
			out = append(out, decide.Sample{Time: r.Time().UTC(), Rate: v})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("store: λ history: %w", err)
	}
	return out, nil
}

// History implements HistoryStore, as the Flux query computes it.
func (m *Memory) History(_ context.Context, q HistoryQuery) ([]decide.Sample, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	start, stop := q.bounds()
	m.mu.Lock()
	defer m.mu.Unlock()
	type acc struct {
		sum float64
		n   int
	}
	windows := map[int64]*acc{}
	for _, p := range m.points {
		if p.measurement != influx.Workload || p.time.Before(start) || !p.time.Before(stop) ||
			p.tags[influx.TagNamespace] != q.Namespace || p.tags[influx.TagWorkload] != q.Workload {
			continue
		}
		v, ok := p.fields[influx.FieldArrivalRate]
		if !ok {
			continue
		}
		end := truncate(p.time, q.Step).Add(q.Step).UnixNano()
		a := windows[end]
		if a == nil {
			a = &acc{}
			windows[end] = a
		}
		a.sum += v
		a.n++
	}
	out := make([]decide.Sample, 0, len(windows))
	for end, a := range windows {
		out = append(out, decide.Sample{Time: time.Unix(0, end).UTC(), Rate: a.sum / float64(a.n)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// LongHistory keeps each workload's long λ history between cycles: the first
// read of a workload reads Span; later ones only the windows completed since
// (and the newest historyReread again). Safe for concurrent use; reads of
// different workloads run in parallel.
type LongHistory struct {
	Store      HistoryStore
	Span, Step time.Duration

	mu      sync.Mutex
	entries map[string]*historyEntry
}

type historyEntry struct {
	mu      sync.Mutex
	samples []decide.Sample
	// through is the stop of the last read (zero: none yet); used when the
	// entry was last read.
	through, used time.Time
}

// Read returns the workload's history at now (a copy).
func (h *LongHistory) Read(ctx context.Context, namespace, workload string, now time.Time) ([]decide.Sample, error) {
	q := HistoryQuery{Namespace: namespace, Workload: workload, Now: now, Span: h.Span, Step: h.Step}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	e := h.entry(namespace+"/"+workload, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	start, stop := q.bounds()
	if !e.through.Equal(stop) {
		if e.through.After(stop) || !e.through.After(start) {
			// The clock went back, or the last read is older than the span:
			// read it all.
			e.samples, e.through = nil, time.Time{}
		}
		if !e.through.IsZero() {
			q.From = e.through.Add(-historyReread * h.Step)
		}
		from, _ := q.bounds()
		fresh, err := h.Store.History(ctx, q)
		if err != nil {
			return nil, err
		}
		// The windows read again replace what was kept of them.
		keep := len(e.samples)
		for keep > 0 && e.samples[keep-1].Time.After(from) {
			keep--
		}
		e.samples = append(e.samples[:keep], fresh...)
		e.through = stop
	}
	// Windows that end after start lie in the span.
	first := 0
	for first < len(e.samples) && !e.samples[first].Time.After(start) {
		first++
	}
	e.samples = e.samples[first:]
	return slices.Clone(e.samples), nil
}

// entry returns the workload's entry, and forgets the entries not read for a
// span (workloads gone: a later read would start over anyway).
func (h *LongHistory) entry(key string, now time.Time) *historyEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.entries == nil {
		h.entries = map[string]*historyEntry{}
	}
	for k, e := range h.entries {
		if k != key && now.Sub(e.used) > h.Span {
			delete(h.entries, k)
		}
	}
	e := h.entries[key]
	if e == nil {
		e = &historyEntry{}
		h.entries[key] = e
	}
	e.used = now
	return e
}

// Workloads is the number of workloads whose history is kept.
func (h *LongHistory) Workloads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.entries)
}
