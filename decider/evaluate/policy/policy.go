// Package policy holds the autoscaling policies the simulator compares: QAS
// (driving the same decide.Engine as the controller), Kubernetes' HPA,
// Knative's KPA, the seeds' algorithms, static replica counts and two oracles.
// Each policy sees only what a real autoscaler would observe (Observation);
// only the oracles are given the future.
package policy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/qas-dev/qas/decider/decide"
)

// Second is what was measured in one simulated second, summed over pods.
type Second struct {
	// Arrivals is the number of requests that arrived.
	Arrivals int
	// Completions, ServiceSum and ServiceSq are the requests finished and the
	// sum and sum of squares of their service times (seconds), as a measuring
	// proxy reports them.
	Completions           int
	ServiceSum, ServiceSq float64
	// InFlight is the time-average number of requests in the pods (queued or
	// in service): Knative's observed concurrency.
	InFlight float64
	// LatencySum is the sum of the response times (arrival to completion,
	// seconds) of the Completions: what a proxy measuring latency reports,
	// for a mean-latency target.
	LatencySum float64
	// Latency counts the second's completed requests by latency (arrival to
	// completion, as a client feels it at the proxy) in the proxy's buckets
	// (LatencyBounds; the last count is above the last bound), so a policy can
	// read the latency percentile the collector would store.
	Latency [len(LatencyBounds) + 1]uint32
	// Service counts the same requests by service time alone (slot to
	// completion, no queue wait) in the same buckets: the proxy's service-time
	// histogram, from which the collector stores service quantiles.
	Service [len(LatencyBounds) + 1]uint32
}

// LatencyBounds are the upper bounds, in seconds, of the proxy's latency
// histogram buckets (proxy/stats.DefaultLatencyBounds, which a test checks).
var LatencyBounds = [...]float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04,
	0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5,
	10, 15, 30, 60,
}

// LatencyBucket is the index in Second.Latency of a latency of lat seconds.
func LatencyBucket(lat float64) int {
	lo, hi := 0, len(LatencyBounds)
	for lo < hi {
		m := (lo + hi) / 2
		if lat <= LatencyBounds[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// Pod is one pod as the autoscaler sees it.
type Pod struct {
	ID    int
	Ready bool
	// Created and ReadyAt are simulated seconds; ReadyAt is meaningful when Ready.
	Created, ReadyAt float64
	// Pending is true while the pod has no node (no room); Started is when it
	// got one and its containers started (the pod's status.startTime).
	Pending bool
	Started float64
	// BusyCum is the cumulative CPU-seconds the pod used: busy slots × (CPU per
	// slot) integrated over time. Differences over an interval give usage.
	BusyCum float64
	// CPU is the pod's CPU request in cores.
	CPU float64
	// Node indexes Observation.Nodes; −1 when Pending or without a node model.
	Node int
	// Completions and ServiceSum are the requests the pod finished and the sum
	// of their service times (seconds), cumulative, as the pod's proxy counts.
	Completions int
	ServiceSum  float64
	// InService and Queued are the requests the pod holds at the decision
	// time: in service, and waiting in the pod's own queue (the proxy's
	// in-flight and queued gauges).
	InService, Queued int
}

// Node is one node's capacity and absolute usage.
type Node struct {
	// CPU is the node's cores, Requested the sum of its pods' requests.
	CPU, Requested float64
	// UsedCum is the cumulative core-seconds used on the node, other work included.
	UsedCum float64
}

// Observation is everything a policy is given at one decision time.
type Observation struct {
	// Now is the simulated time in seconds since the start.
	Now float64
	// Seconds holds one entry per completed simulated second, oldest first.
	Seconds []Second
	// Pods are the pods that exist and are not draining.
	Pods []Pod
	// Nodes are the nodes, when the simulation models them.
	Nodes []Node
	// InitTimes are the creation→Ready durations (seconds) of the pods that
	// became Ready so far, the initial replicas (started before the run)
	// first.
	InitTimes []float64
	// PodStarts counts the pods that have started so far (got a node and
	// started their containers); the next pod to start is start number
	// PodStarts. Only the oracle uses it, to look up the init time that
	// start will take (Future.InitTime).
	PodStarts int
	// Concurrency is the per-pod concurrency limit k.
	Concurrency int
	// FrontQueued is the requests held in front of the pods at the decision
	// time: waiting for a first Ready pod, or for a free place behind a
	// capacity-aware proxy (the activator, pooled routing).
	FrontQueued int
	// Latency is the measured response times of the requests finished in
	// the last seconds (nil when the simulator does not provide them).
	Latency Latencies
}

// Latencies are the measured response times of recently finished requests.
type Latencies interface {
	// Quantile is the response time at percentile p (0 < p < 100) of the
	// requests finished in the last w seconds (at most LatencyHistory), to
	// within 2 %; false when none finished.
	Quantile(w int, p float64) (float64, bool)
}

// LatencyHistory is the longest window, in seconds, Latencies.Quantile covers.
const LatencyHistory = 300

// MeanLatency is the mean response time of the requests finished in the last
// w seconds; false when none finished.
func (o *Observation) MeanLatency(w int) (float64, bool) {
	n := min(w, len(o.Seconds))
	c, sum := 0, 0.0
	for _, x := range o.Seconds[len(o.Seconds)-n:] {
		c += x.Completions
		sum += x.LatencySum
	}
	if c == 0 {
		return 0, false
	}
	return sum / float64(c), true
}

// InFlightNow is the requests in the pods and in front of them at the
// decision time (queued or in service).
func (o *Observation) InFlightNow() int {
	n := o.FrontQueued
	for _, p := range o.Pods {
		n += p.InService + p.Queued
	}
	return n
}

// Ready counts the ready pods.
func (o *Observation) Ready() int {
	n := 0
	for _, p := range o.Pods {
		if p.Ready {
			n++
		}
	}
	return n
}

// Rate is the mean arrival rate over the last w seconds (or fewer, at the start).
func (o *Observation) Rate(w int) float64 {
	return o.mean(w, func(x Second) float64 { return float64(x.Arrivals) })
}

// mean is the mean of f over the last w seconds (or fewer, at the start; 0 before the
// first).
func (o *Observation) mean(w int, f func(Second) float64) float64 {
	n := min(w, len(o.Seconds))
	if n == 0 {
		return 0
	}
	s := 0.0
	for _, x := range o.Seconds[len(o.Seconds)-n:] {
		s += f(x)
	}
	return s / float64(n)
}

// Decision is a policy's output at one decision time.
type Decision struct {
	// Replicas is the desired number of pods.
	Replicas int
	// Forecast is the arrival rate the policy sized for (0 if it does not forecast).
	Forecast float64
	// CPU is a new CPU request per pod in cores, applied in place; 0 keeps it.
	CPU float64
	// Migrate, when set, moves one pod to another node: a replacement is
	// surged there and the pod is removed once the replacement is Ready.
	Migrate *Move
	// MeasureOnly marks a call in which the policy only took a measurement
	// and did not decide (Replicas is the current count): seed 004's
	// Algorithm 3 measures every minute and decides every fifth. Seed 004's
	// metrics sample decisions only.
	MeasureOnly bool
}

// Move is one migration: pod ID to node index ToNode. The simulator hands the
// Move it carried out back to a MigrationObserver when the move ends.
type Move struct {
	Pod, ToNode int
	// plan is the engine's plan behind a QAS move (what the controller keeps
	// while a migration runs, and hands back to the engine when it ends).
	plan decide.MigrationPlan
}

// Policy is one autoscaler.
type Policy interface {
	Name() string
	// Period is how often, in simulated seconds, Decide is called.
	Period() float64
	// Decide returns the desired replicas.
	Decide(o *Observation) Decision
}

// Params are the workload facts every policy may be configured with (what a
// user would write in its configuration, not measurements).
type Params struct {
	// Target latency (seconds) at Percentile (0 < p < 100).
	Target, Percentile float64
	// Concurrency is k; CPU is the pod's CPU request in cores.
	Concurrency int
	CPU         float64
	MinReplicas int
	MaxReplicas int
	// Tolerance is QAS' θ; zero means Tolerance (0.1).
	Tolerance float64
	// Vertical lets qas resize pods in place between MinCPU and MaxCPU cores;
	// CPUBound is the CPU-bound share of the service time it is told (0: the
	// engine estimates it).
	Vertical       bool
	MinCPU, MaxCPU float64
	CPUBound       float64
	// Migration lets qas move a pod slowed on a hot node to a cooler node.
	Migration bool
	// Routing is the data plane qas is told its requests go through, as a
	// user writes spec.routing (random, leastRequest or pooled); empty means
	// random (a Service). The simulator sets it from the run's data plane
	// (sim.Routing.Spec).
	Routing decide.Routing
	// CPUTarget is the CPU utilisation target of the HPA and predictive-hpa;
	// zero means DefaultHPATarget.
	CPUTarget float64
	// Alg1Period is seed 004's Algorithm 1 scaling period in seconds; zero
	// means Alg1Period (its 2 minutes, Table 4.1).
	Alg1Period float64
	// Burst is the rise qas is told the workload may bring without warning
	// (spec.burst; decide.Burst): none when its Rise is zero.
	Burst decide.Burst
	// History is the arrival rate of each second before the run (oldest
	// first): the workload's past that InfluxDB would hold. qas reads it as
	// the collector would have stored it (counts drawn at those rates);
	// nil: the workload starts with the run.
	History []float64
}

func (p Params) cpuTarget() float64 {
	if p.CPUTarget > 0 {
		return p.CPUTarget
	}
	return DefaultHPATarget
}

// Future is what only the oracle may know.
type Future struct {
	// Rates are the true arrival rates per simulated second.
	Rates []float64
	// Capacity tells how many pods a rate needs.
	Capacity *Capacity
	// InitTime is the init time, in seconds, that pod start number j (from 0)
	// will take in this run: the realised values, drawn per start.
	InitTime func(j int) float64
	// Init is a constant init time, used when InitTime is nil.
	Init float64
	// Need, when set, is the Ready pods the oracle wants each second (a
	// schedule found by search), and Sizing the rate each second was sized
	// for; without it the oracle follows Demand(Rates, Capacity).
	Need   []int
	Sizing []float64
	// Activator routes oracle-pooled's requests through a capacity-aware
	// proxy that holds them until a pod has a free place (as Knative's
	// activator), instead of at random through a Service. The oracle policy
	// is always routed through the Service.
	Activator bool
}

// New builds a policy by name: qas, qas-reactive, hpa, hpa-nocooldown, kpa,
// hpa-cooldown, predictive-hpa, khpa-a, alg1, alg2, alg3, static:N, oracle,
// oracle-pooled.
func New(name string, p Params, f Future) (Policy, error) {
	switch {
	case name == "qas":
		return NewQAS(name, p, true), nil
	case name == "qas-reactive":
		return NewQAS(name, p, false), nil
	case name == "hpa":
		return NewHPA(p, p.cpuTarget()), nil
	case name == "hpa-nocooldown":
		return NewHPANoCooldown(p, p.cpuTarget()), nil
	case name == "kpa":
		return NewKPA(p), nil
	case name == KPADelayName:
		return NewKPAWithDelay(p, KPADelay), nil
	case name == OracleName:
		if f.Activator {
			return nil, fmt.Errorf("policy %s is routed through the Service: %s may use the activator", OracleName, PooledOracleName)
		}
		return NewOracle(p, f), nil
	case name == PooledOracleName:
		return NewPooledOracle(p, f), nil
	case name == ReactiveOracleName, name == PooledReactiveOracleName:
		return NewReactiveOracle(name, p, f.Need), nil
	case name == LowerBoundName, name == PooledLowerBoundName:
		// Its pods are Ready at once: the simulator must be told (sim.Compare).
		return NewPooledOracle(p, f), nil
	case strings.HasPrefix(name, "static:"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "static:"))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("policy %q: want static:N with N ≥ 1", name)
		}
		return Static{N: n}, nil
	}
	if c, ok := extra[name]; ok {
		return c(p, f), nil
	}
	return nil, fmt.Errorf("unknown policy %q: want %s", name, strings.Join(Names(), ", "))
}

// extra holds the further baselines, registered from their own files.
var extra = map[string]func(Params, Future) Policy{}

// Names lists the policies New knows (static:N stands for any N ≥ 1).
func Names() []string {
	names := []string{"qas", "qas-reactive", "hpa", "hpa-nocooldown", "kpa", KPADelayName, "static:N"}
	names = append(names, Yardsticks...)
	names = append(names, YardsticksName)
	for _, n := range []string{"hpa-cooldown", "predictive-hpa", "khpa-a", "alg1", "alg2", "alg3"} {
		if _, ok := extra[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// Static keeps N replicas.
type Static struct{ N int }

// Name is "static:N".
func (s Static) Name() string { return fmt.Sprintf("static:%d", s.N) }

// Period is one minute; the decision never changes.
func (s Static) Period() float64 { return 60 }

// Decide returns N.
func (s Static) Decide(*Observation) Decision { return Decision{Replicas: s.N} }

func clamp(n int, p Params) int {
	return min(max(n, max(p.MinReplicas, 1)), max(p.MaxReplicas, 1))
}
