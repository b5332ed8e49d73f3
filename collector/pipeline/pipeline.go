package pipeline

import (
	"context"
	"sort"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/scrape"
)

// Sink receives a cycle's points; *influx.Writer is one.
type Sink interface {
	Write(points ...*write.Point)
}

// Pipeline is the collector's per-cycle work.
type Pipeline struct {
	Scraper *scrape.Scraper
	Sink    Sink
}

// WorkloadKey names a workload.
type WorkloadKey struct{ Namespace, Workload string }

// Cycle is what one cycle produced.
type Cycle struct {
	Results   []scrape.Result
	Pods      map[string]aggregate.Metrics // by Target.Key()
	Workloads map[WorkloadKey]aggregate.Metrics
	Points    int
}

// Resources are a pod's CPU numbers, joined onto its qas_pod point.
type Resources struct {
	// Usage in cores from metrics.k8s.io; HasUsage is false when there was none.
	Usage    float64
	HasUsage bool
	// Request and Limit in millicores (Limit 0 = none).
	Request, Limit int64
}

// Run is RunWith without CPU numbers.
func (p *Pipeline) Run(ctx context.Context, targets []scrape.Target) Cycle {
	return p.RunWith(ctx, targets, nil)
}

// RunWith scrapes targets once, aggregates and writes the points. Pods without an
// interval this cycle (first scrape, restart, failure) are left out of their
// workload's aggregate; the workload's "pods" field says how many were in it.
func (p *Pipeline) RunWith(ctx context.Context, targets []scrape.Target, resources map[string]Resources) Cycle {
	res := p.Scraper.Cycle(ctx, targets)
	c := Cycle{Results: res, Pods: map[string]aggregate.Metrics{}, Workloads: map[WorkloadKey]aggregate.Metrics{}}
	byWorkload := map[WorkloadKey][]scrape.Interval{}
	var points []*write.Point
	for _, r := range res {
		if !r.OK {
			continue
		}
		m := aggregate.Pod(r.Interval)
		c.Pods[r.Target.Key()] = m
		pt := PodPoint(r.Target, m)
		if rs, ok := resources[r.Target.Key()]; ok {
			if rs.HasUsage {
				pt.AddField("cpu_usage_cores", rs.Usage)
			}
			pt.AddField("cpu_request_cores", float64(rs.Request)/1000)
			pt.AddField("cpu_limit_cores", float64(rs.Limit)/1000)
		}
		points = append(points, pt)
		k := WorkloadKey{r.Target.Namespace, r.Target.Workload}
		byWorkload[k] = append(byWorkload[k], r.Interval)
	}
	keys := make([]WorkloadKey, 0, len(byWorkload))
	for k := range byWorkload {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Namespace+"/"+keys[i].Workload < keys[j].Namespace+"/"+keys[j].Workload
	})
	for _, k := range keys {
		m, err := aggregate.Workload(byWorkload[k])
		if err != nil {
			continue // cannot happen: every key has at least one interval
		}
		c.Workloads[k] = m
		points = append(points, WorkloadPoint(k.Namespace, k.Workload, m))
	}
	if len(points) > 0 {
		p.Sink.Write(points...)
	}
	c.Points = len(points)
	return c
}
