package store

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
)

// Memory keeps written points in process. It is a pipeline sink (Write) and a Store,
// so the simulator and tests run the same write and read paths as with InfluxDB.
type Memory struct {
	mu     sync.Mutex
	points []memPoint
}

type memPoint struct {
	measurement string
	tags        map[string]string
	fields      map[string]float64
	time        time.Time
}

// NewMemory returns an empty store.
func NewMemory() *Memory { return &Memory{} }

// Write stores points; numeric fields only (the read side needs no others).
func (m *Memory) Write(points ...*write.Point) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range points {
		mp := memPoint{measurement: p.Name(), tags: map[string]string{}, fields: map[string]float64{}, time: p.Time()}
		for _, t := range p.TagList() {
			mp.tags[t.Key] = t.Value
		}
		for _, f := range p.FieldList() {
			switch v := f.Value.(type) {
			case float64:
				mp.fields[f.Key] = v
			case int64:
				mp.fields[f.Key] = float64(v)
			case uint64:
				mp.fields[f.Key] = float64(v)
			}
		}
		m.points = append(m.points, mp)
	}
}

// Snapshot implements Store.
func (m *Memory) Snapshot(_ context.Context, q Query) (decide.Snapshot, error) {
	if err := q.Validate(); err != nil {
		return decide.Snapshot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	start := q.Now.Add(-q.Window)
	in := func(p memPoint) bool { return !p.time.Before(start) && !p.time.After(q.Now) }
	var wl []memPoint
	pods := map[string]podRow{}
	nodes := map[string]nodeRow{}
	nodeTime := map[string]time.Time{}
	for _, p := range m.points {
		if !in(p) {
			continue
		}
		switch p.measurement {
		case influx.Workload:
			if p.tags["namespace"] == q.Namespace && p.tags["workload"] == q.Workload {
				wl = append(wl, p)
			}
		case influx.Pod:
			if p.tags["namespace"] == q.Namespace && p.tags["workload"] == q.Workload {
				if old, ok := pods[p.tags["pod"]]; !ok || !p.time.Before(old.time) {
					pods[p.tags["pod"]] = podRowFrom(p.tags["pod"], p.tags["node"], p.time, func(f string) float64 { return p.fields[f] })
				}
			}
		case influx.Node:
			n := p.tags["node"]
			if t, ok := nodeTime[n]; !ok || !p.time.Before(t) {
				nodeTime[n] = p.time
				nodes[n] = nodeRow{name: n, used: p.fields["cpu_usage_cores"], allocatable: p.fields["cpu_allocatable_cores"]}
			}
		}
	}
	if len(wl) == 0 {
		return decide.Snapshot{}, ErrNoData
	}
	sort.SliceStable(wl, func(i, j int) bool { return wl[i].time.Before(wl[j].time) })
	rates := make([]decide.Sample, len(wl))
	for i, p := range wl {
		rates[i] = decide.Sample{Time: p.time, Rate: p.fields["arrival_rate"]}
	}
	newest := wl[len(wl)-1]
	podRows := sortedPods(pods)
	var nodeRows []nodeRow
	seen := map[string]bool{}
	for _, p := range podRows {
		if n, ok := nodes[p.node]; ok && !seen[p.node] {
			seen[p.node] = true
			nodeRows = append(nodeRows, n)
		}
	}
	return assemble(q, rates, newest.fields, newest.time, podRows, nodeRows), nil
}

func sortedPods(m map[string]podRow) []podRow {
	rows := make([]podRow, 0, len(m))
	for _, r := range m {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows
}
