package policy

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

// QAS settings for the simulator.
const (
	// QASPeriod is how often the decider decides and the collector scrapes,
	// in seconds: every scrape, the fast path (docs/model.md). Each scrape is
	// one point of λ; the engine reads λ over measurement.DefaultRateWindow,
	// as the store merges the points for the controller.
	QASPeriod = float64(measurement.DefaultInterval / time.Second)
	// qasHistory is how much λ history is passed to the engine, in seconds:
	// what the controller reads by default.
	qasHistory = int(measurement.DefaultWindow / time.Second)
	// qasLongStep and qasLongHistory are the long λ history's step and span,
	// seconds: the store's 1-minute means over a day (store.Source).
	qasLongStep, qasLongHistory = 60, 24 * 3600
	// qasHistorySeed draws the counts of Params.History.
	qasHistorySeed = 0x7e57_4a11
)

// simEpoch anchors simulated seconds to wall-clock times for the engine.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// QAS builds a decide.Snapshot from the observations only (never from the
// simulator's ground truth) and drives the same decide.Engine as the
// controller. qas has the predictive lead on; qas-reactive has it off.
type QAS struct {
	name   string
	p      Params
	spec   decide.Spec
	engine *decide.Engine
	last   map[int]float64
	svc    map[int]podService
	lastT  float64
	nodes  []float64
	// cum are the prefix sums of the arrivals per second over the history
	// before the run (prior seconds) and the seconds observed so far.
	cum   []int64
	prior int
	// Last is the engine's last decision, for the report.
	Last decide.Decision
}

type podService struct {
	n   int
	sum float64
}

// Tolerance is θ for QAS in the simulator unless set with SetTolerance.
const Tolerance = 0.1

// NewQAS returns a QAS policy; predictive turns the lead on.
func NewQAS(name string, p Params, predictive bool) *QAS {
	spec := decide.Spec{
		MinReplicas: int32(max(p.MinReplicas, 1)),
		MaxReplicas: int32(max(p.MaxReplicas, 1)),
		Target:      time.Duration(p.Target * float64(time.Second)),
		Percentile:  p.Percentile,
		Tolerance:   Tolerance,
		Concurrency: max(p.Concurrency, 1),
		// The layout follows the routing (random: per-pod; leastRequest and
		// pooled: pooled), as it does for a user who sets only spec.routing.
		Routing:      p.Routing,
		ServiceModel: decide.ServiceAllenCunneen,
		Predictive:   decide.Predictive{Enabled: predictive},
		Burst:        p.Burst,
	}
	if p.Vertical {
		spec.Vertical = decide.Vertical{Enabled: true, MinCPU: int64(math.Round(p.MinCPU * 1000)),
			MaxCPU: int64(math.Round(p.MaxCPU * 1000)), CPUBoundFraction: p.CPUBound}
	}
	if p.Tolerance > 0 {
		spec.Tolerance = p.Tolerance
	}
	// Migration with the engine's defaults: φ = 85 %, the pod itself moves, a
	// pod is slowed at 1.5 × the median service time.
	spec.Migration.Enabled = p.Migration
	q := &QAS{name: name, p: p, spec: spec, engine: decide.NewEngine(), last: map[int]float64{}, svc: map[int]podService{}}
	q.cum = []int64{0}
	for _, n := range historyCounts(p.History) {
		q.cum = append(q.cum, q.cum[len(q.cum)-1]+int64(n))
	}
	q.prior = len(p.History)
	return q
}

// historyCounts are the arrivals per second a Poisson process at the given
// rates produced (seeded: every run of a cell sees the same past), as the
// collector would have counted them before the run.
func historyCounts(rates []float64) []int {
	r := rand.New(rand.NewPCG(qasHistorySeed, uint64(len(rates))))
	out := make([]int, len(rates))
	for i, lam := range rates {
		if lam <= 0 || math.IsNaN(lam) || math.IsInf(lam, 0) {
			continue
		}
		for t := r.ExpFloat64() / lam; t < 1; t += r.ExpFloat64() / lam {
			out[i]++
		}
	}
	return out
}

// arrivals counts the arrivals in seconds [from, to) of the run (negative:
// the history before it), as far as they are known.
func (q *QAS) arrivals(from, to int) int64 {
	lo := min(max(from+q.prior, 0), len(q.cum)-1)
	hi := min(max(to+q.prior, 0), len(q.cum)-1)
	return q.cum[hi] - q.cum[lo]
}

// SetTolerance sets θ.
func (q *QAS) SetTolerance(theta float64) { q.spec.Tolerance = theta }

// Name is qas or qas-reactive.
func (q *QAS) Name() string { return q.name }

// Period is the decider's 5 s decision cycle (the collector's scrape).
func (*QAS) Period() float64 { return QASPeriod }

// Snapshot is what the decider's collector would have stored: λ per cycle,
// E[S] and its SCV from the proxies' sums, pods with readiness and CPU usage,
// and init times.
func (q *QAS) Snapshot(o *Observation) decide.Snapshot {
	at := func(sec float64) time.Time { return simEpoch.Add(time.Duration(sec * float64(time.Second))) }
	now := int(o.Now)
	for i := len(q.cum) - 1 - q.prior; i < len(o.Seconds); i++ {
		q.cum = append(q.cum, q.cum[len(q.cum)-1]+int64(o.Seconds[i].Arrivals))
	}
	// λ as the collector stores it, one point per scrape (the rate over the
	// interval since the one before), merged into the engine's long windows
	// as the store merges them for the controller.
	var points []decide.Sample
	for end := now; end > -q.prior && end > now-qasHistory; end -= int(QASPeriod) {
		start := max(-q.prior, end-int(QASPeriod))
		n := q.arrivals(start, min(end, len(o.Seconds)))
		points = append(points, decide.Sample{Time: at(float64(end)), Rate: float64(n) / float64(end-start)})
	}
	slices.Reverse(points)
	rates := measurement.RateWindows(points, measurement.DefaultRateWindow)
	// The long history: 1-minute means aligned on the minute, complete
	// minutes only, as the store's aggregateWindow returns them.
	var long []decide.Sample
	first := max(-q.prior, now-qasLongHistory)
	first = int(math.Ceil(float64(first)/qasLongStep)) * qasLongStep
	for end := first + qasLongStep; end <= min(now, len(o.Seconds)); end += qasLongStep {
		long = append(long, decide.Sample{Time: at(float64(end)), Rate: float64(q.arrivals(end-qasLongStep, end)) / qasLongStep})
	}
	var cnt int
	var sum, sq float64
	// The service times of the last scrape interval, as the collector stores
	// them (its newest workload point: mean, SCV, the requests they are over),
	// and the proxies' service-time histograms over the same interval, merged
	// as the collector merges them, for the service quantiles it stores. The
	// engine pools the intervals (decide/service.go).
	var svcHist [len(LatencyBounds) + 1]uint64
	for i := len(o.Seconds) - 1; i >= 0 && i >= len(o.Seconds)-int(QASPeriod); i-- {
		s := o.Seconds[i]
		cnt += s.Completions
		sum += s.ServiceSum
		sq += s.ServiceSq
		for b, c := range s.Service {
			svcHist[b] += uint64(c)
		}
	}
	var es, scv float64
	if cnt > 0 {
		es = sum / float64(cnt)
		if cnt > 1 {
			scv = math.Max(0, sq/float64(cnt)-es*es) / (es * es)
		}
	}
	dt := o.Now - q.lastT
	rateCV2, ratePairs := q.rateCV2(o, dt)
	pods := make([]decide.Pod, 0, len(o.Pods))
	ready := 0
	for _, p := range o.Pods {
		use := 0.0
		if prev, ok := q.last[p.ID]; ok && dt > 0 {
			use = (p.BusyCum - prev) / dt
		}
		if p.Ready {
			ready++
		}
		dp := decide.Pod{Name: podName(p.ID), Owned: true, Ready: p.Ready,
			CPURequest: int64(math.Round(p.CPU * 1000)), CPUUsage: use}
		// The pod's own mean service time over the cycle, from its proxy's
		// counters (0, unknown, when it finished nothing).
		if prev, ok := q.svc[p.ID]; ok && p.Completions > prev.n {
			dp.ServiceTime = (p.ServiceSum - prev.sum) / float64(p.Completions-prev.n)
		}
		if p.Node >= 0 && len(o.Nodes) > 0 {
			dp.Node = nodeName(p.Node)
		}
		pods = append(pods, dp)
	}
	var nodes []decide.Node
	for i, n := range o.Nodes {
		used := 0.0
		if i < len(q.nodes) && dt > 0 {
			used = (n.UsedCum - q.nodes[i]) / dt
		}
		nodes = append(nodes, decide.Node{Name: nodeName(i), AllocatableCPU: int64(math.Round(n.CPU * 1000)),
			RequestedCPU: int64(math.Round(n.Requested * 1000)), UsedCPU: used})
	}
	q.nodes = q.nodes[:0]
	for _, n := range o.Nodes {
		q.nodes = append(q.nodes, n.UsedCum)
	}
	clear(q.last)
	clear(q.svc)
	for _, p := range o.Pods {
		q.last[p.ID] = p.BusyCum
		q.svc[p.ID] = podService{p.Completions, p.ServiceSum}
	}
	q.lastT = o.Now
	// The queue signals the collector stores: each pod's in-service and queued
	// gauges, and over the last scrape interval (the fast path's short window)
	// λ and the latency at the target percentile from the proxies' histograms.
	for i, p := range o.Pods {
		pods[i].InService, pods[i].Queued = float64(p.InService), float64(p.Queued)
	}
	short := min(int(QASPeriod), len(o.Seconds))
	var shortN int
	for _, s := range o.Seconds[len(o.Seconds)-short:] {
		shortN += s.Arrivals
	}
	var hist [len(LatencyBounds) + 1]uint64
	var latN uint64
	for _, s := range o.Seconds[len(o.Seconds)-short:] {
		for i, c := range s.Latency {
			hist[i] += uint64(c)
			latN += uint64(c)
		}
	}
	pct := q.p.Percentile
	if pct <= 0 {
		pct = 50
	}
	inits := make([]time.Duration, 0, min(len(o.InitTimes), 50))
	for _, d := range o.InitTimes[max(0, len(o.InitTimes)-50):] {
		inits = append(inits, time.Duration(d*float64(time.Second)))
	}
	return decide.Snapshot{
		Now: at(o.Now), ArrivalRates: rates, History: long, ServiceTime: es, ServiceSCV: scv, ServiceSamples: float64(cnt),
		CurrentReplicas: int32(len(o.Pods)), ReadyReplicas: int32(ready), Pods: pods,
		Nodes: nodes, InitTimes: inits, DataTime: at(o.Now), Complete: true,
		ShortArrivalRate: float64(shortN) / max(float64(short), 1), ShortWindow: time.Duration(short) * time.Second,
		MeasuredLatency: histQuantile(hist[:], latN, pct/100), LatencySamples: float64(latN),
		MeasuredQuantiles: measuredQuantiles(hist[:], latN),
		LatencyBuckets:    latencyBuckets(hist[:]),
		ServiceQuantiles:  ServiceQuantiles(svcHist[:]),
		ServiceBuckets:    serviceBuckets(svcHist[:]),
		FrontQueue:        q.frontQueue(o),
		RateCV2:           rateCV2, RateCV2Pairs: ratePairs,
	}
}

// rateCV2 is what the collector stores for the scrape interval that ended now
// (dt seconds long): the relative variance of the per-second rate from the
// seconds that ended in the interval (the pods' counts of each second added
// up, which in the simulator is the second's arrivals), with the pair that
// joins the interval to the previous one (collector/aggregate keeps it when
// the same pods reported both).
func (q *QAS) rateCV2(o *Observation, dt float64) (float64, float64) {
	n := min(int(math.Round(dt))+1, len(o.Seconds), 33)
	if n < 2 {
		return 0, 0
	}
	counts := make([]int64, n)
	for i, s := range o.Seconds[len(o.Seconds)-n:] {
		counts[i] = int64(s.Arrivals)
	}
	sums, err := ratevar.Of(counts)
	if err != nil {
		return 0, 0
	}
	cv2, err := ratevar.CV2(sums)
	if err != nil {
		return 0, 0
	}
	return cv2, float64(sums.Pairs)
}

// frontQueue is the pooled data plane's shared queue, as the collector stores it
// from the fronts' queue_length gauge and the controller passes it for a pooled
// workload only (0 otherwise: a Service queues nothing in front of the pods).
// The snapshot's FrontExpiredRate and FrontRefusedRate stay 0: the simulated
// fronts (sim.RoutePooled, sim.RouteOverflow) hold every request without a
// bound on the queue or a maximum wait, so none expires or is refused, as the
// collector would then store.
func (q *QAS) frontQueue(o *Observation) float64 {
	if q.spec.Routing != decide.RoutingPooled {
		return 0
	}
	return float64(o.FrontQueued)
}

// measuredQuantiles are the p50, p95 and p99 the collector stores (nil when
// nothing completed).
func measuredQuantiles(counts []uint64, n uint64) []decide.LatencyQuantile {
	if n == 0 {
		return nil
	}
	var out []decide.LatencyQuantile
	for _, p := range []float64{50, 95, 99} {
		out = append(out, decide.LatencyQuantile{Percentile: p, Seconds: histQuantile(counts, n, p/100)})
	}
	return out
}

// ServiceQuantiles are the service-time quantiles the collector stores from
// the merged histogram counts (in LatencyBounds' buckets), as the store reads
// them back: stats.ServicePercentiles by stats.Histogram.TailQuantile, none
// unless every one is positive (nothing completed).
func ServiceQuantiles(counts []uint64) []decide.LatencyQuantile {
	h := stats.Histogram{Bounds: LatencyBounds[:], Counts: counts}
	if h.Total() == 0 {
		return nil
	}
	out := make([]decide.LatencyQuantile, 0, len(stats.ServicePercentiles))
	for _, p := range stats.ServicePercentiles {
		v := h.TailQuantile(p / 100)
		if !(v > 0) {
			return nil
		}
		out = append(out, decide.LatencyQuantile{Percentile: p, Seconds: v})
	}
	return out
}

// histQuantile is the q-quantile of counts in the proxy's buckets, linear
// inside a bucket and the last bound for the overflow bucket, as the collector
// computes it (collector/aggregate.Quantile); 0 when empty.
func histQuantile(counts []uint64, n uint64, q float64) float64 {
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var cum float64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			if i >= len(LatencyBounds) {
				return LatencyBounds[len(LatencyBounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = LatencyBounds[i-1]
			}
			return lo + (LatencyBounds[i]-lo)*(rank-cum)/float64(c)
		}
		cum += float64(c)
	}
	return LatencyBounds[len(LatencyBounds)-1]
}

// Decide runs one decider cycle.
func (q *QAS) Decide(o *Observation) Decision {
	snap := q.Snapshot(o)
	if len(snap.ArrivalRates) == 0 {
		return Decision{Replicas: len(o.Pods)}
	}
	d, err := q.engine.Decide(q.spec, snap)
	if err != nil {
		// The snapshot is built from valid measurements; an error is a bug.
		panic("qas: " + err.Error())
	}
	q.Last = d
	out := Decision{Replicas: int(d.DesiredReplicas), Forecast: d.Explanation.SizingArrivalRate, CPU: float64(d.DesiredCPU) / 1000}
	if m := d.Migration; m != nil {
		pod, err1 := strconv.Atoi(strings.TrimPrefix(m.Pod, "pod-"))
		to, err2 := strconv.Atoi(strings.TrimPrefix(m.ToNode, "node-"))
		if err1 != nil || err2 != nil {
			panic("qas: migration plan names an unknown pod or node: " + m.Pod + " → " + m.ToNode)
		}
		out.Migrate = &Move{Pod: pod, ToNode: to, plan: *m}
	}
	return out
}

// MigrationEnded tells the engine that move m off fromNode ended (moved: the
// pod left the node), for its pacing, as the controller does.
func (q *QAS) MigrationEnded(m Move, fromNode int, now float64, moved bool) {
	plan := m.plan
	plan.FromNode = nodeName(fromNode)
	q.engine.MigrationEnded(plan, simEpoch.Add(time.Duration(now*float64(time.Second))), moved)
}

func podName(id int) string { return "pod-" + strconv.Itoa(id) }

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

// latencyBuckets is the merged latency histogram as the collector stores it
// and the store reads it back: the proxy's bounds, the last bucket unbounded.
// serviceBuckets is the merged service-time histogram as the collector stores
// it (the decider reads every bucket alike whether or not an empty one was
// left out), none for an interval that served nothing.
func serviceBuckets(counts []uint64) []decide.LatencyBucket {
	for _, c := range counts {
		if c > 0 {
			return latencyBuckets(counts)
		}
	}
	return nil
}

func latencyBuckets(counts []uint64) []decide.LatencyBucket {
	out := make([]decide.LatencyBucket, len(counts))
	for i, c := range counts {
		out[i] = decide.LatencyBucket{UpperBound: math.Inf(1), Count: float64(c)}
		if i < len(LatencyBounds) {
			out[i].UpperBound = LatencyBounds[i]
		}
	}
	return out
}
