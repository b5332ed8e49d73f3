package pipeline

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

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
	// Log (nil: none) and Invalid (nil: not counted) report intervals left out because
	// a quantity derived from them is not a finite number.
	Log     *zap.Logger
	Invalid prometheus.Counter
	// MaxClockOffset: a proxy whose clock is further than this from the collector's is
	// counted in Skewed (nil: not counted) and logged when it goes beyond and when it
	// comes back, not every cycle; its points are still written, timed by the
	// collector's clock (0: 10 s).
	MaxClockOffset time.Duration
	Skewed         prometheus.Gauge
	// mixedBounds is, per workload, the pods its last cycle left out of the
	// merged latency histogram (aggregate.Metrics.LatencySkipped), so that a
	// rollout of other bounds is logged when it changes, not every cycle.
	mixedBounds map[WorkloadKey]string

	skewed map[string]bool // pods beyond MaxClockOffset at their last interval
	// carry is, per workload, what its last cycle left for the next one's
	// per-second arrival series (aggregate.WorkloadAfter): no second is counted
	// twice, and the pair spanning two cycles is counted once.
	carry map[WorkloadKey]aggregate.RateCarry
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
	maxOffset := p.MaxClockOffset
	if maxOffset <= 0 {
		maxOffset = 10 * time.Second
	}
	skewed := 0
	for _, r := range res {
		if !r.OK {
			continue
		}
		m := aggregate.Pod(r.Interval)
		if err := m.Check(); err != nil {
			p.invalid(r.Target.Key(), err)
			continue
		}
		off := r.Interval.ClockOffset
		beyond := off > maxOffset || off < -maxOffset
		if beyond {
			skewed++
		}
		if p.skewed == nil {
			p.skewed = map[string]bool{}
		}
		switch key := r.Target.Key(); {
		case beyond && !p.skewed[key]:
			p.skewed[key] = true
			p.log().Warn("proxy clock is off the collector's; its points carry the collector's time",
				zap.String("pod", key), zap.String("node", r.Target.Node), zap.Duration("offset", off), zap.Duration("max", maxOffset))
		case !beyond && p.skewed[key]:
			delete(p.skewed, key)
			p.log().Info("proxy clock agrees with the collector's again", zap.String("pod", key), zap.Duration("offset", off))
		}
		k := WorkloadKey{r.Target.Namespace, r.Target.Workload}
		if r.Target.Front {
			// A front replica writes no pod point: it is not one of the workload's pods.
			byWorkload[k] = append(byWorkload[k], r.Interval)
			continue
		}
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
		byWorkload[k] = append(byWorkload[k], r.Interval)
	}
	keys := make([]WorkloadKey, 0, len(byWorkload))
	for k := range byWorkload {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Namespace+"/"+keys[i].Workload < keys[j].Namespace+"/"+keys[j].Workload
	})
	mixed := make(map[WorkloadKey]string, len(keys))
	for _, k := range keys {
		prev, seen := p.carry[k]
		if !seen {
			prev = aggregate.NoCarry
		}
		m, err := aggregate.WorkloadAfter(byWorkload[k], prev)
		if err != nil {
			p.invalid(k.Namespace+"/"+k.Workload, err)
			continue
		}
		if err := m.Check(); err != nil {
			p.invalid(k.Namespace+"/"+k.Workload, err)
			continue
		}
		if m.Pods == 0 {
			// Only fronts answered: a point with no pod would read as λ = 0.
			continue
		}
		mixed[k] = p.logMixedBounds(k, m)
		c.Workloads[k] = m
		points = append(points, WorkloadPoint(k.Namespace, k.Workload, m))
		if p.carry == nil {
			p.carry = map[WorkloadKey]aggregate.RateCarry{}
		}
		p.carry[k] = m.ArrivalRateCarry
	}
	if len(p.carry) > 0 {
		// A workload none of whose targets is left is forgotten.
		current := make(map[WorkloadKey]bool, len(targets))
		for _, t := range targets {
			current[WorkloadKey{t.Namespace, t.Workload}] = true
		}
		for k := range p.carry {
			if !current[k] {
				delete(p.carry, k)
			}
		}
	}
	p.mixedBounds = mixed
	if len(p.skewed) > 0 {
		current := make(map[string]bool, len(targets))
		for _, t := range targets {
			current[t.Key()] = true
		}
		for key := range p.skewed {
			if !current[key] {
				delete(p.skewed, key) // the pod is gone
			}
		}
	}
	if p.Skewed != nil {
		p.Skewed.Set(float64(skewed))
	}
	if len(points) > 0 {
		p.Sink.Write(points...)
	}
	c.Points = len(points)
	return c
}

func (p *Pipeline) log() *zap.Logger {
	if p.Log == nil {
		return zap.NewNop()
	}
	return p.Log
}

// invalid reports what was left out of a cycle's points and why.
func (p *Pipeline) invalid(what string, err error) {
	if p.Invalid != nil {
		p.Invalid.Inc()
	}
	p.log().Warn("left out of this cycle: a derived quantity is not a finite number", zap.String("of", what), zap.Error(err))
}

// logMixedBounds logs, when it changes, which of a workload's pods its
// latency histogram leaves out for other bucket bounds, and returns them
// ("" when none). A workload that skips no pod is remembered as such, so the
// end of a rollout is logged once too.
func (p *Pipeline) logMixedBounds(k WorkloadKey, m aggregate.Metrics) string {
	now := strings.Join(m.LatencySkipped, ",")
	before := p.mixedBounds[k]
	switch {
	case now == before:
	case now != "":
		p.log().Warn("pods' latency histograms have other bucket bounds than most of the workload's: left out of its latency histogram, percentiles, service histogram and service quantiles",
			zap.String("workload", k.Namespace+"/"+k.Workload), zap.Strings("pods", m.LatencySkipped), zap.Float64s("bounds", m.Latency.Bounds))
	default:
		p.log().Info("the workload's pods agree on latency histogram bounds again", zap.String("workload", k.Namespace+"/"+k.Workload))
	}
	return now
}
