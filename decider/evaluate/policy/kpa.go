package policy

import "math"

// Knative Pod Autoscaler defaults. Sources are knative.dev/serving v0.51.0:
// pkg/autoscaler/config/config.go (defaultConfig), pkg/autoscaler/scaling/
// autoscaler.go (autoscaler.Scale), pkg/autoscaler/scaling/multiscaler.go
// (tickInterval) and pkg/autoscaler/aggregation/bucketing.go (WindowAverage).
const (
	KPATick            = 2.0  // multiscaler.go tickInterval
	KPAStableWindow    = 60   // defaultConfig StableWindow
	KPAPanicWindow     = 6    // defaultConfig PanicWindowPercentage 10 % of 60 s
	KPAPanicThreshold  = 2.0  // defaultConfig PanicThresholdPercentage 200 %
	KPATargetUtil      = 0.7  // defaultTargetUtilization (ContainerConcurrencyTargetFraction)
	KPAMaxScaleUpRate  = 1000 // defaultConfig MaxScaleUpRate
	KPAMaxScaleDown    = 2.0  // defaultConfig MaxScaleDownRate
	KPADefaultTarget   = 100  // defaultConfig ContainerConcurrencyTargetDefault (k unlimited)
	KPABurstCapacity   = 211  // defaultConfig TargetBurstCapacity
	kpaUnlimitedTarget = KPADefaultTarget * KPATargetUtil
)

// KPA is Knative's concurrency autoscaler, autoscaler.Scale with the default
// configuration, ticking every 2 s:
//   - observed concurrency is averaged over the stable (60 s) and panic (6 s)
//     windows, over the seconds seen so far when the run is younger than a
//     window (WindowAverage divides by the buckets written);
//   - target per pod = k × 70 % (100 × 70 % when k is unlimited);
//   - dspc = ⌈stable / target⌉, dppc = ⌈panic / target⌉, each kept within
//     [⌊ready / 2⌋, ⌈ready × 1000⌉] (max scale-down and scale-up rates, ready
//     counted as at least 1);
//   - panic starts when the unclamped dppc / ready ≥ 200 %, is extended every
//     tick that stays over it, and ends on the first tick that is under it and
//     more than 60 s (StableWindow) after the last extension;
//   - in panic the desired count is max(stable, panic) counts, and never goes
//     below the highest count of this panic (maxPanicPods): no scale-down while
//     panicking; in stable mode it is the stable count;
//   - newAutoscaler starts in panic mode when it finds more than one Ready pod:
//     panic time = its creation, maxPanicPods = the Ready count, so it holds
//     the current count until a stable window has passed without a new panic
//     ("we're keeping at least the current scale until we accumulate enough
//     data");
//   - scale-down delay is 0 by default (no delay window); with the
//     scale-down-delay knob (config-autoscaler scale-down-delay, or the
//     autoscaling.knative.dev/scale-down-delay annotation) the result is the
//     highest desired count of the last delay (max.TimeWindow, 2 s buckets).
//
// The excess burst capacity decides whether the activator is in the request
// path: Scale computes EBC = ⌊ready × k − 211 − panic concurrency⌋ (total
// capacity minus TargetBurstCapacity minus the panic-window value), and a
// negative EBC puts the activator in the path (pkg/reconciler/autoscaling/kpa
// sets the SKS to proxy mode). ActivatorRouting reports it to the simulator,
// which then holds requests in front and sends each to a Ready pod with a
// free place (the activator's capacity-aware throttling for a container
// concurrency k), instead of routing at random as a Service does.
//
// Not modelled: scale to zero and its 30 s grace period (min 1 replica:
// ScaleToZeroGracePeriod applies only once the count reaches 0).
type KPA struct {
	p            Params
	target       float64
	panicTime    float64
	panicking    bool
	maxPanicPods int
	// proxy is true while the activator is in the request path (EBC < 0).
	proxy bool
	// started is set once the autoscaler was created (newAutoscaler).
	started bool
	// name and downDelay: "kpa" with Knative's default 0, or a variant with
	// scale-down-delay; delayed keeps the desired counts within it.
	name      string
	downDelay float64
	delayed   []rec
}

// KPADelayName is the KPA with Knative's scale-down-delay set to KPADelay,
// the same 5-minute scale-down memory the HPA and QAS have by default.
const (
	KPADelayName = "kpa-delay"
	KPADelay     = 300.0
)

// NewKPA returns a KPA for the workload p.
func NewKPA(p Params) *KPA {
	t := kpaUnlimitedTarget
	if p.Concurrency > 0 {
		t = float64(p.Concurrency) * KPATargetUtil
	}
	// A new revision starts with the activator in the path (EBC unknown, and
	// negative for any deployment smaller than the burst capacity).
	return &KPA{p: p, target: t, proxy: true, name: "kpa"}
}

// NewKPAWithDelay returns the KPA with scale-down-delay d seconds (a
// multiple of the 2 s tick), named KPADelayName.
func NewKPAWithDelay(p Params, d float64) *KPA {
	k := NewKPA(p)
	k.name, k.downDelay = KPADelayName, d
	return k
}

// ActivatorRouting reports whether the activator is in the request path.
func (k *KPA) ActivatorRouting() bool { return k.proxy }

// Name is "kpa" or KPADelayName.
func (k *KPA) Name() string { return k.name }

// Period is the 2 s tick.
func (*KPA) Period() float64 { return KPATick }

// avgInFlight is the mean number of requests in the pods over the last w seconds.
func avgInFlight(o *Observation, w int) float64 {
	return o.mean(w, func(x Second) float64 { return x.InFlight })
}

// Decide runs one KPA tick (autoscaler.Scale).
func (k *KPA) Decide(o *Observation) Decision {
	if !k.started {
		// newAutoscaler, at the run's start: in panic with the Ready count
		// held when there is more than one Ready pod.
		k.started = true
		if n := o.Ready(); n > 1 {
			k.panicking, k.panicTime, k.maxPanicPods = true, math.Max(0, o.Now-KPATick), n
		}
	}
	ready := float64(max(1, o.Ready()))
	stable := avgInFlight(o, KPAStableWindow)
	panicV := avgInFlight(o, KPAPanicWindow)
	maxUp := math.Ceil(KPAMaxScaleUpRate * ready)
	maxDown := math.Floor(ready / KPAMaxScaleDown)
	dspc := math.Ceil(stable / k.target)
	dppc := math.Ceil(panicV / k.target)
	desiredStable := int(math.Min(math.Max(dspc, maxDown), maxUp))
	desiredPanic := int(math.Min(math.Max(dppc, maxDown), maxUp))
	over := dppc/ready >= KPAPanicThreshold
	switch {
	case over:
		k.panicking = true
		k.panicTime = o.Now
	case k.panicking && k.panicTime+KPAStableWindow < o.Now:
		k.panicking = false
		k.maxPanicPods = 0
	}
	// Excess burst capacity, from the Ready pods' total capacity k each
	// (Scale: totCap − TargetBurstCapacity − observedPanicValue).
	if c := k.p.Concurrency; c > 0 {
		ebc := math.Floor(float64(o.Ready())*float64(c) - KPABurstCapacity - panicV)
		k.proxy = ebc < 0
	}
	desired := desiredStable
	if k.panicking {
		desired = max(desired, desiredPanic)
		k.maxPanicPods = max(k.maxPanicPods, desired)
		desired = k.maxPanicPods
	}
	if k.downDelay > 0 {
		// max.TimeWindow: the highest count recorded within the delay.
		keep := k.delayed[:0]
		for _, r := range k.delayed {
			if r.t > o.Now-k.downDelay {
				keep = append(keep, r)
			}
		}
		k.delayed = append(keep, rec{o.Now, desired})
		for _, r := range k.delayed {
			desired = max(desired, r.n)
		}
	}
	return Decision{Replicas: clamp(desired, k.p)}
}
