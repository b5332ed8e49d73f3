package decide

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/queueing"
)

// Defaults applied to zero-valued Spec fields.
const (
	DefaultMaxDataAge = 2 * time.Minute
	// DefaultBurstEvery is how often a declared rise comes at most when the
	// spec does not say (Burst.Every); MinBurstEvery and MaxBurstEvery bound
	// what it may say, MaxBurstRise the rise (the CRD's bounds too).
	DefaultBurstEvery        = time.Hour
	MinBurstEvery            = time.Minute
	MaxBurstEvery            = 720 * time.Hour
	MaxBurstRise             = 100.0
	DefaultNodeThreshold     = 0.85
	DefaultSlowFactor        = 1.5
	DefaultThrottleThreshold = 0.1
	DefaultDataMoveRate      = 100e6 // bytes per second
	DefaultInitPercentile    = 90
	DefaultWindowFactor      = 5
	// infeasibleSlack: when no pod count can meet the target (it is below the
	// latency floor), size for this multiple of the floor instead, so the
	// workload is at least stable and close to its best.
	infeasibleSlack = 1.1
)

// Engine decides for one workload and keeps what must persist across its
// cycles: the recommendation history for stabilisation, the recent scale
// events for rate limits, and the migration pacing (cooldown.go). Use one
// Engine per workload. An Engine is not safe for
// concurrent use; different Engines are independent.
type Engine struct {
	recs   []recommendation
	events []scaleEvent
	// migrationEnded is when the last migration ended (unix nanoseconds; 0 none).
	migrationEnded int64
	// lastFrom is the node the last migration was off, lastMoved whether its
	// pod left it ("" and false: not known).
	lastFrom  string
	lastMoved bool
	movedOff  []movedOff
	// bias is the closed loop's correction of the waiting time's variability
	// (0: none yet, i.e. 1); lastBacklog the backlog seen by the previous
	// decision (a backlog seen twice in a row is a transient, not noise).
	bias        float64
	lastBacklog float64
	// disp is the dispersion of short-window counts (0: none yet, i.e. 1),
	// over dispN samples.
	disp, dispN float64
	// cv2Sum and cv2Pairs are the pairs-weighted sums of the measured relative
	// variance of the per-second rate (mixture.go), forgetting as pairs come.
	cv2Sum, cv2Pairs float64
	// recent and long are the closed loop's counts of measured requests over
	// the target (queue.go lateMemory) over its memory, biasTailSamples/budget
	// requests, and longMemory times that (the share the SLO is judged on,
	// over hours rather than minutes); lateTransient counts, over the recent
	// memory, those over the target in transient cycles.
	recent, long  lateMemory
	lateTransient float64
	// recur is the last recurring-burst detection (recur.go), kept while
	// the long history is unchanged; not part of State: the history it is
	// computed from is in the store.
	recur *recurCache
	// shape is the averaged measured service-time quantiles, as multiples of
	// E[S] (tail.go; nil: none measured yet).
	shape []LatencyQuantile
	// shapeSamples is the requests shape was measured over since it started
	// afresh: the evidence it is weighed by (tail.go).
	shapeSamples float64
	// svcHist is the pooled service-time histogram, each bucket's share of the
	// pooled requests (servicehist.go; nil: none measured).
	svcHist []LatencyBucket
	// service is the pooled service-time estimate (service.go).
	service serviceEstimate
	// foldedAt is the data time (unix nanoseconds) of the newest interval
	// folded into the averages above (fresh).
	foldedAt int64
}

type recommendation struct {
	at       int64 // unix nanoseconds
	replicas int32
}

type scaleEvent struct {
	at    int64
	delta int32 // replicas added (>0) or removed (<0)
}

// NewEngine returns an Engine with no history.
func NewEngine() *Engine { return &Engine{} }

// State is an Engine's memory, exported so that a decider can persist it and
// resume after a restart or leader change without forgetting its stabilisation
// window, rate-limit budget or migration pacing.
type State struct {
	Recommendations []StateRecommendation
	ScaleEvents     []StateScaleEvent
	// MigrationEnded is when the workload's last migration ended (zero: none
	// remembered); the cooldown counts from it.
	MigrationEnded time.Time `json:",omitzero"`
	// MigrationFrom is the node the last migration was off, and MigrationMoved
	// whether its pod left it: the own mover waives the cooldown after a
	// completed move that reduced the workload's pods there (empty: not known,
	// as in a state written before they were kept).
	MigrationFrom  string `json:",omitempty"`
	MigrationMoved bool   `json:",omitempty"`
	// MovedOff are the nodes moved off that have not been seen cool since (the
	// per-node back-off).
	MovedOff []StateMovedOff `json:",omitempty"`
	// LatencyBias is the online correction of E[S] learnt from measured
	// latency (0: none yet).
	LatencyBias float64 `json:",omitempty"`
	// CountDispersion is the measured dispersion of short-window arrival
	// counts (0: none yet).
	CountDispersion float64 `json:",omitempty"`
	// CountDispersionSamples is how many decisions' counts CountDispersion
	// is over (0 with a CountDispersion: a state written before 2026-11-27,
	// read as a full memory).
	CountDispersionSamples float64 `json:",omitempty"`
	// ServiceMean and ServiceSCV are the pooled service-time estimate's E[S]
	// (seconds) and SCV, over ServiceSamples requests (decayed), measured at
	// the pods' mean CPU request ServiceCPU (millicores; 0: unknown); zero
	// samples: none yet (service.go). A state written before the pooled
	// estimate has only ServiceSCV, which is then forgotten.
	ServiceMean    float64 `json:",omitempty"`
	ServiceSCV     float64 `json:",omitempty"`
	ServiceSamples float64 `json:",omitempty"`
	ServiceCPU     float64 `json:",omitempty"`
	// RateCV2 is the averaged relative variance of the per-second arrival rate
	// (unclamped), over RateCV2Pairs pairs of seconds (0: none measured yet).
	RateCV2      float64 `json:",omitempty"`
	RateCV2Pairs float64 `json:",omitempty"`
	// ServiceShape is the averaged measured service-time quantiles, Seconds
	// as multiples of E[S] (none: not measured yet).
	ServiceShape []LatencyQuantile `json:",omitempty"`
	// ServiceShapeSamples is the requests ServiceShape was measured over since
	// it last started afresh (none in a state saved before it was kept: the
	// shape is then weighed as if just started).
	ServiceShapeSamples float64 `json:",omitempty"`
	// ServiceHistogramBounds and ServiceHistogramShares are the pooled
	// service-time histogram: its finite upper bounds, ascending, and each
	// bucket's share of the pooled requests, one more than the bounds (the
	// last the +Inf bucket's, which JSON cannot name). None: not measured yet.
	ServiceHistogramBounds []float64 `json:",omitempty"`
	ServiceHistogramShares []float64 `json:",omitempty"`
	// RecentLate and LongLate are the closed loop's counts of measured
	// requests over the target, over its memory and its long memory
	// (queue.go recordLate): without them a restart would forget the share
	// the budget is spent or tightened by (none: a state written before they
	// were kept; they start afresh).
	RecentLate *StateLateCounts `json:",omitempty"`
	LongLate   *StateLateCounts `json:",omitempty"`
}

// StateLateCounts are exponentially weighted counts of requests, of those
// over the target (Late) and of those over it in transient cycles
// (Transient; recent memory only), and the share's variance, the cycles as
// clusters (LateSq).
type StateLateCounts struct {
	Requests, Late, Transient, LateSq float64
}

// memory is the late counts c holds (its Transient is the engine's apart).
func (c *StateLateCounts) memory() lateMemory {
	return lateMemory{reqs: c.Requests, late: c.Late, sq: c.LateSq}
}

// valid reports whether c can be restored: finite, non-negative, at most as
// many late requests as requests.
func (c *StateLateCounts) valid() bool {
	if c == nil {
		return false
	}
	for _, v := range []float64{c.Requests, c.Late, c.Transient, c.LateSq} {
		if badFloat(v) || v < 0 {
			return false
		}
	}
	return c.Requests > 0 && c.Late <= c.Requests && c.Transient <= c.Late
}

// StateRecommendation is one past recommendation.
type StateRecommendation struct {
	Time     time.Time
	Replicas int32
}

// StateScaleEvent is one past change of replicas (negative: removed).
type StateScaleEvent struct {
	Time  time.Time
	Delta int32
}

// State returns a copy of the engine's memory.
func (e *Engine) State() State {
	var s State
	for _, r := range e.recs {
		s.Recommendations = append(s.Recommendations, StateRecommendation{Time: time.Unix(0, r.at).UTC(), Replicas: r.replicas})
	}
	for _, ev := range e.events {
		s.ScaleEvents = append(s.ScaleEvents, StateScaleEvent{Time: time.Unix(0, ev.at).UTC(), Delta: ev.delta})
	}
	if e.migrationEnded != 0 {
		s.MigrationEnded = time.Unix(0, e.migrationEnded).UTC()
	}
	s.MigrationFrom, s.MigrationMoved = e.lastFrom, e.lastMoved
	s.LatencyBias, s.CountDispersion, s.CountDispersionSamples = e.bias, e.disp, e.dispN
	if e.service.n > 0 {
		s.ServiceMean, s.ServiceSCV, s.ServiceSamples, s.ServiceCPU = e.service.mean(), e.service.scv(), e.service.n, e.service.cpu
	}
	if e.cv2Pairs > 0 {
		s.RateCV2, s.RateCV2Pairs = e.cv2Sum/e.cv2Pairs, e.cv2Pairs
	}
	s.ServiceShape = append([]LatencyQuantile(nil), e.shape...)
	if len(e.shape) > 0 || len(e.svcHist) > 0 {
		s.ServiceShapeSamples = e.shapeSamples
	}
	for i, b := range e.svcHist {
		if i < len(e.svcHist)-1 {
			s.ServiceHistogramBounds = append(s.ServiceHistogramBounds, b.UpperBound)
		}
		s.ServiceHistogramShares = append(s.ServiceHistogramShares, b.Count)
	}
	s.RecentLate, s.LongLate = e.recent.state(), e.long.state()
	if s.RecentLate != nil {
		s.RecentLate.Transient = e.lateTransient
	}
	for _, m := range e.movedOff {
		s.MovedOff = append(s.MovedOff, StateMovedOff{Node: m.node, Last: time.Unix(0, m.last).UTC(), Moves: m.moves,
			Pods: m.pods, Stalled: m.stalled})
	}
	return s
}

// serviceHistogram is the pooled service-time histogram s holds, as the
// engine keeps it (the last bucket's bound +Inf); nil when the shares are not
// one more than the bounds.
func (s State) serviceHistogram() []LatencyBucket {
	if len(s.ServiceHistogramShares) != len(s.ServiceHistogramBounds)+1 {
		return nil
	}
	out := make([]LatencyBucket, len(s.ServiceHistogramShares))
	for i, c := range s.ServiceHistogramShares {
		out[i] = LatencyBucket{UpperBound: math.Inf(1), Count: c}
		if i < len(s.ServiceHistogramBounds) {
			out[i].UpperBound = s.ServiceHistogramBounds[i]
		}
	}
	return out
}

// NewEngineFromState returns an Engine that remembers s.
func NewEngineFromState(s State) *Engine {
	e := &Engine{}
	for _, r := range s.Recommendations {
		e.recs = append(e.recs, recommendation{at: r.Time.UnixNano(), replicas: r.Replicas})
	}
	for _, ev := range s.ScaleEvents {
		e.events = append(e.events, scaleEvent{at: ev.Time.UnixNano(), delta: ev.Delta})
	}
	if !s.MigrationEnded.IsZero() {
		e.migrationEnded = s.MigrationEnded.UnixNano()
	}
	e.lastFrom, e.lastMoved = s.MigrationFrom, s.MigrationMoved
	if s.LatencyBias >= biasMin && s.LatencyBias <= biasMax {
		e.bias = s.LatencyBias
	}
	if s.CountDispersion > 0 && !math.IsInf(s.CountDispersion, 0) {
		e.disp, e.dispN = s.CountDispersion, dispersionMemory
		if n := s.CountDispersionSamples; n > 0 && !badFloat(n) {
			e.dispN = n
		}
	}
	if s.ServiceSamples > 0 && s.ServiceMean > 0 && s.ServiceSCV >= 0 && s.ServiceCPU >= 0 &&
		!badFloat(s.ServiceSamples) && !badFloat(s.ServiceMean) && !badFloat(s.ServiceSCV) && !badFloat(s.ServiceCPU) {
		n, m := s.ServiceSamples, s.ServiceMean
		e.service = serviceEstimate{n: n, sum: n * m, sumSq: n * (1 + s.ServiceSCV) * m * m, cpu: s.ServiceCPU}
	}
	if s.RateCV2Pairs > 0 && !badFloat(s.RateCV2Pairs) && !badFloat(s.RateCV2) && math.Abs(s.RateCV2) <= maxRateCV2 {
		e.cv2Sum, e.cv2Pairs = s.RateCV2*s.RateCV2Pairs, s.RateCV2Pairs
	}
	if hist := s.serviceHistogram(); validBuckets(hist) {
		e.svcHist = hist
	}
	if (validQuantiles(s.ServiceShape, true) || len(e.svcHist) > 0) && s.ServiceShapeSamples > 0 && !badFloat(s.ServiceShapeSamples) {
		e.shapeSamples = s.ServiceShapeSamples
	}
	if validQuantiles(s.ServiceShape, true) {
		e.shape = append([]LatencyQuantile(nil), s.ServiceShape...)
	}
	if c := s.RecentLate; c.valid() {
		e.recent, e.lateTransient = c.memory(), c.Transient
	}
	if c := s.LongLate; c.valid() {
		e.long = c.memory()
	}
	for _, m := range s.MovedOff {
		if m.Node != "" && m.Moves > 0 {
			e.movedOff = append(e.movedOff, movedOff{node: m.Node, last: m.Last.UnixNano(), moves: m.Moves,
				pods: max(m.Pods, 0), stalled: max(m.Stalled, 0)})
		}
	}
	return e
}

// withDefaults fills the zero fields that have defaults.
func withDefaults(s Spec) Spec {
	if s.Concurrency == 0 {
		s.Concurrency = 1
	}
	if s.Routing == "" {
		s.Routing = RoutingRandom
	}
	if s.Model == "" {
		s.Model = ModelPerPod
		if s.Routing != RoutingRandom {
			s.Model = ModelPooled
		}
	}
	if s.ServiceModel == "" {
		s.ServiceModel = ServiceMMc
	}
	if s.MaxDataAge == 0 {
		s.MaxDataAge = DefaultMaxDataAge
	}
	if s.Burst.Rise != 0 && s.Burst.Every == 0 {
		s.Burst.Every = DefaultBurstEvery
	}
	if s.Migration.NodeThreshold == 0 {
		s.Migration.NodeThreshold = DefaultNodeThreshold
	}
	if s.Migration.Mover == "" {
		s.Migration.Mover = MoverOwn
	}
	if s.Migration.SlowFactor == 0 {
		s.Migration.SlowFactor = DefaultSlowFactor
	}
	if s.Migration.ThrottleThreshold == 0 {
		s.Migration.ThrottleThreshold = DefaultThrottleThreshold
	}
	if s.Migration.DataMoveBytesPerSecond == 0 {
		s.Migration.DataMoveBytesPerSecond = DefaultDataMoveRate
	}
	if s.Migration.Cooldown == 0 {
		s.Migration.Cooldown = DefaultMigrationCooldown
	}
	if s.Predictive.InitPercentile == 0 {
		s.Predictive.InitPercentile = DefaultInitPercentile
	}
	if s.Predictive.WindowFactor == 0 {
		s.Predictive.WindowFactor = DefaultWindowFactor
	}
	if s.Predictive.Method == "" {
		s.Predictive.Method = ForecastLeastSquares
	}
	return s
}

func rules(r *ScalingRules, def func() ScalingRules) ScalingRules {
	if r == nil {
		return def()
	}
	out := *r
	if out.SelectPolicy == "" {
		out.SelectPolicy = SelectMax
	}
	return out
}

// maxPayback is the largest share of the budget 1 − p the steady state gives
// back to the late requests of recent transients: p95 is sized at most as p96.
// A fifth keeps the stricter percentile's service-time floor within 8 % of
// p95's for exponential service (ln 25 / ln 20), so the pods it costs stay of
// the order of the late requests it buys back; measured on the matrix of
// docs/simulation.md it met 4 more cells (40 of 59 against 36) for a median
// cost 1.4 % higher against the clairvoyant oracle, 7 % against the reactive.
const maxPayback = 0.2

// maxRateCV2 bounds Snapshot.RateCV2: a per-second rate whose relative variance
// is 10⁴ arrives in one second of every 10⁴ on average; beyond that the figure is
// no measurement of a workload.
const maxRateCV2 = 1e4

// validateSnapshot rejects values no collector should produce (NaN, negative).
// Missing or stale data is not an error: the engine holds on it.
func validateSnapshot(s Snapshot) error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, fieldErr(field, format, args...)) }
	if s.Now.IsZero() {
		add("snapshot.now", "must be set (the engine has no clock)")
	}
	for i, r := range s.ArrivalRates {
		if badFloat(r.Rate) || r.Rate < 0 {
			add(fmt.Sprintf("snapshot.arrivalRates[%d].rate", i), "must be finite and non-negative, got %v", r.Rate)
		}
		if i > 0 && r.Time.Before(s.ArrivalRates[i-1].Time) {
			add(fmt.Sprintf("snapshot.arrivalRates[%d].time", i), "must not be before the previous sample's (oldest first)")
		}
	}
	for i, r := range s.History {
		if badFloat(r.Rate) || r.Rate < 0 {
			add(fmt.Sprintf("snapshot.history[%d].rate", i), "must be finite and non-negative, got %v", r.Rate)
		}
		if i > 0 && !r.Time.After(s.History[i-1].Time) {
			add(fmt.Sprintf("snapshot.history[%d].time", i), "must be after the previous sample's (oldest first, one sample per step)")
		}
	}
	if badFloat(s.ServiceTime) || s.ServiceTime < 0 {
		add("snapshot.serviceTime", "must be finite and non-negative seconds, got %v", s.ServiceTime)
	}
	if badFloat(s.ServiceSCV) || s.ServiceSCV < 0 {
		add("snapshot.serviceSCV", "must be finite and non-negative, got %v", s.ServiceSCV)
	}
	if badFloat(s.ServiceSamples) || s.ServiceSamples < 0 {
		add("snapshot.serviceSamples", "must be finite and non-negative, got %v", s.ServiceSamples)
	}
	if badFloat(s.MeasuredLatency) || s.MeasuredLatency < 0 {
		add("snapshot.measuredLatency", "must be finite and non-negative, got %v", s.MeasuredLatency)
	}
	if s.CurrentReplicas < 0 || s.ReadyReplicas < 0 {
		add("snapshot.currentReplicas", "replica counts must not be negative")
	}
	for i, q := range s.MeasuredQuantiles {
		if badFloat(q.Percentile) || q.Percentile <= 0 || q.Percentile >= 100 || badFloat(q.Seconds) || q.Seconds < 0 ||
			(i > 0 && (q.Percentile <= s.MeasuredQuantiles[i-1].Percentile || q.Seconds < s.MeasuredQuantiles[i-1].Seconds)) {
			add(fmt.Sprintf("snapshot.measuredQuantiles[%d]", i), "percentile must be in (0,100) and seconds finite and non-negative, both ascending")
		}
	}
	for i := range s.ServiceQuantiles {
		if !validQuantiles(s.ServiceQuantiles[:i+1], true) {
			add(fmt.Sprintf("snapshot.serviceQuantiles[%d]", i), "percentile must be in (0,100) and seconds finite and positive, both ascending")
			break
		}
	}
	if len(s.ServiceBuckets) > 0 && !validBuckets(s.ServiceBuckets) {
		add("snapshot.serviceBuckets", "upper bounds must be positive and ascending, the last +Inf, and counts finite and non-negative")
	}
	if badFloat(s.FrontExpiredRate) || s.FrontExpiredRate < 0 {
		add("snapshot.frontExpiredRate", "must be finite and non-negative requests per second, got %v", s.FrontExpiredRate)
	}
	if badFloat(s.FrontRefusedRate) || s.FrontRefusedRate < 0 {
		add("snapshot.frontRefusedRate", "must be finite and non-negative requests per second, got %v", s.FrontRefusedRate)
	}
	if badFloat(s.LatencySamples) || s.LatencySamples < 0 {
		add("snapshot.latencySamples", "must be finite and non-negative, got %v", s.LatencySamples)
	}
	if badFloat(s.ShortArrivalRate) || s.ShortArrivalRate < 0 || s.ShortWindow < 0 {
		add("snapshot.shortArrivalRate", "rate and window must be finite and non-negative, got %v over %s", s.ShortArrivalRate, s.ShortWindow)
	}
	if badFloat(s.RateCV2) || badFloat(s.RateCV2Pairs) || s.RateCV2Pairs < 0 || (s.RateCV2Pairs > 0 && s.RateCV2 < -maxRateCV2) || s.RateCV2 > maxRateCV2 {
		add("snapshot.rateCV2", "must be finite and within ±%g over a finite, non-negative number of pairs, got %v over %v", maxRateCV2, s.RateCV2, s.RateCV2Pairs)
	}
	for i, p := range s.Pods {
		if badFloat(p.CPUUsage) || p.CPUUsage < 0 || badFloat(p.ThrottledFraction) || p.ThrottledFraction < 0 ||
			badFloat(p.ServiceTime) || p.ServiceTime < 0 || p.CPURequest < 0 || p.CPULimit < 0 {
			add(fmt.Sprintf("snapshot.pods[%d]", i), "CPU, throttling and service time must be finite and non-negative")
		}
		for _, v := range []float64{p.InService, p.Queued, p.InFlightMean, p.MeasuredLatency} {
			if badFloat(v) || v < 0 {
				add(fmt.Sprintf("snapshot.pods[%d]", i), "in-service, queued, in-flight mean and latency must be finite and non-negative")
				break
			}
		}
	}
	for i, n := range s.Nodes {
		if badFloat(n.UsedCPU) || n.UsedCPU < 0 || n.AllocatableCPU < 0 || n.RequestedCPU < 0 {
			add(fmt.Sprintf("snapshot.nodes[%d]", i), "CPU figures must be finite and non-negative")
		}
	}
	return errors.Join(errs...)
}

// Revert forgets the replica change d recorded, for a caller that did not
// apply it (dry run, or the API refused): otherwise the rate limits would count
// a change that never happened. Reverting a decision without a change, or twice,
// does nothing.
func (e *Engine) Revert(d Decision) {
	delta := d.DesiredReplicas - d.Explanation.CurrentReplicas
	if delta == 0 {
		return
	}
	at := d.Time.UnixNano()
	for i := len(e.events) - 1; i >= 0; i-- {
		if e.events[i].at == at && e.events[i].delta == delta {
			e.events = append(e.events[:i], e.events[i+1:]...)
			return
		}
	}
}

// Decide returns the decision for spec and snap at snap.Now and records it in
// the engine's history (recommendations, and the replica change it orders,
// which the caller is expected to apply; see Revert). An invalid spec or snapshot returns an
// error and records nothing. Missing or stale data returns a holding Decision
// (Action none, Explanation.HeldBecause set) and no error.
func (e *Engine) Decide(spec Spec, snap Snapshot) (Decision, error) {
	if err := Validate(spec); err != nil {
		return Decision{}, err
	}
	if err := validateSnapshot(snap); err != nil {
		return Decision{}, err
	}
	spec = withDefaults(spec)
	up := rules(spec.Behavior.ScaleUp, DefaultScaleUp)
	down := rules(spec.Behavior.ScaleDown, DefaultScaleDown)
	now := snap.Now
	current := snap.CurrentReplicas

	d := Decision{Time: now, DesiredReplicas: current}
	x := &d.Explanation
	x.Concurrency = spec.Concurrency
	x.Model = spec.Model
	x.Routing = spec.Routing
	x.ServiceModel = spec.ServiceModel
	x.Percentile = spec.Percentile
	x.Target = spec.Target.Seconds()
	x.MeasuredLatency = snap.MeasuredLatency
	x.ServiceTime = snap.ServiceTime
	x.ServiceSCV, x.ArrivalSCV = orOne(snap.ServiceSCV), 1
	x.Servers = int(current) * spec.Concurrency
	x.CurrentReplicas, x.ReadyReplicas = current, snap.ReadyReplicas
	x.Recommendation, x.Stabilized = current, current
	hold := func(why string) (Decision, error) {
		x.HeldBecause = why
		x.Reason = "hold: " + why
		return d, nil
	}

	// Data checks: hold rather than act on what we cannot trust.
	if current == 0 {
		return hold("workload is scaled to zero; autoscaling is off until it has replicas (as the HPA does)")
	}
	if len(snap.ArrivalRates) == 0 {
		return hold("no arrival-rate data")
	}
	dataTime := snap.DataTime
	if dataTime.IsZero() {
		dataTime = snap.ArrivalRates[len(snap.ArrivalRates)-1].Time
	}
	if age := now.Sub(dataTime); age > spec.MaxDataAge {
		return hold(fmt.Sprintf("data is %s old, more than maxDataAge %s", age.Round(time.Second), spec.MaxDataAge))
	}
	lambdaNow := snap.ArrivalRates[len(snap.ArrivalRates)-1].Rate
	x.ArrivalRate = lambdaNow
	fresh := e.fresh(snap)
	x.RepeatedData = !fresh
	es, scv, shapeWeight, shapeN := e.serviceTime(snap, lambdaNow, fresh, x)
	if es == 0 && lambdaNow > 0 {
		return hold("no service-time data although requests arrive")
	}
	snap.ServiceSCV = scv
	x.ServiceSCV = orOne(scv)
	cycleRate := lambdaNow
	cv2, hasCV2 := e.rateCV2(snap, fresh)
	levelWindow := sampleStep(snap.ArrivalRates)
	if hasCV2 && cv2 >= mixMinCV2 && levelWindow > 0 {
		if lvl, w, ok := levelRate(snap.ArrivalRates, now, cv2, spec.Tolerance, levelWindow); ok {
			lambdaNow, levelWindow = lvl, w
			x.ArrivalRateLevel, x.LevelWindow = lvl, w
		}
	}

	// Node utilisation, absolute (seed 001): used cores over allocatable cores.
	for _, n := range snap.Nodes {
		u := nodeUtil(n)
		x.Nodes = append(x.Nodes, NodeLoad{Node: n.Name, Utilization: u, Hot: u > spec.Migration.NodeThreshold})
	}

	// Migration first: a pod slowed on a hot node inflates E[S]; moving it is
	// cheaper than sizing for the inflated value. When no move is possible (or
	// allowed yet), the horizontal rule below sizes for the inflated E[S]: the
	// fallback, which the reason says.
	var noMigration string
	if spec.Migration.Enabled {
		e.forgetCooledNodes(spec.Migration.NodeThreshold, snap)
		pods := ownPodsOn(snap)
		var plan *MigrationPlan
		var kept float64
		var note string
		if why := e.migrationCooldown(spec.Migration, pods, now); why != "" {
			// The workload's cooldown comes first; the node's back-off may also hold.
			if plan, _, note = planMigration(spec, snap, nil); plan != nil {
				plan, note = nil, fmt.Sprintf("no migration: %s (otherwise: %s)", why, note)
			}
		} else {
			plan, kept, note = planMigration(spec, snap, e.nodeHold(spec.Migration, pods, now))
		}
		if plan != nil {
			d.Migration = plan
			d.Action |= ActionMigrate
			x.Candidates = append(x.Candidates, Candidate{Kind: CandidateMigrate, Replicas: current, Feasible: true, Note: note})
			if kept > 0 {
				// The pooled E[S] scaled by what the move is expected to
				// leave of it: the not-slowed pods' mean over all pods', in
				// the same interval. The not-slowed pods' own mean is one
				// interval's, a few requests a pod: sized with it, the jump
				// floor went from 3 to 24 pods between two 5 s cycles at a
				// constant rate (TestMigrationOffHotNode's workload), and the
				// scale-up it ordered landed on the emptied hot node. The
				// interval's noise is mostly common to both means and cancels
				// in their ratio.
				es *= kept
			}
		} else if note != "" {
			noMigration = note
			x.Candidates = append(x.Candidates, Candidate{Kind: CandidateMigrate, Replicas: current, Note: note})
		}
	}

	// How dispersed the arrival counts are (1: Poisson), measured from the
	// short windows against the cycle's λ: the forecast and the rates' bounds
	// discount their noise by it.
	conf := confidence(spec)
	disp := e.dispersion(snap, lambdaNow, fresh)
	x.CountDispersion = disp

	// Predictive lead and forecast (scale-up only).
	lambdaSize := lambdaNow
	if spec.Predictive.Enabled {
		x.Lead = lead(spec.Predictive, snap.InitTimes)
		if x.Lead <= 0 {
			// No pod start seen yet: a lead of zero would forecast nothing,
			// exactly when a cold workload meets its first ramp.
			x.Lead = DefaultLead
		}
		if x.Lead > 0 {
			window := time.Duration(float64(x.Lead) * spec.Predictive.WindowFactor)
			if fc, ok := forecast(spec.Predictive.Method, snap.ArrivalRates, now, x.Lead, window, disp, conf); ok {
				// The forecast counts as far as the counts prove it: its
				// lower confidence bound at the SLO's confidence, given
				// how dispersed the counts are. A line through noisy counts
				// rises and falls with the noise, and the lead multiplies
				// its slope.
				x.ForecastArrivalRate, x.ForecastWindow = fc.f, fc.window
				x.ForecastArrivalRateLow = math.Max(fc.f-normalQuantile(conf)*fc.se, 0)
				lambdaSize = math.Max(lambdaNow, x.ForecastArrivalRateLow)
			}
		}
	}
	// The lead the queue terms look ahead by: the pod start time, whether or
	// not the forecast is on.
	leadQ := x.Lead
	if leadQ <= 0 {
		leadQ = lead(spec.Predictive, snap.InitTimes)
	}
	if leadQ <= 0 {
		leadQ = DefaultLead
	}
	// λ's mean over the last lead: what the pods there now carry until pods
	// ordered now are ready; the trigger, the jumps' base, the floor and the
	// scale-down's margin all read it.
	leadMean, hasLeadMean := meanRate(snap.ArrivalRates, now.Add(-leadQ), now)

	// Evidence for a scale-up: a rate counts only as far as its count proves
	// it at the SLO's confidence, given how dispersed the counts are (measured
	// from the short windows against the cycle's λ; 1, Poisson, at first).
	// The fast path: the short window's proven rate sizes the scale-up now
	// rather than a cycle later; the cycle's λ triggers one only when its
	// proven rate needs more pods, or λ's mean over the last lead does (noise
	// alone does not, a lasting rise does).
	// Recurring bursts: from one lead before a forecast onset, size for the
	// rate the past occurrences reached (never lower than the present).
	var recur *Recurrence
	if spec.Predictive.Enabled && len(snap.History) > 0 {
		r := e.recurrence(snap.History, now, leadQ, conf, disp)
		recur = &r
		x.Recurrence = recur
		if r.Active && r.Rate > lambdaSize {
			lambdaSize = r.Rate
		}
	}
	lambdaTrigger := lambdaSize
	if step := sampleStep(snap.ArrivalRates); step > 0 {
		proven := provenRate(cycleRate, step, conf, disp)
		lambdaTrigger = math.Max(proven, x.ForecastArrivalRateLow)
		if x.LevelWindow > 0 {
			lambdaSize = math.Max(lambdaSize, proven)
		}
		if recur != nil && recur.Active {
			lambdaTrigger = math.Max(lambdaTrigger, recur.Rate)
		}
		if hasLeadMean {
			lambdaTrigger = math.Max(lambdaTrigger, math.Min(leadMean, lambdaNow))
		}
	}
	if snap.ShortWindow > 0 {
		x.ShortArrivalRate = snap.ShortArrivalRate
		// The short window is tested anew every scrape, lead/w times a lead:
		// at the SLO's confidence per window, one in twenty of them proves a
		// rate above the truth, and where counts come in batches (NASA ×50,
		// dispersion about 60) a 5 s clump of them ordered 45 pods where 26
		// served, the rate back at the mean before any was Ready. The bound
		// holds at conf per lead (Šidák: conf^(w/lead) per window), so a false
		// scale-up comes once in 1/(1 − conf) leads; a real step proves itself
		// nearly as fast (a 5 × step from 20/s, Poisson: 89.6/s instead of
		// 92.8/s proven in its first 5 s with a 30 s lead).
		windows := math.Max(1, leadQ.Seconds()/snap.ShortWindow.Seconds())
		x.ShortArrivalRateLow = provenRate(snap.ShortArrivalRate, snap.ShortWindow, math.Pow(conf, 1/windows), disp)
		lambdaSize = math.Max(lambdaSize, x.ShortArrivalRateLow)
		lambdaTrigger = math.Max(lambdaTrigger, x.ShortArrivalRateLow)
	}
	x.SizingArrivalRate = lambdaSize

	target := spec.Target.Seconds()
	serving := servingPods(snap)
	bias := e.latencyBias()
	m := newSizer(spec, snap, es)
	m.dispersion = disp
	m.waitBias = bias
	if hasCV2 {
		x.RateCV2 = cv2
		// The bins are rebuilt every decision: the average moves with every
		// cycle's pairs, and building them costs a few µs against a decision's
		// hundreds (BenchmarkRateMixture).
		m.cv2, m.mix = cv2, rateMixture(cv2)
	}
	m.shape = e.serviceShape(snap, es, spec.Target.Seconds(), shapeWeight, shapeN, shapeEvidence(spec), x)
	x.ServiceTime = es
	x.CPUBoundFraction = m.f
	if spec.Model == ModelAuto {
		m.layout = m.pickLayout(lambdaNow, serving, snap.MeasuredLatency)
		x.Model = ModelKind(m.layout.String())
	}

	// The backlog: requests in the pods beyond what each clears within the
	// target, at the current correction of E[S].
	kmu := float64(spec.Concurrency) / es
	bl := measureBacklog(snap.Pods, kmu*target)
	bl = withFrontQueue(bl, snap.Pods, snap.FrontQueue, kmu*target)
	bl = withExpired(bl, snap, x)
	x.Backlog, x.BacklogMaxPod = bl.total, bl.maxPod

	// Drain the backlog within one lead after the pods ordered now are ready.
	drain, left := drainPods(bl, spec.Routing, lambdaSize, kmu, serving, leadQ.Seconds(), leadQ.Seconds())

	// Close the loop: correct E[S] so that the model gives the latency the
	// proxies measured at the current allocation.
	// A cycle is a transient when the backlog outlasts the lead, or when the
	// previous decision saw one: this window's latencies then include requests
	// that waited behind it (still there, or just drained).
	transient := left > 0 || e.lastBacklog > 0
	if b, obs, note := e.calibrate(spec, snap, m, lambdaNow, es, serving, transient, fresh, x); obs > 0 || note != "" {
		x.LatencyBiasObserved, x.LatencyBiasNote = obs, note
		bias = b
		m.waitBias = b
	}
	x.LatencyBias = bias
	if fresh {
		e.lastBacklog = bl.total
	}

	// The SLO is the share of all requests over the target, transients
	// included. The late share recent transients caused is measured and shown,
	// and the steady state pays it back at a stricter percentile, but by at most
	// maxPayback of the budget (beyond, at a tight target, that percentile's
	// floor nears the target and the pods it needs grow without bound): the
	// jump floor below keeps, before a jump, the capacity the history says its
	// first lead needs. The other way, where the recent requests ran late by
	// less than the budget by more than the measured share's own error at the
	// SLO's confidence, the steady state sizes for a looser percentile by the
	// difference (spendBudget), and a scale-down reads λ rather than its upper
	// confidence bound. The jump floor spends it too (floorBudget): the floor
	// is the steady state's pods before a jump, and the measured share that
	// loosens the one speaks for the other. The scale-down's margin keeps
	// 1 − p: a count the floor accepts at the spent budget is left only when
	// one pod fewer meets the SLO's own, so while the budget is spent neither
	// acts between the two. (Spending in the margin too took two cells of the
	// matrix across the budget: docs/model.md section 2c.)
	//
	// Over hours the loop's recent share sits on the budget within its noise,
	// and the run's share ends over it as often as under: where the long late
	// share (longMemory times the loop's memory) is over the budget less its
	// own error, at its upper confidence bound, the floor and the margin aim
	// at the budget less the excess (tightenBudget; the steady state keeps
	// its percentile, paid back or spent as above).
	budget := 1 - conf
	floorBudget, marginBudget := budget, budget
	if spec.Percentile > 0 {
		if fresh {
			e.recordLate(snap, lambdaNow, target, transient, budget)
		}
		eff, spent := e.spendBudget(budget, conf)
		x.SpentLateShare = spent
		pct := 100 * (1 - eff)
		switch {
		case eff > budget:
			m.pct = pct
			floorBudget = eff
		case eff < budget && m.load(lambdaNow, m.es).ServicePercentile(pct) < target:
			// The payback only where the stricter percentile's service-time
			// floor is still below the target.
			m.pct = pct
		}
		if tight := e.tightenBudget(budget, conf); tight > 0 {
			marginBudget, floorBudget = tight, min(floorBudget, tight)
			x.TightenedBudget = tight
		}
		x.EffectivePercentile = m.pct
		x.TransientLateShare = e.transientShare()
		x.RecentLateShare, x.RecentRequests, x.RecentLateShareError = e.recent.share(), e.recent.reqs, e.recent.shareError()
		x.LongLateShare, x.LongRequests, x.LongLateShareError = e.long.share(), e.long.reqs, e.long.shareError()
	}
	// The scale-down's evidence: the rate not disproven by the cycle's count,
	// λ's upper confidence bound. While the budget is spent, the measured late
	// share, under the budget beyond its own error, is evidence enough: the
	// scale-down reads λ itself. (Without a service time there was no traffic
	// to model: nothing to bound.)
	lambdaHigh := lambdaNow
	if step := sampleStep(snap.ArrivalRates); step > 0 && es > 0 && x.SpentLateShare == 0 {
		lambdaHigh = upperRate(lambdaNow, max(step, levelWindow), conf, disp)
	}
	x.ArrivalRateHigh = lambdaHigh

	lNow := m.latency(lambdaNow, m.es, serving)
	lSize := m.latency(lambdaSize, m.es, serving)
	x.Latency = lNow
	x.Normalized = lNow / target
	_ = lSize
	gUp := m.latency(lambdaTrigger, m.es, serving) / target
	x.SizingNormalized, x.TriggerArrivalRate = gUp, lambdaTrigger

	x.BacklogAtLead, x.DrainReplicas = left, drain
	if drain > 0 {
		x.DrainHorizon = leadQ.Seconds()
	}

	rec := current
	var reason string
	var cpu int64
	// The onsets on a confirmed period are the forecast's to meet (pods start a
	// lead before each): the floor and the margin keep capacity only for the
	// jumps it does not explain.
	js := historyJumps(snap, m, leadQ, recur, m.peakJumps())
	ratios := jumpRatios(js, leadMean, x)
	var leads []weighted
	if spec.Percentile > 0 {
		leads = jumpLeads(ratios, snap.ArrivalRates, leadQ, conf, spec.Burst, 0, x)
	}
	// λ's mean over one lead is uncertain by its counts' noise (by far more
	// than Poisson's where the seconds' rates vary beyond it): the floor, a
	// scale-up, raises pods only as far as the counts prove that mean (its
	// lower confidence bound, given their dispersion), as the trigger reads
	// the cycle's rate, while the scale-down keeps pods for the mean itself.
	// A mean that its own noise lifts for a lead then orders no pods that
	// wait out their start only to be removed, and between the two bounds
	// neither acts: with both at the mean, on six NASA hours ×50 with a
	// 2-minute init, the floor and the margin turned pods up and down as the
	// mean crossed a count and back, 145 scale-ups in six hours (until
	// 2026-11-27 the bound held only under the rate mixture; docs/model.md
	// section 2c, round fifteen).
	floorBase := leadMean
	if hasLeadMean {
		floorBase = provenRate(leadMean, leadQ, conf, disp)
	}
	x.JumpBase = floorBase
	jumpPods, hasJump := e.jumpFloor(spec, m, leadQ, ratios, leads, floorBase, floorBudget, spec.MaxReplicas, x)
	floorCalls := hasJump && jumpPods > current
	if floorCalls && spec.Percentile > 0 {
		floorCalls = e.floorCalls(m, floorBase, leads, current, floorBudget, budget, conf, spec.Tolerance, x)
	}
	// The band in pods: near the latency floor (the service-time percentile)
	// the percentile falls slowly with the pods, so a band of ±θ on G spans
	// far more than ±θ of the pods (lognormal cv 1.2, p95 ≤ 4·E[S]: G = 0.9
	// needs about a quarter more pods than G = 1). Pods beyond (1−θ)⁻¹ × what
	// the target needs at λ's upper confidence bound are also a scale-down.
	// Below the band a scale-down needs G at that bound (gHigh) below 1−θ
	// too, or noise alone would remove a pod the next cycle's noise adds
	// back (guarded); where the guard holds, the same count is the evidence
	// instead: pods idling near the latency floor, service p95 ÷ target just
	// under 1−θ, keep the bound's G just over it however many of them idle,
	// and the guard alone would hold every pod for good. Where the guard is
	// clear the scale-down's own path runs, with no count to search.
	belowG := x.Normalized < 1-spec.Tolerance
	var gHigh float64
	guarded := false
	if belowG {
		gHigh = m.latency(lambdaHigh, m.es, serving) / target
		guarded = gHigh >= 1-spec.Tolerance
	}
	var need int32
	if spec.Percentile > 0 && lambdaHigh > 0 && x.Normalized <= 1+spec.Tolerance && (!belowG || guarded) {
		need = m.minPods(math.Max(lambdaHigh, lambdaSize), m.es)
	}
	overProvisioned := need > 0 && float64(need) <= (1-spec.Tolerance)*float64(current)
	below := belowG || overProvisioned
	switch {
	case gUp > 1+spec.Tolerance || drain > current || floorCalls:
		// Whatever calls the scale-up, it sizes to the floor too: nothing
		// waits then.
		x.JumpHeld = false
		rec, cpu, reason = m.scaleUp(lambdaSize, current, x)
		if hasJump && jumpPods > rec {
			rec, cpu = jumpPods, 0
			what := "the history's jumps over one lead"
			if len(ratios) == 0 {
				what = "a declared rise, with no jump in the history yet, over one lead"
			}
			reason = fmt.Sprintf("%s (%s) need %d pods before they come: at λ's mean %.4g/s over the last lead × each jump, their late share is %.3g, within 1 − p",
				what, leadQ, jumpPods, floorBase, x.JumpLateShare)
			if floorBudget > budget {
				reason += fmt.Sprintf(" as the steady state spends it, %.3g", floorBudget)
			}
			reason += x.declaredNote(spec.Burst)
			reason += x.tightenedNote()
			if floorBase < leadMean {
				reason += fmt.Sprintf(" (the mean as far as its counts prove it, at dispersion %.3g: %.4g/s measured)", disp, leadMean)
			}
			if x.JumpPeak {
				reason += " (" + x.peakNote(x.JumpPeakHeld) + ")"
			}
			reason += x.rescaledNote()
			x.Candidates = append(x.Candidates, m.candidate(CandidateHorizontal, jumpPods, m.cpu, lambdaSize, "the jump floor"))
		}
		if drain > rec {
			rec, cpu = drain, 0
			reason = fmt.Sprintf("backlog of %.0f requests beyond what the pods clear within the target (%.0f on the fullest pod), "+
				"%.0f left when pods ordered now are ready in %s: %d pods drain it within %s at λ = %.4g/s (%s routing)",
				bl.total, bl.maxPod, left, leadQ, drain, leadQ, lambdaSize, spec.Routing)
			reason += x.expiredNote()
			x.Candidates = append(x.Candidates, m.candidate(CandidateHorizontal, drain, m.cpu, lambdaSize, "drains the backlog"))
		}
	case below && d.Migration != nil:
		// Surge-first migration adds a pod for a while; removing pods at the
		// same time could leave the workload short if the move is slow.
		reason = fmt.Sprintf("G = %.3g below 1−θ, but a migration is planned: no scale-down this cycle", x.Normalized)
	case below && serving < current:
		// Pods still starting were ordered because the model needed them a
		// lead ago; removing them before they serve wastes their start.
		reason = fmt.Sprintf("G = %.3g below 1−θ, but %d of %d pods are still starting: no scale-down until they serve", x.Normalized, current-serving, current)
	case below && bl.total > 0:
		reason = fmt.Sprintf("G = %.3g below 1−θ, but %.0f requests are queued beyond what the pods clear within the target: no scale-down while they drain",
			x.Normalized, bl.total)
		reason += x.expiredNote()
	case guarded && !overProvisioned:
		// A scale-down needs evidence too (see guarded above).
		reason = fmt.Sprintf("G = %.3g below 1−θ, but not at λ's upper confidence bound %.4g/s (G = %.3g): no scale-down on noise",
			x.Normalized, lambdaHigh, gHigh)
	case below:
		// Down to what the likely λ over one lead needs (a pod removed now
		// takes a lead to come back), never below what the forecast or the
		// short window need.
		downPeak := m.peakJumpsDown()
		if spec.Percentile > 0 && downPeak != m.peakJumps() {
			// The margin reads the peaks the floor does not (peakJumpsDown):
			// its ratios, their quantile and their notes are the peaks'.
			js = historyJumps(snap, m, leadQ, recur, true)
			ratios = jumpRatios(js, leadMean, x)
			leads = jumpLeads(ratios, snap.ArrivalRates, leadQ, conf, spec.Burst, 0, x)
		}
		lambdaDown, ok := e.downRate(snap.ArrivalRates, ratios, now, leadQ, leadMean, hasLeadMean, conf, x)
		if !ok {
			reason = fmt.Sprintf("G = %.3g below 1−θ, but the λ history spans less than one lead (%s): no scale-down until it shows what λ may do", x.Normalized, leadQ)
			break
		}
		floor := m.minPods(math.Max(lambdaSize, lambdaHigh), m.es)
		x.DownJumpPeak = downPeak
		x.DownJumpPeakHeld = downPeak && m.heldJumps(leadQ)
		if base := leadMean; spec.Percentile > 0 && len(leads) > 0 && hasLeadMean {
			// Percentile targets: the fewest pods whose late share, averaged
			// over the history's jumps from λ's mean over the last lead (each
			// weighted by its requests) and one more lead at the largest
			// (jumpLeads), stays within the budget 1 − p.
			x.DownArrivalRate = base
			rec = m.marginOverJumps(ratios, snap.ArrivalRates, leadQ, base, conf, floor, current, marginBudget, x)
			whole, wholeShare := rec, x.DownLateShare
			rec = m.recentMargin(whole, now, leadQ, base, recur, downPeak, conf, current, marginBudget, x)
			rec = m.depthMargin(rec, js, now, leadQ, base, conf, current, marginBudget, x)
			quantile := "too few leads for their p-quantile"
			if x.JumpRatio > 0 {
				quantile = fmt.Sprintf("p-quantile %.3g", x.JumpRatio)
			}
			extra := fmt.Sprintf("and one more lead at the largest, %.3g", x.JumpRatioMax)
			switch {
			case x.UnseenRiseRatio > 0 && x.JumpRatioMax > 1:
				extra = fmt.Sprintf("and one more lead at the rate the history started at, %.3g × λ's mean, above the largest, %.3g, until it spans the %d leads a p-quantile needs",
					x.UnseenRiseRatio, x.JumpRatioMax, quantileLeads(conf))
			case x.UnseenRiseRatio > 0:
				extra = fmt.Sprintf("none of them a rise, and one more lead at its highest mean over a lead, %.3g × λ's mean", x.UnseenRiseRatio)
			}
			jumps := fmt.Sprintf("the history's %d jumps over one lead, %s, %s, weighing %.3g", len(ratios), quantile, extra, x.JumpUnseenWeight)
			if len(ratios) == 0 {
				jumps = "no jump in the history yet: the rate held"
			}
			reason = fmt.Sprintf("G = %.3g below 1−θ = %.3g: fewest pods whose late share over the likely λ of the next %s "+
				"(λ's mean %.4g/s over the last lead × %s) is within 1 − p: %d (late share %.3g)",
				x.Normalized, 1-spec.Tolerance, leadQ, base, jumps, whole, wholeShare)
			reason += x.declaredNote(spec.Burst)
			reason += x.tightenedNote()
			if x.DownJumpPeak && !x.JumpPeak {
				reason += fmt.Sprintf(" (%s: one %s sample spans the level window, cv²/θ² = %.3gs)",
					x.peakNote(x.DownJumpPeakHeld), sampleStep(snap.ArrivalRates), levelSeconds(m.cv2, spec.Tolerance))
			}
			reason += x.rescaledNote()
			reason += x.recentNote()
			reason += x.depthNote()
		} else {
			lambdaDown = math.Max(lambdaDown, lambdaSize)
			x.DownArrivalRate = lambdaDown
			rec = min(max(m.minPods(lambdaDown, m.es), floor), current)
			reason = fmt.Sprintf("G = %.3g below 1−θ = %.3g: fewest pods meeting the target at λ = %.4g/s (the likely λ over the next %s: %s) is %d",
				x.Normalized, 1-spec.Tolerance, lambdaDown, leadQ, x.downWhy(), rec)
		}
		rec = min(rec, current)
		x.Candidates = append(x.Candidates, m.candidate(CandidateHorizontal, rec, m.cpu, x.DownArrivalRate, ""))
	default:
		reason = fmt.Sprintf("G = %.3g within [1−θ, 1+θ] = [%.3g, %.3g]: no horizontal change", gUp, 1-spec.Tolerance, 1+spec.Tolerance)
	}
	if x.JumpHeld {
		reason += x.heldNote(current)
	}
	if recur != nil && recur.Active {
		reason += fmt.Sprintf(" (recurring bursts: the next onset is forecast at %s, λ %.4g/s, every %s; %d of %d expected onsets came)",
			recur.Next.UTC().Format(time.RFC3339), recur.Rate, time.Duration(recur.PeriodSeconds*float64(time.Second)).Round(time.Second),
			len(recur.Occurrences), recur.Expected)
	}
	if overProvisioned {
		though := fmt.Sprintf("G = %.3g is within the band", x.Normalized)
		if belowG {
			though = fmt.Sprintf("G there is %.3g (the pods are near the latency floor)", gHigh)
		}
		reason = fmt.Sprintf("%d pods are more than (1−θ)⁻¹ × the %d the target needs at λ's upper confidence bound %.4g/s, though %s: ",
			current, need, math.Max(lambdaHigh, lambdaSize), though) + reason
	}
	if m.mix != nil {
		reason += fmt.Sprintf(" (the arrival rate varies from second to second, cv² %.3g: latencies are averaged over the seconds' rates", m.cv2)
		if x.SteadyLateShare > x.ModelledLateShare*(1+1e-9) {
			reason += fmt.Sprintf("; the seconds near the pods' capacity at their one-second transient: %.3g%% late modelled at the current pods, %.3g%% were each at its steady state",
				100*x.ModelledLateShare, 100*x.SteadyLateShare)
		}
		reason += ")"
	}
	if bias != 1 {
		reason += fmt.Sprintf(" (model corrected: waiting-time variability × %.3g from measured latency)", bias)
	}
	if x.SpentLateShare > 0 {
		reason += fmt.Sprintf(" (the last %.0f requests ran %.3g%% late, under the budget %.3g%% by more than %.2f%%, the share's own error at the SLO's confidence: %.3g%% of it spent, sized at p%.4g, and a scale-down needs no upper bound on λ)",
			x.RecentRequests, 100*x.RecentLateShare, 100*budget, 100*normalQuantile(conf)*x.RecentLateShareError, 100*x.SpentLateShare, x.EffectivePercentile)
	}
	if x.TailModel == TailMeasured && spec.Percentile > 0 {
		reason += fmt.Sprintf(" (service tail measured: %.3g%% of service times over the target, %.3g%% if exponential)",
			100*x.ServiceLateShare, 100*math.Exp(-target/es))
	}
	x.Recommendation = rec

	// Stabilise, rate-limit, bound.
	stable := e.stabilize(rec, current, now, up, down)
	x.Stabilized = stable
	limited, limitedBy := e.rateLimit(stable, current, now, up, down)
	if recur != nil && recur.Active && bl.total == 0 && limitedBy == "scale-up rate limit" && stable > limited {
		// A forecast onset is evidence, not noise (the rate limit's purpose):
		// the pods it needs must be ready when it comes, one lead from now.
		limited, limitedBy = stable, ""
		reason += fmt.Sprintf("; the scale-up rate limit is lifted for the recurring burst forecast at %s", recur.Next.UTC().Format(time.RFC3339))
	}
	if bl.total > 0 && limitedBy == "scale-up rate limit" && stable > limited {
		// The model, not a fixed rate, bounds a scale-up a backlog justifies:
		// requests already queue beyond what the pods clear within the target,
		// so the pods the model sizes for (the rate and the backlog's drain)
		// go out at once.
		limited, limitedBy = min(stable, max(rec, drain)), ""
		reason += fmt.Sprintf("; the scale-up rate limit is lifted while %.0f requests are queued: the model bounds it", bl.total)
	}
	desired := min(max(limited, spec.MinReplicas), spec.MaxReplicas)
	notes := []string{reason}
	switch {
	case stable < rec:
		notes = append(notes, fmt.Sprintf("stabilised to %d (the scale-up window keeps the lowest recent recommendation)", stable))
	case stable > rec:
		notes = append(notes, fmt.Sprintf("stabilised to %d (the scale-down window keeps the highest recent recommendation)", stable))
	}
	if limitedBy != "" {
		notes = append(notes, fmt.Sprintf("%s allows %d", limitedBy, limited))
	}
	if desired != limited {
		notes = append(notes, fmt.Sprintf("bounded to [%d, %d]", spec.MinReplicas, spec.MaxReplicas))
	}
	if desired < current && !snap.Complete && current <= spec.MaxReplicas {
		desired = current
		x.HeldBecause = "incomplete data: never scale down on missing data"
		notes = append(notes, x.HeldBecause)
	}
	if noMigration != "" {
		notes = append(notes, noMigration)
	}
	d.DesiredReplicas = desired
	if desired != current {
		d.Action |= ActionHorizontal
	}
	if cpu != 0 && cpu != m.cpu {
		if desired == rec || desired > current {
			d.DesiredCPU = cpu
			d.Action |= ActionVertical
		} else {
			notes = append(notes, "vertical resize dropped: the replica count was limited")
		}
	}
	e.recordScale(desired-current, now, up, down)
	x.Reason = strings.Join(notes, "; ")
	return d, nil
}

func orOne(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

func nodeUtil(n Node) float64 {
	if n.AllocatableCPU <= 0 {
		return 0
	}
	return n.UsedCPU / (float64(n.AllocatableCPU) / 1000)
}

// servingPods is the number of pods taking traffic now: the ready ones, or all
// of them when readiness is unknown.
func servingPods(s Snapshot) int32 {
	if s.ReadyReplicas > 0 && s.ReadyReplicas <= s.CurrentReplicas {
		return s.ReadyReplicas
	}
	return s.CurrentReplicas
}

// sizer evaluates the model for one workload and cycle.
type sizer struct {
	spec   Spec
	snap   Snapshot
	layout queueing.Layout
	k      int
	pct    float64
	target float64
	es     float64 // E[S] at the current CPU
	// waitBias multiplies the Allen–Cunneen variability factor (ca² + cs²)/2:
	// the closed loop's correction (1: none).
	waitBias float64
	// shape is the measured service-time distribution relative to E[S] (nil:
	// exponential).
	shape *queueing.ServiceShape
	// mix are the bins of the per-second rate's law relative to its mean
	// (mixture.go; nil: the rate is taken as constant within the cycle), cv2
	// its relative variance.
	mix []weighted
	cv2 float64
	// seconds caches the one-second transients of the decision (second.go).
	seconds map[secondKey]float64
	cpu     int64 // current CPU request per pod, millicores (0 if unknown)
	// dispersion is the arrival counts' (1: Poisson; Engine.dispersion): a
	// held jump's peak counts as far as it proves it (jumpRead).
	dispersion float64
	f          float64 // CPU-bound share of the service time
}

func newSizer(spec Spec, snap Snapshot, es float64) *sizer {
	s := &sizer{spec: spec, snap: snap, k: spec.Concurrency, pct: spec.Percentile, target: spec.Target.Seconds(), es: es, waitBias: 1}
	if spec.Model == ModelPooled {
		s.layout = queueing.LayoutPooled
	} else {
		s.layout = queueing.LayoutPerPod
	}
	var req, use, thr float64
	var n int
	for _, p := range snap.Pods {
		if p.CPURequest > 0 {
			req += float64(p.CPURequest)
			use += p.CPUUsage * 1000
			thr += p.ThrottledFraction
			n++
		}
	}
	if n > 0 {
		s.cpu = int64(math.Round(req / float64(n)))
		s.f = spec.Vertical.CPUBoundFraction
		if s.f == 0 {
			// Busy share of the request, raised by throttling (which hides demand).
			s.f = math.Min(1, use/req+thr/float64(n))
		}
	}
	return s
}

func (s *sizer) load(lambda, es float64) queueing.Load {
	l := queueing.Load{
		ArrivalRate:  lambda,
		ServiceTime:  es,
		AllenCunneen: s.spec.ServiceModel == ServiceAllenCunneen,
		ArrivalSCV:   1,
		ServiceSCV:   orOne(s.snap.ServiceSCV),
		Shape:        s.shape,
	}
	if s.waitBias > 0 && s.waitBias != 1 {
		// The correction scales the wait's variability factor; for M/M/c
		// (factor 1) that is Allen–Cunneen with both SCVs scaled.
		if !l.AllenCunneen {
			l.AllenCunneen, l.ArrivalSCV, l.ServiceSCV = true, 1, 1
		}
		l.ArrivalSCV *= s.waitBias
		l.ServiceSCV *= s.waitBias
	}
	return l
}

// latency is the modelled latency (mean or percentile) of n pods, averaged
// over the seconds' rates when the rate varies from second to second; +Inf
// when unstable or when the service time is unknown and requests arrive.
func (s *sizer) latency(lambda, es float64, n int32) float64 {
	if s.mix != nil && lambda > 0 && es > 0 && n >= 1 {
		if s.pct > 0 {
			return s.mixPercentile(lambda, es, n)
		}
		return s.mixMean(lambda, es, n)
	}
	return s.latency0(lambda, es, n)
}

// latency0 is latency at a constant rate λ.
func (s *sizer) latency0(lambda, es float64, n int32) float64 {
	if es <= 0 {
		if lambda == 0 {
			return 0
		}
		return math.Inf(1)
	}
	if n < 1 {
		return math.Inf(1)
	}
	m, err := s.load(lambda, es).Pods(int(n), s.k, s.layout)
	if err != nil {
		return math.Inf(1)
	}
	v, err := m.Latency(s.pct)
	if err != nil {
		return math.Inf(1)
	}
	if lr, ok := s.leastRequest(lambda, es, n); ok {
		v = math.Max(v, lr.latency(s.pct))
	}
	return v
}

// leastRequest is the power-of-two-choices model (leastrequest.go) when the
// workload is routed by least request with one slot per pod and the layout is
// the pooled one its routing defaults to; false otherwise or when unstable.
func (s *sizer) leastRequest(lambda, es float64, n int32) (leastRequest, bool) {
	if !s.leastRequestLayout() {
		return leastRequest{}, false
	}
	l := s.load(lambda, es)
	kappa := 1.0
	if l.AllenCunneen {
		kappa = (l.ArrivalSCV + l.ServiceSCV) / 2
	}
	return newLeastRequest(lambda, es, kappa, n, s.shape)
}

// minPodsOverJumps is the fewest pods in [lo, hi] whose late share, P(T > T)
// averaged over λ = base × each jump ratio weighted by that λ, is at most
// budget; hi when none is. The share falls with the pods, so it bisects.
// Each count's share is computed once: it is a pass of the model over every
// jump, and most of a scale-down's time.
func (s *sizer) minPodsOverJumps(base float64, ratios []weighted, lo, hi int32, budget float64, x *Explanation) int32 {
	share := func(n int32) float64 { return s.lateOverJumps(base, ratios, n) }
	lo = max(lo, 1)
	if lo >= hi {
		x.DownLateShare = share(hi)
		return hi
	}
	if at := share(lo); at <= budget {
		x.DownLateShare = at
		return lo
	}
	a, b := lo, hi // share(a) > budget; b is the answer if nothing below is.
	atB, known := 0.0, false
	for b-a > 1 {
		mid := a + (b-a)/2
		if at := share(mid); at <= budget {
			b, atB, known = mid, at, true
		} else {
			a = mid
		}
	}
	if !known {
		atB = share(b)
	}
	x.DownLateShare = atB
	return b
}

// lateOverJumps is n pods' late share, P(T > T) averaged over λ = base ×
// each jump ratio weighted by that λ (0 when no λ is positive).
func (s *sizer) lateOverJumps(base float64, ratios []weighted, n int32) float64 {
	var late, all float64
	for _, j := range ratios {
		l := base * j.v
		late += j.w * l * s.tail(l, s.es, n, s.target)
		all += j.w * l
	}
	if all == 0 {
		return 0
	}
	return late / all
}

// tail is the model's P(T > t) for n pods (averaged over the seconds' rates
// when they vary); 1 when unstable.
func (s *sizer) tail(lambda, es float64, n int32, t float64) float64 {
	if s.mix != nil && lambda > 0 && es > 0 && n >= 1 {
		return s.mixTail(lambda, es, n, t)
	}
	return s.tail0(lambda, es, n, t)
}

// tail0 is tail at a constant rate λ.
func (s *sizer) tail0(lambda, es float64, n int32, t float64) float64 {
	if es <= 0 || n < 1 {
		return 1
	}
	if lambda == 0 {
		return s.shape.Survival(t / es)
	}
	m, err := s.load(lambda, es).Pods(int(n), s.k, s.layout)
	if err != nil {
		return 1
	}
	p := m.TailProbability(t)
	if lr, ok := s.leastRequest(lambda, es, n); ok {
		p = math.Max(p, lr.tail(t))
	}
	return p
}

// minPods is the fewest pods meeting the target; when none can, the fewest
// within infeasibleSlack of the latency floor. Capped at MaxReplicas+1 worth of
// search by the bounds applied later.
func (s *sizer) minPods(lambda, es float64) int32 {
	if lambda == 0 || es <= 0 {
		return 1
	}
	l := s.load(lambda, es)
	n, err := l.MinPods(s.k, s.layout, s.target, s.pct)
	if errors.Is(err, queueing.ErrInfeasible) {
		floor := es
		if s.pct > 0 {
			floor = l.ServicePercentile(s.pct)
		}
		n, err = l.MinPods(s.k, s.layout, floor*infeasibleSlack, s.pct)
	}
	if err != nil || n > math.MaxInt32 {
		return math.MaxInt32
	}
	if s.mix != nil {
		return s.mixMinPods(lambda, es, int32(n))
	}
	if s.leastRequestLayout() {
		// The pooled count is a lower bound (least request is never faster
		// than one queue): search upwards for the count whose larger latency
		// meets the target, or the infeasible target's slack, as above.
		goal := s.target
		if floor := -math.Log1p(-s.pct/100) * es; s.pct > 0 && s.target <= floor {
			goal = floor * infeasibleSlack
		} else if s.pct == 0 && s.target <= es {
			goal = es * infeasibleSlack
		}
		return s.searchUp(int32(n), func(m int32) bool { return s.latency(lambda, es, m) <= goal })
	}
	return int32(n)
}

// leastRequestLayout says whether the power-of-two-choices model applies.
func (s *sizer) leastRequestLayout() bool {
	return s.spec.Routing == RoutingLeastRequest && s.k == 1 && s.layout == queueing.LayoutPooled
}

// searchUp is the smallest count ≥ lo meeting ok (monotone in the count):
// exponential steps, then bisection.
func (s *sizer) searchUp(lo int32, ok func(int32) bool) int32 {
	lo = max(lo, 1)
	if ok(lo) {
		return lo
	}
	bad, step := lo, int32(1)
	var good int32
	for good == 0 {
		n := int64(bad) + int64(step)
		if n >= math.MaxInt32 {
			return math.MaxInt32
		}
		if ok(int32(n)) {
			good = int32(n)
		} else {
			bad, step = int32(n), step*2
		}
	}
	for good-bad > 1 {
		mid := bad + (good-bad)/2
		if ok(mid) {
			good = mid
		} else {
			bad = mid
		}
	}
	return good
}

// esAt is the CPU-bound service-time model: E[S](r') = E[S](r)·(f·r/r' + 1 − f).
func (s *sizer) esAt(cpu int64) float64 {
	if s.cpu <= 0 || cpu <= 0 || cpu == s.cpu {
		return s.es
	}
	return s.es * (s.f*float64(s.cpu)/float64(cpu) + 1 - s.f)
}

func (s *sizer) cost(n int32, cpu int64) float64 {
	if !s.spec.Vertical.Enabled {
		return float64(n)
	}
	return float64(n) * float64(cpu+s.spec.Vertical.PodOverheadCPU)
}

func (s *sizer) candidate(kind CandidateKind, n int32, cpu int64, lambda float64, note string) Candidate {
	lat := s.latency(lambda, s.esAt(cpu), n)
	return Candidate{
		Kind: kind, Replicas: n, CPU: cpu, ModelledLatency: lat, Cost: s.cost(n, cpu),
		MeetsTarget: lat <= s.target, Feasible: true, Note: note,
	}
}

// pickLayout chooses, for ModelAuto, the layout whose modelled latency at the
// current allocation is closer to the measured one; per-pod without a measurement.
func (s *sizer) pickLayout(lambda float64, n int32, measured float64) queueing.Layout {
	if measured <= 0 {
		return queueing.LayoutPerPod
	}
	s.layout = queueing.LayoutPooled
	pooled := s.latency(lambda, s.es, n)
	s.layout = queueing.LayoutPerPod
	perPod := s.latency(lambda, s.es, n)
	if math.Abs(pooled-measured) < math.Abs(perPod-measured) {
		return queueing.LayoutPooled
	}
	return queueing.LayoutPerPod
}

// scaleUp is Algorithm 4's scale-up branch with its loop fixed (the smallest
// m ≥ n with L(m) ≤ T, found by search) and, with vertical scaling on, the
// cost comparison against resized pods. It returns the replica count, the CPU
// per pod (0 when unchanged) and the reason.
func (s *sizer) scaleUp(lambda float64, current int32, x *Explanation) (int32, int64, string) {
	horizontal := max(s.minPods(lambda, s.es), current)
	hc := s.candidate(CandidateHorizontal, horizontal, s.cpu, lambda, "more pods at the current CPU")
	x.Candidates = append(x.Candidates, hc)
	best := hc
	if s.spec.Vertical.Enabled && s.cpu > 0 {
		for _, cpu := range s.cpuLevels() {
			if cpu <= s.cpu {
				continue // Scale-up never shrinks pods.
			}
			es := s.esAt(cpu)
			n := max(s.minPods(lambda, es), 1)
			kind := CandidateBoth
			if n <= current {
				n, kind = current, CandidateVertical
			}
			c := s.candidate(kind, n, cpu, lambda, "")
			if s.snap.ResizeBlocked {
				c.Feasible, c.Note = false, "the last in-place resize was infeasible or deferred too long"
			} else if room, why := s.nodeRoom(cpu); !room {
				c.Feasible, c.Note = false, why
			}
			x.Candidates = append(x.Candidates, c)
			if c.Feasible && c.MeetsTarget && (!best.MeetsTarget || c.Cost < best.Cost ||
				(c.Cost == best.Cost && c.Kind == CandidateVertical)) {
				best = c
			}
		}
	}
	reason := fmt.Sprintf("G = %.3g above 1+θ = %.3g at λ = %.4g/s (G = %.3g at %s), sized at λ = %.4g/s: ",
		x.SizingNormalized, 1+s.spec.Tolerance, x.TriggerArrivalRate, x.Normalized, x.normalizedAt(), lambda)
	if x.SizingNormalized <= 1+s.spec.Tolerance {
		// The jump floor or the backlog called the scale-up: their reasons
		// replace this one; the model's own test did not fire.
		reason = fmt.Sprintf("G = %.3g at λ = %.4g/s, sized at λ = %.4g/s: ", x.SizingNormalized, x.TriggerArrivalRate, lambda)
	}
	if lambda > x.ArrivalRate && lambda == x.ForecastArrivalRateLow {
		reason = fmt.Sprintf("forecast λ = %.4g/s at now+%s above λ now = %.4g/s, G = %.3g above 1+θ: ",
			lambda, x.Lead, x.ArrivalRate, s.latency(lambda, s.es, servingPods(s.snap))/s.target)
	}
	if !best.MeetsTarget {
		reason += fmt.Sprintf("target unreachable by adding pods (latency floor above target); sized to %d pods within %.0f%% of the floor", best.Replicas, (infeasibleSlack-1)*100)
	} else {
		reason += fmt.Sprintf("cheapest candidate meeting the target is %s: %d pods", best.Kind, best.Replicas)
		if best.Kind != CandidateHorizontal {
			reason += fmt.Sprintf(" at %dm CPU", best.CPU)
		}
	}
	if ready := servingPods(s.snap); best.Replicas == current && ready < current {
		reason += fmt.Sprintf(" (%d of %d pods not ready yet: they are counted as coming capacity)", current-ready, current)
	}
	cpu := int64(0)
	if best.Kind != CandidateHorizontal {
		cpu = best.CPU
	}
	return best.Replicas, cpu, reason
}

// cpuLevels are the CPU sizes weighed: multiples of the current request and
// the bounds, clamped to [MinCPU, MaxCPU].
func (s *sizer) cpuLevels() []int64 {
	v := s.spec.Vertical
	var out []int64
	for _, f := range []float64{1.25, 1.5, 2, 3, 4} {
		out = append(out, int64(math.Round(float64(s.cpu)*f)))
	}
	out = append(out, v.MaxCPU)
	for i := range out {
		out[i] = min(max(out[i], v.MinCPU), v.MaxCPU)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nodeRoom reports whether every node hosting the workload's pods can grow
// them all to cpu millicores in place.
func (s *sizer) nodeRoom(cpu int64) (bool, string) {
	grow := map[string]int64{}
	for _, p := range s.snap.Pods {
		if p.CPURequest > 0 && cpu > p.CPURequest {
			grow[p.Node] += cpu - p.CPURequest
		}
	}
	for _, n := range s.snap.Nodes {
		g, ok := grow[n.Name]
		if !ok {
			continue
		}
		delete(grow, n.Name)
		if free := n.AllocatableCPU - n.RequestedCPU; free < g {
			return false, fmt.Sprintf("node %s has %dm free, needs %dm", n.Name, free, g)
		}
	}
	for name := range grow {
		return false, fmt.Sprintf("node %s of a pod is not in the snapshot", name)
	}
	return true, ""
}
