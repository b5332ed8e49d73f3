package sim

import (
	"math"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// Latency histogram: logarithmic buckets from histMin seconds, ratio histRatio.
const (
	histMin   = 1e-4
	histRatio = 1.01
	histSize  = 2100 // up to about 1e5 s
)

var histLogRatio = math.Log(histRatio)

func bucket(lat float64) int {
	if lat <= histMin {
		return 0
	}
	return min(histSize-1, 1+int(math.Log(lat/histMin)/histLogRatio))
}

// bucketUpper is the upper edge of bucket i (the value reported for a quantile:
// at most 1 % above the true one).
func bucketUpper(i int) float64 { return histMin * math.Pow(histRatio, float64(i)) }

// Histogram counts latencies in logarithmic buckets.
type Histogram struct {
	Counts [histSize]uint32
	N      uint64
}

// add counts one latency in its bucket i (bucket(lat)): the caller finds the
// bucket once for all the histograms it counts the latency in, as the
// logarithm is the costly part.
func (h *Histogram) add(i int) { h.Counts[i]++; h.N++ }

// Quantile returns the latency at percentile p (0,100), to within 1 %; 0 when empty.
func (h *Histogram) Quantile(p float64) float64 {
	if h.N == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.N)))
	var c uint64
	for i, n := range h.Counts {
		c += uint64(n)
		if c >= rank && n > 0 {
			return bucketUpper(i)
		}
	}
	return bucketUpper(histSize - 1)
}

// DecisionSample is one decision of a policy: at time At (simulated
// seconds), Running pods existed (created, not terminating, Ready or not: a
// Deployment's status.replicas, which seed 004's N(k) reads) and it
// requested Requested replicas for the next interval. Ready is the Ready
// pods among them.
type DecisionSample struct {
	At                        float64
	Running, Ready, Requested int
}

// MoveRecord is one migration the simulator started.
type MoveRecord struct {
	// Start is when the replacement was created, End when the move ended
	// (0 while it runs), simulated seconds.
	Start, End float64
	// From and To are the node indexes.
	From, To int
	// Moved is true when the replacement took over; false when a scale-down
	// removed the pod being moved first (or the move still runs).
	Moved bool
	// PodsOnNodes are the workload's pods on each node as the policy saw them
	// when it asked for the move (replacements still starting left out).
	PodsOnNodes []int
}

// Result is one policy's run.
type Result struct {
	Policy string
	// Initial is the replicas Ready at the start.
	Initial int
	// Decisions holds every decision, in order (seed 004's metrics sample
	// them).
	Decisions []DecisionSample
	// Per simulated second.
	Arrivals []int
	Desired  []int     // replicas the policy asked for
	Ready    []int     // Ready pods (supply)
	Existing []int     // pods that exist (starting, Ready or draining)
	CPUUsed  []float64 // CPU-seconds used in the second
	// CPURequestedPerSecond is the CPU requested by existing pods in each
	// second, core-seconds (the cost's time series).
	CPURequestedPerSecond []float64
	Forecast              []float64 // the rate the policy sized for (0 if none)
	// MinuteLatency is the latency at the percentile of each simulated minute
	// (the mean for a mean target; 0 if no request), and MinuteMeanLatency
	// the mean, by completion time.
	MinuteLatency, MinuteMeanLatency []float64
	// MinuteOver counts the requests over the target that completed in each
	// simulated minute of the trace: where a run's late share comes from (a
	// request completing after the trace's last minute is in OverTarget only).
	MinuteOver  []int
	Requests    int
	OverTarget  int
	MeanLatency float64
	Latency     Histogram
	PodSeconds  float64
	// CPURequested is the CPU requested by existing pods integrated over time, core-seconds.
	CPURequested float64
	// Resizes counts vertical resizes.
	Resizes int
	// Migrations counts moves carried out (replacement Ready, old pod removed);
	// Moves are the moves started, in order.
	Migrations int
	Moves      []MoveRecord
	// NodeServed counts the requests finished on each node.
	NodeServed []int
	// Handoff counts the extra hops of RoutePeer and RouteFront.
	Handoff     HandoffStats
	Actions     int
	CPU         float64 // request per pod, cores
	target, pct float64
	minutes     []Histogram
	minuteSum   []float64
	latSum      float64
	seconds     []policy.Second
}

func newResult(name string, cfg Config) *Result {
	n := len(cfg.Rates)
	return &Result{
		Policy: name, Arrivals: make([]int, n), Desired: make([]int, n), Ready: make([]int, n),
		Existing: make([]int, n), CPUUsed: make([]float64, n), CPURequestedPerSecond: make([]float64, n), Forecast: make([]float64, n),
		minutes: make([]Histogram, (n+59)/60), MinuteOver: make([]int, (n+59)/60), minuteSum: make([]float64, (n+59)/60), CPU: cfg.CPU, Initial: cfg.InitialReplicas, target: cfg.Target, pct: cfg.Percentile,
		seconds: make([]policy.Second, 0, n), NodeServed: make([]int, cfg.Nodes),
	}
}

// record counts one request's latency and returns its histogram bucket.
func (r *Result) record(lat, now float64) int {
	r.Requests++
	r.latSum += lat
	late := 0
	if lat > r.target {
		late = 1
	}
	r.OverTarget += late
	b := bucket(lat)
	r.Latency.add(b)
	if m := int(now / 60); m < len(r.minutes) {
		r.MinuteOver[m] += late
		r.minutes[m].add(b)
		r.minuteSum[m] += lat
	}
	return b
}

func (r *Result) finish() {
	r.MinuteLatency = make([]float64, len(r.minutes))
	r.MinuteMeanLatency = make([]float64, len(r.minutes))
	for i := range r.minutes {
		if r.minutes[i].N > 0 {
			r.MinuteMeanLatency[i] = r.minuteSum[i] / float64(r.minutes[i].N)
		}
		r.MinuteLatency[i] = r.MinuteMeanLatency[i]
		if r.pct > 0 {
			r.MinuteLatency[i] = r.minutes[i].Quantile(r.pct)
		}
	}
	r.minutes, r.minuteSum = nil, nil
	if r.Requests > 0 {
		r.MeanLatency = r.latSum / float64(r.Requests)
	}
}

// DropSeries frees what only a chart of the run reads: the per-second and
// per-minute series, the decisions, the moves and the observations the policy
// was given (about 0.3 KB a simulated second, 8 MB for six hours). The totals,
// the latency histogram and the hand-off counts stay, and with them
// MeetsSLO, OverTargetPct and the summary already taken (Comparison's).
func (r *Result) DropSeries() {
	r.Decisions, r.Moves, r.seconds = nil, nil, nil
	r.Arrivals, r.Desired, r.Ready, r.Existing = nil, nil, nil, nil
	r.CPUUsed, r.CPURequestedPerSecond, r.Forecast = nil, nil, nil
	r.MinuteLatency, r.MinuteMeanLatency, r.MinuteOver = nil, nil, nil
}

// Seconds returns the per-second observations the policy was given.
func (r *Result) Seconds() []policy.Second { return r.seconds }

// OverTargetPct is the share of requests whose latency exceeded the target, in %.
func (r *Result) OverTargetPct() float64 {
	if r.Requests == 0 {
		return 0
	}
	return 100 * float64(r.OverTarget) / float64(r.Requests)
}

// MinutesOverTargetPct is the share of simulated minutes whose latency
// percentile exceeded the target, in %.
func (r *Result) MinutesOverTargetPct() float64 {
	if len(r.MinuteLatency) == 0 {
		return 0
	}
	n := 0
	for _, l := range r.MinuteLatency {
		if l > r.target {
			n++
		}
	}
	return 100 * float64(n) / float64(len(r.MinuteLatency))
}

// CPUCoreSeconds is the CPU requested by existing pods over time (the cost).
func (r *Result) CPUCoreSeconds() float64 { return r.CPURequested }

// CPUUsedSeconds is the CPU actually used, core-seconds.
func (r *Result) CPUUsedSeconds() float64 {
	s := 0.0
	for _, c := range r.CPUUsed {
		s += c
	}
	return s
}

// MeetsSLO reports whether the run meets its latency objective: the mean
// latency within the target for a mean target (Percentile 0), else at most
// budget of the requests over it.
func (r *Result) MeetsSLO(budget float64) bool {
	if r.pct == 0 {
		return r.MeanLatency <= r.target
	}
	return float64(r.OverTarget) <= budget*float64(r.Requests)
}
