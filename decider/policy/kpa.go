package policy

import "math"

// Knative Pod Autoscaler defaults (knative.dev/serving config-autoscaler and
// pkg/autoscaler/scaling/autoscaler.go).
const (
	KPATick            = 2.0  // the autoscaler's tick interval
	KPAStableWindow    = 60   // stable-window, seconds
	KPAPanicWindow     = 6    // panic-window-percentage 10 % of 60 s
	KPAPanicThreshold  = 2.0  // panic-threshold-percentage 200 %
	KPATargetUtil      = 0.7  // container-concurrency-target-percentage 70 %
	KPAMaxScaleUpRate  = 1000 // max-scale-up-rate
	KPAMaxScaleDown    = 2.0  // max-scale-down-rate
	KPADefaultTarget   = 100  // container-concurrency-target-default when k is unlimited
	kpaUnlimitedTarget = KPADefaultTarget * KPATargetUtil
)

// KPA is Knative's concurrency autoscaler: desired pods = observed concurrency
// averaged over the stable (60 s) or panic (6 s) window divided by the target
// concurrency per pod (k × 70 %). It panics when the panic-window count reaches
// 200 % of the ready pods, and while panicking (until 60 s pass without the
// threshold being reached) it never scales down. Each tick's change is bounded
// to [ready/2, ready×1000]. Scale to zero is off (min 1).
type KPA struct {
	p            Params
	target       float64
	panicTime    float64
	panicking    bool
	maxPanicPods int
}

// NewKPA returns a KPA for the workload p.
func NewKPA(p Params) *KPA {
	t := kpaUnlimitedTarget
	if p.Concurrency > 0 {
		t = float64(p.Concurrency) * KPATargetUtil
	}
	return &KPA{p: p, target: t}
}

// Name is "kpa".
func (*KPA) Name() string { return "kpa" }

// Period is the 2 s tick.
func (*KPA) Period() float64 { return KPATick }

func avgInFlight(o *Observation, w int) float64 {
	n := min(w, len(o.Seconds))
	if n == 0 {
		return 0
	}
	s := 0.0
	for _, x := range o.Seconds[len(o.Seconds)-n:] {
		s += x.InFlight
	}
	return s / float64(n)
}

// Decide runs one KPA tick.
func (k *KPA) Decide(o *Observation) Decision {
	ready := float64(max(1, o.Ready()))
	stable := avgInFlight(o, KPAStableWindow)
	panicV := avgInFlight(o, KPAPanicWindow)
	dspc := math.Ceil(stable / k.target)
	dppc := math.Ceil(panicV / k.target)
	maxUp := math.Ceil(KPAMaxScaleUpRate * ready)
	maxDown := math.Floor(ready / KPAMaxScaleDown)
	dspc = math.Min(math.Max(dspc, maxDown), maxUp)
	dppc = math.Min(math.Max(dppc, maxDown), maxUp)
	over := dppc/ready >= KPAPanicThreshold
	switch {
	case over:
		if !k.panicking {
			k.panicking = true
		}
		k.panicTime = o.Now
	case k.panicking && k.panicTime+KPAStableWindow <= o.Now:
		k.panicking = false
		k.maxPanicPods = 0
	}
	desired := int(dspc)
	if k.panicking {
		desired = max(int(dppc), k.maxPanicPods)
		k.maxPanicPods = desired
	}
	return Decision{Replicas: clamp(desired, k.p)}
}
