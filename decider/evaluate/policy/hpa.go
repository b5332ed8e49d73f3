package policy

import "math"

// HPA constants. Sources are Kubernetes v1.36.3 (k8s.io/kubernetes@v1.36.3):
// pkg/controller/podautoscaler (horizontal.go, replica_calculator.go,
// metrics/utilization.go) and pkg/controller/podautoscaler/config/v1alpha1/
// defaults.go (RecommendedDefaultHPAControllerConfiguration).
const (
	// HPASync is --horizontal-pod-autoscaler-sync-period (15 s).
	HPASync = 15.0
	// HPATolerance is --horizontal-pod-autoscaler-tolerance (defaults.go: 0.1),
	// applied both ways by Tolerances.isWithin (replica_calculator.go).
	HPATolerance = 0.1
	// HPADownWindow is --horizontal-pod-autoscaler-downscale-stabilization
	// (defaults.go: 5 min), used by stabilizeRecommendation (horizontal.go).
	HPADownWindow = 300.0
	// HPACPUInitPeriod is --horizontal-pod-autoscaler-cpu-initialization-period
	// (defaults.go: 5 min), used by groupPods (replica_calculator.go).
	HPACPUInitPeriod = 300.0
	// HPAInitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay
	// (defaults.go: 30 s), used by groupPods.
	HPAInitialReadinessDelay = 30.0
	// HPAScaleUpFactor and HPAScaleUpMinimum are scaleUpLimitFactor and
	// scaleUpLimitMinimum (horizontal.go): without spec.behavior one sync may
	// go to at most max(2 × current, 4) replicas (calculateScaleUpLimit).
	HPAScaleUpFactor  = 2
	HPAScaleUpMinimum = 4
	// DefaultHPATarget is the CPU utilisation target used when none is given.
	DefaultHPATarget = 0.7
)

// HPA is Kubernetes' horizontal pod autoscaler on CPU utilisation (usage /
// request) for an HPA object without spec.behavior, which is what a user gets
// by default (autoscaling/v2 defaulting fills behavior only when it is set, so
// the controller takes normalizeDesiredReplicas, not ...WithBehaviors):
//
//   - Pods are grouped as groupPods (replica_calculator.go) does: Pending pods
//     are unready; a pod without a metric sample is missing; a pod whose Ready
//     condition is false, or, within the 5 min CPU initialisation period after
//     its start, whose sample began before it became Ready, is unready. (After
//     the initialisation period a not-Ready pod is unready only if it never
//     became Ready, which is every not-Ready pod here: the simulator never
//     un-readies a pod, so the 30 s initial-readiness delay has no other effect.)
//     A pod has a sample when it had started at the previous sync: the usage is
//     its CPU over the interval between syncs, as metrics-server's rate over
//     two scrapes.
//   - GetResourceReplicas: utilisation = ⌊100 × Σ usage / Σ request⌋ % over the
//     pods with samples (metrics/utilization.go, in millicores), ratio =
//     utilisation / target %. With no unready pods on a scale-up and no missing
//     pods: hold within tolerance [0.9, 1.1], else ⌈ratio × ready pods⌉.
//     Otherwise missing pods count at max(100 %, target) of their request when
//     ratio < 1 and at 0 when ratio > 1, unready pods at 0 on a scale-up; the
//     ratio is recomputed and the change is dropped if it is within tolerance,
//     flips direction, or if ⌈new ratio × counted pods⌉ moves the other way.
//   - No samples at all is an error: the HPA does not act and records nothing.
//   - recordInitialRecommendation (horizontal.go): the first reconcile records
//     the current count as a recommendation, at the HPA's creation.
//   - normalizeDesiredReplicas (horizontal.go): stabilizeRecommendation takes
//     the highest recommendation of the last 5 min (the current one included),
//     then convertDesiredReplicasWithRules bounds it to [min, min(max,
//     max(2 × current, 4))]. There is no scale-down rate limit on this path.
type HPA struct {
	p          Params
	name       string
	downWindow float64 // scale-down stabilisation, seconds
	targetPct  int64
	last       map[int]float64 // pod → BusyCum at the previous sync
	lastT      float64
	recs       []rec
	started    bool
}

type rec struct {
	t float64
	n int
}

// NewHPA returns an HPA with the CPU utilisation target (e.g. 0.7).
func NewHPA(p Params, target float64) *HPA {
	return &HPA{p: p, name: "hpa", downWindow: HPADownWindow, targetPct: int64(math.Round(target * 100)),
		last: map[int]float64{}, lastT: math.Inf(-1)}
}

// NewHPANoCooldown is seed 004's "HPA without cooling down" (its Listing
// 4.15): an HPA object with spec.behavior.scaleDown.stabilizationWindowSeconds
// = 0. Setting behavior makes the controller take
// normalizeDesiredReplicasWithBehaviors with the defaults for the rest
// (scale-up: no stabilisation, at most max(100 %, 4 pods) more per 15 s;
// scale-down: at most 100 % fewer per 15 s). With a 15 s sync those limits are
// max(2 × current, 4) up and none down, so it is the HPA without the 5-minute
// scale-down stabilisation.
func NewHPANoCooldown(p Params, target float64) *HPA {
	h := NewHPA(p, target)
	h.name, h.downWindow = "hpa-nocooldown", 0
	return h
}

// Name is "hpa" or "hpa-nocooldown".
func (h *HPA) Name() string { return h.name }

// Period is the 15 s sync period.
func (*HPA) Period() float64 { return HPASync }

// Decide runs one HPA sync (reconcileAutoscaler).
func (h *HPA) Decide(o *Observation) Decision {
	current := len(o.Pods)
	if !h.started {
		// recordInitialRecommendation (horizontal.go): the first reconcile,
		// when the HPA is created with the run, records the current count, even
		// if the metrics then fail, so the HPA cannot drop below it within
		// the stabilisation window. Our first sync comes one period in; the
		// creation reconcile was at the start.
		h.started = true
		h.recs = append(h.recs, rec{t: math.Max(0, o.Now-HPASync), n: current})
	}
	rec, ok := h.recommend(o, current)
	clear(h.last)
	for _, p := range o.Pods {
		if !p.Pending {
			h.last[p.ID] = p.BusyCum
		}
	}
	h.lastT = o.Now
	if !ok {
		// computeReplicasForMetrics failed ("did not receive metrics for
		// targeted pods"): reconcileAutoscaler returns before normalising.
		return Decision{Replicas: current}
	}
	return Decision{Replicas: h.normalize(o.Now, rec, current)}
}

type hpaSample struct {
	use, req int64 // millicores
}

// recommend is GetResourceReplicas; ok is false when no pod has a sample.
func (h *HPA) recommend(o *Observation, current int) (int, bool) {
	dt := o.Now - h.lastT
	var metrics []hpaSample
	var missing, unready []int64 // requests of those pods
	ready := 0
	for _, p := range o.Pods {
		req := int64(math.Round(p.CPU * 1000))
		if p.Pending {
			unready = append(unready, req)
			continue
		}
		prev, has := h.last[p.ID]
		if !has || !(dt > 0) {
			missing = append(missing, req)
			continue
		}
		var isUnready bool
		if o.Now < p.Started+HPACPUInitPeriod {
			// Within the CPU initialisation period: unready if not Ready, or if
			// the sample's window began before the pod became Ready.
			isUnready = !p.Ready || o.Now-dt < p.ReadyAt
		} else {
			// Afterwards only a pod that never became Ready is left out; the
			// kubelet sets Ready=false at start, within the initial-readiness
			// delay, so every not-Ready pod here is such a pod.
			isUnready = !p.Ready
		}
		if isUnready {
			unready = append(unready, req)
			continue
		}
		use := int64(math.Round((p.BusyCum - prev) / dt * 1000))
		metrics = append(metrics, hpaSample{use: use, req: req})
		ready++
	}
	if len(metrics) == 0 {
		return current, false
	}
	ratio := h.ratio(metrics)
	scaleUpWithUnready := len(unready) > 0 && ratio > 1
	if !scaleUpWithUnready && len(missing) == 0 {
		if h.within(ratio) {
			return current, true
		}
		return int(math.Ceil(ratio * float64(ready))), true
	}
	if len(missing) > 0 {
		switch {
		case ratio < 1:
			fallback := max(100, h.targetPct)
			for _, req := range missing {
				metrics = append(metrics, hpaSample{use: req * fallback / 100, req: req})
			}
		case ratio > 1:
			for _, req := range missing {
				metrics = append(metrics, hpaSample{req: req})
			}
		}
	}
	if scaleUpWithUnready {
		for _, req := range unready {
			metrics = append(metrics, hpaSample{req: req})
		}
	}
	newRatio := h.ratio(metrics)
	if h.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return current, true
	}
	n := int(math.Ceil(newRatio * float64(len(metrics))))
	if (newRatio < 1 && n > current) || (newRatio > 1 && n < current) {
		return current, true
	}
	return n, true
}

// ratio is GetResourceUtilizationRatio: integer utilisation percent over the
// integer target percent.
func (h *HPA) ratio(m []hpaSample) float64 {
	var use, req int64
	for _, s := range m {
		use += s.use
		req += s.req
	}
	if req == 0 {
		return 0
	}
	return float64(use*100/req) / float64(h.targetPct)
}

func (*HPA) within(r float64) bool { return 1-HPATolerance <= r && r <= 1+HPATolerance }

// normalize is normalizeDesiredReplicas: 5-minute stabilisation (the highest
// recommendation within the window, this one included), then the bounds of
// convertDesiredReplicasWithRules. For hpa-nocooldown it is
// normalizeDesiredReplicasWithBehaviors with scale-down stabilisation 0 and the
// default rules: calculateScaleUpLimitWithScalingRules takes the larger of
// the Percent (100 %: 2 × the replicas at the start of the 15 s period) and
// Pods (4: those replicas + 4) policies; a sync every 15 s starts a new period.
func (h *HPA) normalize(now float64, recommendation, current int) int {
	stable := recommendation
	keep := h.recs[:0]
	for _, r := range h.recs {
		if r.t < now-h.downWindow || h.downWindow == 0 {
			continue
		}
		keep = append(keep, r)
		stable = max(stable, r.n)
	}
	h.recs = append(keep, rec{now, recommendation})
	upLimit := max(HPAScaleUpFactor*current, HPAScaleUpMinimum)
	if h.downWindow == 0 {
		upLimit = max(2*current, current+HPAScaleUpMinimum)
	}
	maxAllowed := min(max(h.p.MaxReplicas, 1), upLimit)
	switch {
	case stable < max(h.p.MinReplicas, 1):
		return max(h.p.MinReplicas, 1)
	case stable > maxAllowed:
		return maxAllowed
	}
	return stable
}
