package policy

import "math"

func init() {
	extra["khpa-a"] = func(p Params, _ Future) Policy { return NewKHPAA(p, KHPAATarget) }
}

// Seed 001 (Casalicchio, "A study on performance measures for auto-scaling
// CPU-intensive containerized applications", Cluster Computing 2019),
// Algorithm 2: P = ⌈Σ U_absolute,i / U_target⌉ over the active pods, with
// U_absolute,i = b + a·U_relative,i (Equation 2) and U_target an absolute
// utilisation (the seed evaluates 75–85 %). The seed fits a and b offline per
// workload and says they should be refitted from run-time data; we fit them
// online by least squares over every (pod relative utilisation, its node's
// absolute utilisation) pair observed, and use a = 1, b = 0 until two distinct
// points exist or when the simulation has no node model (then KHPA-A is KHPA).
const (
	KHPAATarget = 0.8
	// KHPAAPeriod is the seed's control period τ (its Algorithm 2, "with a
	// period τ = 30 s").
	KHPAAPeriod = 30.0
)

// KHPAA is seed 001's absolute-metric autoscaler.
type KHPAA struct {
	p        Params
	target   float64
	meter    usageMeter
	lastNode []float64
	lastT    float64
	rel, abs []float64
}

// NewKHPAA returns KHPA-A with an absolute utilisation target.
func NewKHPAA(p Params, target float64) *KHPAA {
	return &KHPAA{p: p, target: target, meter: newUsageMeter(), lastT: math.Inf(-1)}
}

// Name is "khpa-a".
func (*KHPAA) Name() string { return "khpa-a" }

// Period is the seed's control loop period τ, 30 s.
func (*KHPAA) Period() float64 { return KHPAAPeriod }

// Decide runs one loop of Algorithm 2.
func (k *KHPAA) Decide(o *Observation) Decision {
	dt := o.Now - k.lastT
	nodeUtil := make([]float64, len(o.Nodes))
	for i, n := range o.Nodes {
		if i < len(k.lastNode) && dt > 0 && n.CPU > 0 {
			nodeUtil[i] = (n.UsedCum - k.lastNode[i]) / dt / n.CPU
		}
	}
	k.lastNode = k.lastNode[:0]
	for _, n := range o.Nodes {
		k.lastNode = append(k.lastNode, n.UsedCum)
	}
	haveNodes := dt > 0 && len(o.Nodes) > 0 && !math.IsInf(k.lastT, -1)
	k.lastT = o.Now
	var rels []float64
	var nodes []int
	k.meter.measure(o, func(p Pod, cores float64) {
		rels = append(rels, cores/p.CPU)
		nodes = append(nodes, p.Node)
	})
	if len(rels) == 0 {
		return Decision{Replicas: len(o.Pods)}
	}
	if haveNodes {
		for i, r := range rels {
			if nodes[i] >= 0 {
				k.rel = append(k.rel, r)
				k.abs = append(k.abs, nodeUtil[nodes[i]])
			}
		}
	}
	a, b := 1.0, 0.0
	if fa, fb, ok := lineOfBestFit(k.rel, k.abs); ok {
		// lineOfBestFit returns intercept then slope: U_abs = fa + fb·U_rel.
		a, b = fb, fa
	}
	sum := 0.0
	for _, r := range rels {
		sum += math.Max(0, b+a*r)
	}
	return Decision{Replicas: clamp(int(math.Ceil(sum/k.target)), k.p)}
}
