package store

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
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
			if v, ok := number(f.Value); ok {
				mp.fields[f.Key] = v
			}
		}
		m.points = append(m.points, mp)
	}
}

// Snapshot implements Store.
func (m *Memory) Snapshot(_ context.Context, q Query) (measurement.Workload, error) {
	if err := q.Validate(); err != nil {
		return measurement.Workload{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	start := q.Now.Add(-q.Window)
	in := func(p memPoint) bool { return !p.time.Before(start) && !p.time.After(q.stop()) }
	ours := func(p memPoint) bool {
		return p.tags[influx.TagNamespace] == q.Namespace && p.tags[influx.TagWorkload] == q.Workload
	}
	var wl []memPoint
	pods := map[string]podRow{}
	others := map[string]podRow{}
	nodes := map[string]nodeRow{}
	for _, p := range m.points {
		if !in(p) {
			continue
		}
		switch p.measurement {
		case influx.Workload:
			// A point is the λ history's as Flux reads it: one with λ.
			if _, ok := p.fields[influx.FieldArrivalRate]; ok && ours(p) {
				wl = append(wl, p)
			}
		case influx.Pod:
			row := podRowFrom(p.tags[influx.TagPod], p.tags[influx.TagNode], p.time, func(f string) float64 { return p.fields[f] })
			if ours(p) {
				newer(pods, row.name, row, podTime)
			} else {
				row.name, row.service = p.tags[influx.TagNamespace]+"/"+row.name, 0
				// Keyed by node too: only the rows on the nodes read are neighbours.
				newer(others, row.name+"\x00"+row.node, row, podTime)
			}
		case influx.Node:
			n := nodeRow{name: p.tags[influx.TagNode], time: p.time, used: p.fields[influx.FieldCPUUsage], allocatable: p.fields[influx.FieldCPUAllocatable]}
			newer(nodes, n.name, n, nodeTime)
		}
	}
	if len(wl) == 0 {
		return measurement.Workload{}, ErrNoData
	}
	sort.SliceStable(wl, func(i, j int) bool { return wl[i].time.Before(wl[j].time) })
	newest := wl[len(wl)-1]
	// Pods, nodes and neighbours: their newest values within q.Latest of the
	// newest workload point, as Flux reads them (a newest value older than
	// that is the newest of none within it).
	since := q.latestStart(newest.time)
	maps.DeleteFunc(pods, func(_ string, r podRow) bool { return r.time.Before(since) })
	maps.DeleteFunc(others, func(_ string, r podRow) bool { return r.time.Before(since) })
	maps.DeleteFunc(nodes, func(_ string, n nodeRow) bool { return n.time.Before(since) })
	rates := make([]decide.Sample, len(wl))
	for i, p := range wl {
		rates[i] = decide.Sample{Time: p.time, Rate: p.fields[influx.FieldArrivalRate]}
	}
	podRows := values(pods)
	var nodeRows []nodeRow
	neighbours := map[string]podRow{}
	for _, name := range nodeNames(q, podRows) {
		if n, ok := nodes[name]; ok {
			nodeRows = append(nodeRows, n)
		}
	}
	// Neighbours only on the nodes the workload's pods run on, as Flux reads them.
	for _, name := range nodeNames(Query{}, podRows) {
		for _, r := range others {
			if r.node == name {
				newer(neighbours, r.name, r, podTime)
			}
		}
	}
	return assemble(q, rates, newest.fields, newest.time, podRows, values(neighbours), nodeRows), nil
}
