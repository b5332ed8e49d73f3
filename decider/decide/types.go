// Package decide is the QAS decision engine: given one workload's Spec and a
// Snapshot of its measurements, it chooses the cheapest action (vertical resize,
// migration off a hot node, horizontal scale, or nothing) whose modelled latency
// meets the target, and explains the choice.
//
// The package is pure: no Kubernetes, InfluxDB or clock imports. Time comes from
// Snapshot.Now, so the simulator and the controller drive the same code. The
// mathematics and the corrections to the thesis are in docs/model.md.
package decide

import (
	"time"
)

// ModelKind says how the pods of a workload are mapped to queues.
type ModelKind string

const (
	// ModelPooled is the thesis' view: one queue served by n·k servers.
	ModelPooled ModelKind = "pooled"
	// ModelPerPod is n independent M/M/k queues fed λ/n each, as a Service
	// spreading requests over pods behaves.
	ModelPerPod ModelKind = "per-pod"
	// ModelAuto picks, each cycle, whichever of pooled and per-pod modelled the
	// current allocation closer to the measured latency; per-pod (the
	// conservative one) when no latency was measured.
	ModelAuto ModelKind = "auto"
)

// Routing says how requests reach a workload's pods: the data plane in front of
// them. It decides the queue layout the model uses and how a backlog drains.
type Routing string

const (
	// RoutingRandom: each request goes to a ready pod chosen at random, as a
	// Kubernetes Service (kube-proxy iptables) does. Every pod has its own
	// queue; a backlog on one pod drains only through that pod.
	RoutingRandom Routing = "random"
	// RoutingLeastRequest: each request goes to the pod with the fewest
	// requests in flight (Envoy, Istio, Linkerd, IPVS least-connection). The
	// queues stay close to balanced, so the workload behaves close to one
	// pooled queue.
	RoutingLeastRequest Routing = "leastRequest"
	// RoutingPooled: requests wait in one queue in front of the pods and go to
	// a pod only when it has a free place (Knative's activator, the pooling
	// data plane): one M/M/(n·k) queue.
	RoutingPooled Routing = "pooled"
)

// ServiceModel says which queue formula is used.
type ServiceModel string

const (
	// ServiceMMc is M/M/c: Poisson arrivals, exponential service.
	ServiceMMc ServiceModel = "M/M/c"
	// ServiceAllenCunneen is G/G/c approximated by scaling the M/M/c waiting
	// time by (ca² + cs²)/2, from the measured squared coefficients of variation.
	ServiceAllenCunneen ServiceModel = "allen-cunneen"
)

// Mover says which pod leaves a hot node.
type Mover string

const (
	// MoverOwn moves the workload's own slowed pod to a cooler node (default):
	// it touches only what the autoscaler owns.
	MoverOwn Mover = "own"
	// MoverNeighbour moves the biggest other pod off the hot node (the thesis'
	// Algorithm 2).
	MoverNeighbour Mover = "neighbour"
)

// MoveMethod says how a pod can be moved to another node. The controller sets it
// from the pod's owner; the engine plans a move only for a pod that can be moved,
// and the plan carries the method.
type MoveMethod string

const (
	// MoveAny leaves the method to the caller (the zero value): the simulator
	// moves any pod.
	MoveAny MoveMethod = ""
	// MoveSurge starts a replacement first (the workload scaled up by one), then
	// removes this pod by scaling back: a ReplicaSet's scale-down removes the pod
	// with the lowest pod-deletion-cost first.
	MoveSurge MoveMethod = "surge"
	// MoveEvict evicts the pod, and its controller recreates it on another node
	// (a StatefulSet, whose scale-down would remove its highest ordinal instead).
	MoveEvict MoveMethod = "evict"
	// MoveNone: the pod cannot be moved, because nothing would recreate it on
	// another node or a scale-down would remove another pod. Pod.NoMove says why.
	MoveNone MoveMethod = "none"
)

// PolicyType is the unit of a scaling rate-limit policy.
type PolicyType string

const (
	// PolicyPods limits the change to Value pods per Period.
	PolicyPods PolicyType = "Pods"
	// PolicyPercent limits the change to Value percent of the replicas at the
	// start of the Period.
	PolicyPercent PolicyType = "Percent"
)

// SelectPolicy says how several policies of one direction combine.
type SelectPolicy string

const (
	// SelectMax allows the largest change any policy allows (HPA default).
	SelectMax SelectPolicy = "Max"
	// SelectMin allows the smallest change any policy allows.
	SelectMin SelectPolicy = "Min"
	// SelectDisabled forbids changes in this direction.
	SelectDisabled SelectPolicy = "Disabled"
)

// ScalingPolicy is one rate limit: at most Value pods (or percent) per Period.
type ScalingPolicy struct {
	Type   PolicyType
	Value  int32
	Period time.Duration
}

// ScalingRules are the stabilisation and rate limits of one direction, as in
// the HPA's behavior field.
type ScalingRules struct {
	// StabilizationWindow: scale down only to the highest recommendation
	// of this window (scale-up: to the lowest). Zero means act at once.
	StabilizationWindow time.Duration
	Policies            []ScalingPolicy
	SelectPolicy        SelectPolicy
}

// Behavior holds the rules per direction; nil fields take the defaults
// (DefaultScaleUp, DefaultScaleDown).
type Behavior struct {
	ScaleUp   *ScalingRules
	ScaleDown *ScalingRules
}

// DefaultScaleUp returns the HPA's scale-up rules: no stabilisation, at most
// max(4 pods, 100 %) per 15 s. Note there is no cooldown after a scale-up: a
// predictive step followed by a reactive step inside the lead is allowed (seed
// 000 lost its predictive gain to a 3-minute up-scale cooldown).
func DefaultScaleUp() ScalingRules {
	return ScalingRules{
		Policies: []ScalingPolicy{
			{Type: PolicyPods, Value: 4, Period: 15 * time.Second},
			{Type: PolicyPercent, Value: 100, Period: 15 * time.Second},
		},
		SelectPolicy: SelectMax,
	}
}

// DefaultScaleDown returns the scale-down rules: no stabilisation window, at
// most 100 % per 15 s. The HPA's fixed 5-minute maximum over noisy rates is
// replaced by the model's margin: a scale-down keeps the pods the likely λ over
// one lead needs (the jump ratio of the history) and waits while requests are
// queued beyond what the pods clear within the target (docs/model.md). A
// Behavior.ScaleDown with a window still applies on top.
func DefaultScaleDown() ScalingRules {
	return ScalingRules{
		Policies:     []ScalingPolicy{{Type: PolicyPercent, Value: 100, Period: 15 * time.Second}},
		SelectPolicy: SelectMax,
	}
}

// Vertical configures in-place CPU resizing.
type Vertical struct {
	Enabled bool
	// MinCPU and MaxCPU bound the CPU request per pod, in millicores.
	MinCPU, MaxCPU int64
	// PodOverheadCPU is the fixed cost of one more pod (sidecar, runtime), in
	// millicores; it is what makes fewer bigger pods cheaper than more small ones.
	PodOverheadCPU int64
	// CPUBoundFraction is f in E[S](r') ≈ E[S](r)·(f·r/r' + (1−f)); zero means
	// estimate it from usage against the limit and from throttling.
	CPUBoundFraction float64
}

// Migration configures moving pods off hot nodes.
type Migration struct {
	Enabled bool
	// NodeThreshold is φ: a node is hot when its absolute CPU utilisation
	// (used cores / allocatable cores) exceeds it. Default 0.85.
	NodeThreshold float64
	// Mover says which pod moves; default MoverOwn.
	Mover Mover
	// AllowLocalStorage allows moving a pod bound to node-local volumes; the
	// destination must then hold all of its volumes together. Pinned volumes
	// never move.
	AllowLocalStorage bool
	// SlowFactor: a pod whose service time exceeds SlowFactor × the workload's
	// median is slowed. Default 1.5.
	SlowFactor float64
	// ThrottleThreshold: a pod whose throttled fraction exceeds it is slowed.
	// Default 0.1.
	ThrottleThreshold float64
	// DataMoveBytesPerSecond estimates how fast local data moves; it turns
	// volume sizes into migration time. Default 100 MB/s.
	DataMoveBytesPerSecond float64
	// Cooldown is how long the workload waits after a migration ended (see
	// Engine.MigrationEnded) before it migrates again; it is also the first step
	// of the per-node back-off. The own mover waits only after moves that made
	// no progress (cooldown.go). Default 5 min.
	Cooldown time.Duration
}

// Predictive configures the predictive lead.
type Predictive struct {
	Enabled bool
	// LeadOverride, when positive, replaces the measured lead.
	LeadOverride time.Duration
	// InitPercentile is the percentile of init-time samples used as the lead;
	// default 90.
	InitPercentile float64
	// WindowFactor: the forecast uses λ history over WindowFactor × lead;
	// default 5.
	WindowFactor float64
	// Method is the forecaster; default ForecastLeastSquares: a line through
	// the whole window (5 leads of samples) is far less moved by one noisy
	// cycle than Holt's smoothing, whose trend a single burst of counts swings
	// and the lead then multiplies.
	Method ForecastMethod
}

// ForecastMethod names a λ forecaster.
type ForecastMethod string

const (
	// ForecastHolt is Holt's linear (double exponential) smoothing.
	ForecastHolt ForecastMethod = "holt"
	// ForecastLeastSquares is a least-squares line through the window,
	// centred on its mean time.
	ForecastLeastSquares ForecastMethod = "least-squares"
)

// Burst is a rise the user declares. The history may not show it (a cold
// start; a rise that comes once a month), and no policy that does not know the
// future meets a rise it has not seen without capacity held before it: the
// pods Ready during a rise's first lead were chosen before it began
// (docs/simulation.md, the onset bound). The jump floor and the scale-down's
// margin price it beside the history's jumps.
type Burst struct {
	// Rise is the largest multiple of λ's mean over the last lead that may
	// come within one lead without warning, in (1, 100]; zero: none declared.
	Rise float64
	// Every is how often at most such a rise comes (zero: DefaultBurstEvery):
	// the floor and the margin give leads at a ratio of Rise or more at least
	// lead/Every of their weight, at most a half.
	Every time.Duration
}

// Spec is what the user asked for one workload.
type Spec struct {
	MinReplicas, MaxReplicas int32
	// Target is the latency objective T.
	Target time.Duration
	// Percentile of the latency that must stay under Target, in (0,100); zero
	// means the mean latency (the thesis' rule).
	Percentile float64
	// Tolerance is θ: no horizontal action while G = L/T is in [1−θ, 1+θ].
	Tolerance float64
	// Concurrency is k, the requests one pod serves at once; default 1.
	Concurrency int
	// Model is the queue layout; default: from Routing (random: per-pod;
	// leastRequest and pooled: pooled), ModelPerPod when Routing is empty too.
	Model ModelKind
	// Routing is how requests reach the pods; default RoutingRandom (a
	// Service). It decides the default layout and how a backlog drains.
	Routing Routing
	// ServiceModel is the queue formula; default ServiceMMc.
	ServiceModel ServiceModel
	Vertical     Vertical
	Migration    Migration
	Predictive   Predictive
	Behavior     Behavior
	// Burst is a declared rise the floor and the margin price (none when
	// Rise is zero); percentile targets only.
	Burst Burst
	// MaxDataAge: measurements older than this make the engine hold; default 2 min.
	MaxDataAge time.Duration
}

// Sample is one arrival-rate observation.
type Sample struct {
	Time time.Time
	Rate float64 // requests per second
}

// Volume is a node-local volume a pod is bound to.
type Volume struct {
	Name      string
	Node      string
	SizeBytes int64
	// Pinned is true for data that stays on Node whatever happens to the pod: a
	// hostPath volume, or a PersistentVolume only Node can mount (a local volume).
	// A replacement pod elsewhere would not have it, so a pod with a pinned
	// volume never moves, even with AllowLocalStorage. Unpinned volumes (emptyDir
	// on disk) are recreated on the destination: SizeBytes of room there, and the
	// time to rebuild them, are the move's cost.
	Pinned bool
}

// Pod is one pod on a node: the workload's own pods, and (in Node.Pods)
// its neighbours.
type Pod struct {
	Name string
	Node string
	// Owned is true for the workload's own pods.
	Owned bool
	Ready bool
	// Terminating is true for a pod being deleted: it leaves its node anyway,
	// so it is never moved and does not count among the workload's pods there.
	Terminating bool
	// CPURequest and CPULimit in millicores; zero limit means none.
	CPURequest, CPULimit int64
	// CPUUsage in cores, absolute (not relative to the request; seed 001).
	CPUUsage float64
	// ThrottledFraction is the share of CFS periods throttled, in [0,1].
	ThrottledFraction float64
	// ServiceTime is this pod's mean service time in seconds; 0 if unknown.
	ServiceTime float64
	// InService and Queued are the requests the pod was serving and those
	// waiting in it for a place when it was last scraped (the proxy's in_flight
	// and waiting gauges); InFlightMean is the time-average of both together
	// over the last interval. A backlog shows here before it shows in λ.
	InService, Queued, InFlightMean float64
	// MeasuredLatency is the pod's latency at the spec's percentile over the
	// last interval, seconds; 0 if unknown.
	MeasuredLatency float64
	// LocalVolumes are node-local volumes the pod is bound to.
	LocalVolumes []Volume
	// Move is how the pod can be moved to another node (MoveAny when the caller
	// does not say); NoMove says why a MoveNone pod cannot.
	Move   MoveMethod
	NoMove string
}

// Node is one node's capacity and absolute usage.
type Node struct {
	Name string
	// AllocatableCPU and RequestedCPU (sum of pod requests) in millicores.
	AllocatableCPU, RequestedCPU int64
	// UsedCPU in cores, absolute.
	UsedCPU float64
	// FreeLocalStorageBytes is free capacity for node-local volumes.
	FreeLocalStorageBytes int64
	// Unschedulable is true for cordoned nodes (or nodes new pods may not use);
	// they are never migration destinations.
	Unschedulable bool
	// Pods on the node that are not the workload's (migration neighbours).
	Pods []Pod
}

// LatencyBucket is one bucket of a latency histogram.
type LatencyBucket struct {
	UpperBound float64 `json:"upperBound"` // seconds; +Inf for the last bucket
	Count      float64 `json:"count"`
}

// LatencyQuantile is one measured latency percentile.
type LatencyQuantile struct {
	Percentile float64 `json:"percentile"` // in (0,100)
	Seconds    float64 `json:"seconds"`
}

// Snapshot is one cycle's measurements of one workload.
type Snapshot struct {
	// Now is the decision time; the engine has no clock of its own.
	Now time.Time
	// FrontQueue is the requests waiting in the pooled data plane's front (routing
	// pooled, issue #20), on no pod yet: after a burst the backlog sits there, so it
	// counts in the backlog beyond the room the pods have left within the target.
	FrontQueue float64
	// FrontExpiredRate is the requests per second the pooled data plane's fronts
	// gave back unseen because no pod took them within the front's maximum wait
	// (or the front shut down): the senders' expired_requeued_rate +
	// expired_relayed_rate (expiry.go says why not front_expired_rate). Each
	// waited far beyond the target, so they are late requests and a backlog the
	// pods did not clear. FrontRefusedRate is the overflows per second the fronts
	// refused with their queue full; it is shown, not modelled (those requests
	// queue on their pods, which the pods' gauges count). Both 0 unless pooled.
	FrontExpiredRate, FrontRefusedRate float64
	// ArrivalRates is the λ history, oldest first; the last is the current λ.
	ArrivalRates []Sample
	// History is λ's long history, downsampled at a fixed step (the store's
	// 1-minute means over a day), oldest first, each sample timed at the end
	// of its step: the recurring-burst detector looks in it for onsets on a
	// clock (recur.go). Empty: no recurrence is looked for.
	History []Sample
	// ServiceTime is E[S] in seconds, ServiceSCV its squared coefficient of
	// variation (variance / mean²); zero means 1 (exponential). Arrivals are
	// taken as Poisson (an arrival SCV of 1): no proxy measures inter-arrival
	// times, and the closed loop's wait bias and the count dispersion of the
	// rate history correct what burstier arrivals add.
	ServiceTime float64
	ServiceSCV  float64
	// ServiceSamples is how many requests ServiceTime, ServiceSCV and
	// ServiceQuantiles were measured over (the collector's interval); 0 means
	// unknown (the engine then takes λ now × the newest interval, the short window). The
	// engine pools the intervals' measurements by it (service.go).
	ServiceSamples float64
	// MeasuredLatency is the latency measured by the proxies at Spec.Percentile
	// (or the mean), in seconds; zero if unknown. Used by ModelAuto and shown in
	// the explanation.
	MeasuredLatency float64
	// MeasuredQuantiles are latency percentiles the proxies measured over the
	// last interval (the collector stores p50, p95 and p99), ascending. The
	// closed loop reads from them the share of requests over the target.
	MeasuredQuantiles []LatencyQuantile
	// LatencyBuckets are the proxies' merged latency histogram over the same
	// interval as MeasuredQuantiles (the collector stores its bucket counts):
	// counts of requests whose latency is at most UpperBound and above the
	// previous bucket's, ascending, the last one's UpperBound +Inf. The closed
	// loop reads the share of requests over the target from it, exactly when
	// the target is a bucket bound; without it, from MeasuredQuantiles.
	LatencyBuckets []LatencyBucket
	// ServiceQuantiles are service-time percentiles (slot to end of
	// response, no queue wait) the proxies measured over the same interval
	// as ServiceTime, ascending, seconds > 0 (the collector stores p50, p90,
	// p95 and p99). The model's latency tail uses them instead of taking
	// service as exponential (docs/model.md section 1); none: exponential.
	ServiceQuantiles []LatencyQuantile
	// ServiceBuckets are the proxies' merged service-time histogram over the
	// same interval (the collector stores its bucket counts), in the form of
	// LatencyBuckets. The engine adds the intervals' counts over the memory
	// it pools E[S] over, and reads the service tail's shape from the sum,
	// which resolves any percentile at any rate; without them it averages
	// the intervals' ServiceQuantiles (docs/model.md section 1).
	ServiceBuckets []LatencyBucket
	// LatencySamples is how many requests MeasuredLatency was measured over; 0
	// means unknown (the engine then takes λ now × the newest interval, the short window).
	// It weighs the measurement when the model is corrected against it.
	LatencySamples float64
	// ShortArrivalRate is λ over the last ShortWindow (one scrape interval,
	// a few seconds): the fast path sees a burst in it before the cycle's λ
	// does. Zero window: no short-window data.
	ShortArrivalRate float64
	ShortWindow      time.Duration
	// RateCV2 is the relative variance of the per-second arrival rate beyond
	// Poisson noise (internal/ratevar.CV2 of the workload's per-second counts,
	// the pods' counts of each second added up), measured over RateCV2Pairs
	// pairs of successive whole seconds. It is an unbiased, noisy estimate, so
	// it may be slightly negative on Poisson traffic; the engine averages it
	// over cycles. Zero pairs: not measured (arrivals are taken as Poisson).
	RateCV2         float64
	RateCV2Pairs    float64
	CurrentReplicas int32
	ReadyReplicas   int32
	// Pods are the workload's own pods.
	Pods  []Pod
	Nodes []Node
	// InitTimes are recent pods' creation→Ready durations.
	InitTimes []time.Duration
	// DataTime is when the newest measurement was taken; zero means unknown.
	DataTime time.Time
	// Complete must be set true by the producer when every pod's and node's
	// data is present. False (also the zero value) never scales down: missing
	// data must not remove capacity.
	Complete bool
	// ResizeBlocked is set by the controller when the last in-place resize was
	// Infeasible or Deferred for too long; vertical candidates are then
	// infeasible and the engine falls back to migration or horizontal scaling.
	ResizeBlocked bool
}

// Action is a bit set of what a decision does.
type Action uint8

const (
	// ActionNone changes nothing.
	ActionNone Action = 0
	// ActionHorizontal changes the replica count.
	ActionHorizontal Action = 1
	// ActionVertical resizes the CPU of every pod in place.
	ActionVertical Action = 2
	// ActionMigrate moves one pod to another node.
	ActionMigrate Action = 4
)

// Has reports whether a includes b.
func (a Action) Has(b Action) bool { return a&b == b && b != 0 }

// String lists the actions joined by "+", or "none".
func (a Action) String() string {
	if a == ActionNone {
		return "none"
	}
	s := ""
	for _, x := range []struct {
		a    Action
		name string
	}{{ActionHorizontal, "horizontal"}, {ActionVertical, "vertical"}, {ActionMigrate, "migrate"}} {
		if a.Has(x.a) {
			if s != "" {
				s += "+"
			}
			s += x.name
		}
	}
	return s
}

// MigrationPlan says which pod moves where.
type MigrationPlan struct {
	Pod      string `json:"pod"`
	FromNode string `json:"fromNode"`
	ToNode   string `json:"toNode"`
	Mover    Mover  `json:"mover"`
	// Method is how the pod moves: the pod's Move (MoveAny when the caller did
	// not say).
	Method MoveMethod `json:"method,omitempty"`
	// DataBytes is the node-local data that moves with the pod.
	DataBytes int64 `json:"dataBytes"`
	// MoveTime estimates the data-move time (the migration's cost).
	MoveTime time.Duration `json:"-"`
	// PodsOnNode is the number of the workload's pods on FromNode when the
	// move was planned (those being deleted left out). The caller hands it back
	// with Engine.MigrationEnded: the own mover's pacing compares it with the
	// count after the move.
	PodsOnNode int `json:"podsOnNode,omitempty"`
}

// CandidateKind names one option the engine weighed.
type CandidateKind string

const (
	CandidateHold       CandidateKind = "hold"
	CandidateHorizontal CandidateKind = "horizontal"
	CandidateVertical   CandidateKind = "vertical"
	CandidateBoth       CandidateKind = "horizontal+vertical"
	CandidateMigrate    CandidateKind = "migrate"
)

// Candidate is one allocation the engine weighed.
type Candidate struct {
	Kind     CandidateKind `json:"kind"`
	Replicas int32         `json:"replicas"`
	// CPU per pod in millicores (0 when vertical is off).
	CPU int64 `json:"cpu"`
	// ModelledLatency in seconds at the spec's percentile (or mean); +Inf when unstable.
	ModelledLatency float64 `json:"modelledLatency"`
	// Cost is replicas × (CPU + overhead) in millicores, or replicas when
	// vertical is off.
	Cost        float64 `json:"cost"`
	MeetsTarget bool    `json:"meetsTarget"`
	Feasible    bool    `json:"feasible"`
	Note        string  `json:"note,omitempty"`
}

// NodeLoad is a node's absolute utilisation as the engine saw it.
type NodeLoad struct {
	Node        string  `json:"node"`
	Utilization float64 `json:"utilization"`
	Hot         bool    `json:"hot"`
}

// Explanation is every input the decision used and why it chose what it did.
type Explanation struct {
	ArrivalRate         float64 `json:"arrivalRate"`         // λ now, per second
	ForecastArrivalRate float64 `json:"forecastArrivalRate"` // λ at now + lead (0 when not predictive)
	// ForecastArrivalRateLow is the forecast's lower confidence bound at the
	// SLO's confidence, given the counts' dispersion: what the scale-up sizes
	// for (trend.spread).
	ForecastArrivalRateLow float64 `json:"forecastArrivalRateLow,omitempty"`
	// ForecastWindow is how far back the forecast's line runs: the longest
	// window, in whole leads up to the spec's WindowFactor, whose rates a line
	// fits within their counts' noise (forecast).
	ForecastWindow    time.Duration `json:"forecastWindow,omitempty"`
	SizingArrivalRate float64       `json:"sizingArrivalRate"` // the λ used for scale-up: the highest of now, the forecast's lower bound and the proven short-window and cycle rates
	ServiceTime       float64       `json:"serviceTime"`       // E[S] seconds (at the current CPU): the pooled estimate
	ServiceSCV        float64       `json:"serviceSCV"`
	// ServiceTimeInterval is E[S] as the newest interval measured it (0: none
	// served), ServiceSamples the requests the pooled estimate ServiceTime is
	// over, and ServiceNote how it was formed (service.go).
	ServiceTimeInterval float64 `json:"serviceTimeInterval,omitempty"`
	ServiceSamples      float64 `json:"serviceSamples,omitempty"`
	ServiceNote         string  `json:"serviceNote,omitempty"`
	ArrivalSCV          float64 `json:"arrivalSCV"`
	// RateCV2 is the averaged relative variance of the per-second arrival rate
	// beyond Poisson noise (Snapshot.RateCV2); at 0.01 or more the model averages
	// the latency over the seconds' rates (docs/model.md section 2c).
	RateCV2 float64 `json:"rateCV2,omitempty"`
	// ArrivalRateLevel is λ's mean over LevelWindow, the window over which a
	// mean of seconds whose rate varies with relative variance RateCV2 is within
	// the tolerance θ (cv²/θ² seconds, at most maxLevelWindow): the λ the model
	// sizes and scales down for when it averages over the seconds (0: the
	// cycle's λ).
	ArrivalRateLevel float64       `json:"arrivalRateLevel,omitempty"`
	LevelWindow      time.Duration `json:"levelWindow,omitempty"`
	CPUBoundFraction float64       `json:"cpuBoundFraction"`
	CurrentReplicas  int32         `json:"currentReplicas"`
	ReadyReplicas    int32         `json:"readyReplicas"`
	Servers          int           `json:"servers"` // c = replicas × k in the pooled view
	Concurrency      int           `json:"concurrency"`
	Model            ModelKind     `json:"model"`
	ServiceModel     ServiceModel  `json:"serviceModel"`
	Percentile       float64       `json:"percentile"` // 0 = mean
	Target           float64       `json:"target"`     // seconds
	Latency          float64       `json:"latency"`    // L modelled for the current allocation, seconds (+Inf when unstable)
	MeasuredLatency  float64       `json:"measuredLatency"`
	Normalized       float64       `json:"normalized"` // G = L / T, at λ now (its level, ArrivalRateLevel, when the model averages over the seconds)
	// SizingNormalized is L/T at the trigger λ (TriggerArrivalRate) and the
	// serving pods: what the scale-up test compares with 1 + θ.
	SizingNormalized float64 `json:"sizingNormalized"`
	// TriggerArrivalRate is the λ the scale-up test reads: the largest of the
	// cycle's and the short window's rates as far as their counts prove them,
	// the forecast's lower bound, a recurring onset's rate and λ's mean over
	// the last lead (capped at λ now).
	TriggerArrivalRate float64       `json:"triggerArrivalRate,omitempty"`
	Lead               time.Duration `json:"-"`
	Nodes              []NodeLoad    `json:"nodes,omitempty"`
	Candidates         []Candidate   `json:"candidates,omitempty"`
	// Recommendation is the replica count the model wanted before
	// stabilisation, rate limits and bounds.
	Recommendation int32 `json:"recommendation"`
	// Stabilized is the recommendation after the stabilisation window.
	Stabilized int32  `json:"stabilized"`
	Reason     string `json:"reason"`
	// HeldBecause is set when the engine held for lack of trustworthy data.
	HeldBecause string `json:"heldBecause,omitempty"`

	// Routing is the data plane the model assumed.
	Routing Routing `json:"routing,omitempty"`
	// ShortArrivalRate is λ over the short window and ShortArrivalRateLow its
	// lower confidence bound at the spec's percentile: the rate the fast path
	// has proven (it sizes for it when above λ now).
	ShortArrivalRate    float64 `json:"shortArrivalRate,omitempty"`
	ShortArrivalRateLow float64 `json:"shortArrivalRateLow,omitempty"`
	// ArrivalRateHigh is λ now's upper confidence bound: a scale-down needs G
	// below the band at it too, and keeps the pods it needs. While the budget
	// is spent (SpentLateShare > 0) it is λ now: the measured late share is
	// the evidence.
	ArrivalRateHigh float64 `json:"arrivalRateHigh,omitempty"`
	// Backlog is the requests queued beyond what the pods clear within the
	// target (k·T/E[S] each), summed over pods; BacklogMaxPod the largest on one
	// pod. BacklogAtLead is what the fluid model says is left when pods ordered
	// now are ready (one lead later) at the current pod count.
	Backlog       float64 `json:"backlog"`
	BacklogMaxPod float64 `json:"backlogMaxPod,omitempty"`
	BacklogAtLead float64 `json:"backlogAtLead,omitempty"`
	// FrontExpiredRate and FrontRefusedRate are the snapshot's (requests per
	// second the pooled fronts gave back unseen past their maximum wait, and
	// refused with their queue full); BacklogExpired is the part of Backlog that
	// the expiries add: FrontExpiredRate × the last interval; ExpiredLateShare
	// the expiries' share of λ now, the floor under MeasuredLateShare (expiry.go).
	FrontExpiredRate float64 `json:"frontExpiredRate,omitempty"`
	FrontRefusedRate float64 `json:"frontRefusedRate,omitempty"`
	BacklogExpired   float64 `json:"backlogExpired,omitempty"`
	ExpiredLateShare float64 `json:"expiredLateShare,omitempty"`
	// DrainHorizon is the time, seconds, the backlog left at the lead is given
	// to drain; DrainReplicas the pods that drains it (0: no backlog).
	DrainHorizon  float64 `json:"drainHorizon,omitempty"`
	DrainReplicas int32   `json:"drainReplicas,omitempty"`
	// LatencyBias is the online correction of E[S]: the model sizes with
	// E[S] × LatencyBias, learnt by comparing modelled and measured latency;
	// LatencyBiasObserved is this cycle's value (0: not observed, and
	// LatencyBiasNote says why).
	LatencyBias         float64 `json:"latencyBias"`
	LatencyBiasObserved float64 `json:"latencyBiasObserved,omitempty"`
	// MeasuredLateShare is the share of the last interval's requests over the
	// target, read from the proxies' latency histogram (the measured quantiles
	// without one), never below the share of arrivals the pooled fronts gave
	// back unseen (measuredLateShare), and ModelledLateShare the model's
	// P(T > target) for the same allocation: the closed loop moves the
	// correction by their difference in requests. Both 0: the loop did not
	// compare this cycle.
	MeasuredLateShare float64 `json:"measuredLateShare,omitempty"`
	ModelledLateShare float64 `json:"modelledLateShare,omitempty"`
	// SteadyLateShare is ModelledLateShare with every second at its steady
	// state (second.go): above it by what the seconds near the pods' capacity
	// priced at their one-second transient took off; equal to it where the
	// rate does not vary from second to second or the transient changed
	// nothing. 0 with the other two.
	SteadyLateShare float64 `json:"steadyLateShare,omitempty"`
	LatencyBiasNote string  `json:"latencyBiasNote,omitempty"`
	// JumpRatio is the margin kept on scale-down: the spec's percentile of the
	// ratio of λ's mean over the next lead to its mean over the previous lead,
	// over the λ history (JumpSamples ratios); DownArrivalRate is the λ a
	// scale-down must still serve (λ's mean over the last lead × JumpRatio).
	JumpRatio       float64 `json:"jumpRatio,omitempty"`
	JumpSamples     int     `json:"jumpSamples,omitempty"`
	DownArrivalRate float64 `json:"downArrivalRate,omitempty"`
	// JumpPeak says the jump ratios are the highest cycle rate within the next
	// lead over the last lead's mean, not the next lead's mean (the cycle's
	// rates vary no more than Poisson counts: jumpsOver).
	JumpPeak bool `json:"jumpPeak,omitempty"`
	// DownJumpPeak says the same of the ratios the scale-down's margin read
	// (set when it ran): the peaks wherever the floor's are, and also under the
	// rate mixture while one sample's own noise is within the tolerance band
	// (cv²/step ≤ θ²).
	DownJumpPeak bool `json:"downJumpPeak,omitempty"`
	// JumpPeakHeld and DownJumpPeakHeld say the floor's and the margin's
	// peaks are held ones (once the λ history spans a p-quantile's leads):
	// the highest level within the next lead that a lead's mean holds, or its
	// highest sample as far as that sample's count proves it (jumpsOver,
	// sizer.jumpRead).
	JumpPeakHeld     bool `json:"jumpPeakHeld,omitempty"`
	DownJumpPeakHeld bool `json:"downJumpPeakHeld,omitempty"`
	// JumpRatioMax is the largest of those ratios (at least 1). A percentile
	// target's floor and scale-down count it as one more lead of the history
	// (by the rule of succession, the chance that the next lead brings a jump
	// that large), JumpUnseenWeight being that lead's share of the leads
	// (jumpLeads); a mean target's scale-down uses it instead of JumpRatio
	// while the history spans fewer than 1/(1−p) leads (0: not used).
	JumpRatioMax     float64 `json:"jumpRatioMax,omitempty"`
	JumpUnseenWeight float64 `json:"jumpUnseenWeight,omitempty"`
	// UnseenRiseRatio is where the scale-down's margin put that extra lead
	// instead, a rate the history ran at and has not shown a rise to, ÷ λ's
	// mean over the last lead (noRiseRatio; 0: at JumpRatioMax): while none of
	// the history's ratios has risen (JumpRatioMax 1), its highest mean over
	// one lead; while it spans fewer than the 1/(1−p) leads a p-quantile
	// needs, also the rate it started at, its mean over its first lead.
	UnseenRiseRatio float64 `json:"unseenRiseRatio,omitempty"`
	// DeclaredRise is the spec's declared rise (Spec.Burst.Rise) the floor
	// and the margin priced beside the history's jumps, and
	// DeclaredRiseWeight the share of their leads it was given: what lead ÷
	// every asks beyond the history's own leads at that ratio or more (0 when
	// the history already shows it that often).
	DeclaredRise       float64 `json:"declaredRise,omitempty"`
	DeclaredRiseWeight float64 `json:"declaredRiseWeight,omitempty"`
	// JumpsRescaled counts the history's jump ratios seen from a base below
	// the present's (λ's mean over the last lead), which count here as the
	// same rise in requests per second, not the same ratio (atBase).
	JumpsRescaled int `json:"jumpsRescaled,omitempty"`
	// JumpReplicas is the floor the history's jumps put under the steady
	// state: the fewest pods whose modelled late share over the likely λ of
	// the next lead (λ's mean over the last lead × each jump ratio) is within
	// JumpBudget; JumpLateShare that share (0: no floor, too little history).
	// JumpBudget is 1 − p, or while the steady state spends the budget the
	// recent requests left unused, the budget as spent (1 − EffectivePercentile
	// / 100); the scale-down's margin (DownLateShare) keeps 1 − p.
	JumpReplicas  int32   `json:"jumpReplicas,omitempty"`
	JumpLateShare float64 `json:"jumpLateShare,omitempty"`
	JumpBudget    float64 `json:"jumpBudget,omitempty"`
	// JumpBand is how far over JumpBudget the history's jumps may put the
	// current pods' late share (JumpCurrentLateShare) before the floor
	// orders more: what the recent requests left of the budget unused, less
	// the share's error at the SLO's confidence, at most θ × the budget (0:
	// none, and the floor orders at its budget). JumpHeld says the floor
	// asked for more pods than there are and the band held them
	// (Engine.floorCalls).
	JumpBand             float64 `json:"jumpBand,omitempty"`
	JumpCurrentLateShare float64 `json:"jumpCurrentLateShare,omitempty"`
	JumpHeld             bool    `json:"jumpHeld,omitempty"`
	// JumpBase is the λ the floor multiplies by each jump: λ's mean over the
	// last lead at its lower confidence bound, given the counts' dispersion;
	// the scale-down's margin multiplies the mean itself (DownArrivalRate).
	JumpBase float64 `json:"jumpBase,omitempty"`
	// DownLateShare is the modelled late share, over the history's jumps, of
	// the pods a percentile target's scale-down keeps.
	DownLateShare float64 `json:"downLateShare,omitempty"`
	// RecentJumps counts the jumps over one lead in the last RecentHistory,
	// which the scale-down's margin also prices on their own when the
	// history spans more (0: it did not); RecentMarginReplicas is the count
	// they asked for when it was more than the whole history's, and the
	// margin kept it (0: not more).
	RecentJumps          int   `json:"recentJumps,omitempty"`
	RecentMarginReplicas int32 `json:"recentMarginReplicas,omitempty"`
	// Depth is λ's mean over the last lead ÷ its level, its mean over the
	// depthLeads leads before, when a percentile target's scale-down weighed
	// it (0: not weighed); DepthJumps counts the history's jumps from the
	// depths nearest it, and DepthMarginReplicas the pods they alone asked
	// for, when that was more than the other histories asked and the margin
	// kept it (0: not more).
	Depth               float64 `json:"depth,omitempty"`
	DepthJumps          int     `json:"depthJumps,omitempty"`
	DepthMarginReplicas int32   `json:"depthMarginReplicas,omitempty"`
	// CountDispersion is the measured index of dispersion of arrival counts
	// (variance over mean; 1 for Poisson) the rate bounds use.
	CountDispersion float64 `json:"countDispersion,omitempty"`
	// RepeatedData is true when the snapshot's newest interval (its DataTime)
	// was folded into the engine's averages by an earlier decision: the
	// decider was called again before the collector's next point. The
	// decision is taken on it again, but the count dispersion, the rate's cv²,
	// the service time, the closed loop's correction and late shares, and
	// the backlog's persistence count each interval once.
	RepeatedData bool `json:"repeatedData,omitempty"`
	// TransientLateShare is the share of recent requests that transients
	// (backlogs) put over the target, measured; EffectivePercentile the
	// percentile the model sized for: the spec's, stricter by up to
	// maxPayback of the budget while recent transients' late requests are paid
	// back, looser by SpentLateShare (Engine.spendBudget).
	TransientLateShare  float64 `json:"transientLateShare,omitempty"`
	EffectivePercentile float64 `json:"effectivePercentile,omitempty"`
	// RecentLateShare is the share of the last RecentRequests requests (an
	// exponentially weighted count, the closed loop's memory) over the target,
	// measured, and RecentLateShareError its standard error (the cycles as
	// clusters); SpentLateShare what the steady state spent of the budget they
	// left unused beyond that error at the SLO's confidence:
	// EffectivePercentile is then looser than the spec's by that much
	// (Engine.spendBudget).
	RecentLateShare      float64 `json:"recentLateShare,omitempty"`
	RecentRequests       float64 `json:"recentRequests,omitempty"`
	RecentLateShareError float64 `json:"recentLateShareError,omitempty"`
	SpentLateShare       float64 `json:"spentLateShare,omitempty"`
	// LongLateShare is the share of the last LongRequests requests over the
	// target (an exponentially weighted count, ten times the loop's memory),
	// and LongLateShareError its standard error; TightenedBudget the late
	// share the jump floor and the scale-down's margin aim at while
	// LongLateShare is over the budget less twice that error at the SLO's
	// confidence (0: the budget itself; Engine.tightenBudget).
	LongLateShare      float64 `json:"longLateShare,omitempty"`
	LongRequests       float64 `json:"longRequests,omitempty"`
	LongLateShareError float64 `json:"longLateShareError,omitempty"`
	TightenedBudget    float64 `json:"tightenedBudget,omitempty"`
	// Recurrence is the recurring-burst detector's finding over the long
	// history (period, occurrences, evidence, the next onset and its forecast
	// λ, whether it applies now; Note says why not); nil when the snapshot
	// has no long history or predictive scaling is off.
	Recurrence *Recurrence `json:"recurrence,omitempty"`
	// TailModel is how the service part of the latency tail was modelled:
	// TailMeasured (from ServiceQuantiles, the averaged measured service-time
	// quantiles, seconds at E[S]) or TailExponential; TailNote says why and
	// compares. ServiceLateShare is the modelled share of service times alone
	// over the target (the latency floor's share). ServiceShapeWeight is the
	// measured quantiles' weight against the exponential's in
	// ServiceQuantiles (below 1 until enough requests were measured to know
	// the tail: tail.go shapeEvidence).
	TailModel          string            `json:"tailModel,omitempty"`
	ServiceQuantiles   []LatencyQuantile `json:"serviceQuantiles,omitempty"`
	ServiceLateShare   float64           `json:"serviceLateShare,omitempty"`
	ServiceShapeWeight float64           `json:"serviceShapeWeight,omitempty"`
	TailNote           string            `json:"tailNote,omitempty"`
}

// Decision is the outcome of one cycle for one workload.
type Decision struct {
	Time            time.Time `json:"time"`
	Action          Action    `json:"action"`
	DesiredReplicas int32     `json:"desiredReplicas"`
	// DesiredCPU per pod in millicores; 0 when unchanged or vertical is off.
	// It applies to the running pods (in-place resize) and to new ones.
	DesiredCPU  int64          `json:"desiredCPU"`
	Migration   *MigrationPlan `json:"migration,omitempty"`
	Explanation Explanation    `json:"explanation"`
}
