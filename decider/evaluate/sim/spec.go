package sim

import "math"

// Spec holds the SPEC Research Group elasticity metrics (N. Herbst et al.,
// "Ready for Rain? A View from SPEC Research on the Future of Cloud Metrics",
// SPEC-RG-2016-01, its elasticity metrics; the same definitions in Herbst et al.,
// "Quantifying Cloud Performance and Dependability: Taxonomy, Metric Design,
// and Emerging Challenges", ACM TOMPECS 3(4), 2018). Demand d is the pods the
// oracle's sizing rule needs (policy.Demand), supply s the Ready pods.
//
// θ and τ use the per-second curves. Instability and jitter count changes of
// direction and adaptations, and the per-second demand moves almost every
// second with the rate's noise, so every policy would look alike (and
// unstable); they use per-minute samples instead: each curve's mean over a
// simulated minute, rounded to whole pods (SpecSample).
type Spec struct {
	// ThetaU and ThetaO are the under/over-provisioning accuracy,
	// 100/T · Σ max(d−s, 0)/d · Δt and 100/T · Σ max(s−d, 0)/d · Δt, in %.
	ThetaU float64 `json:"theta_u"`
	ThetaO float64 `json:"theta_o"`
	// TauU and TauO are the under/over-provisioning timeshare,
	// 100/T · Σ max(sgn(d−s), 0) · Δt and 100/T · Σ max(sgn(s−d), 0) · Δt, in %.
	TauU float64 `json:"tau_u"`
	TauO float64 `json:"tau_o"`
	// Instability is υ = 100/(T − t₁) · Σ_{i≥2} min(|sgn Δs_i − sgn Δd_i|, 1) · Δt:
	// the share of time in which supply and demand do not move the same way
	// (opposite directions, or one moves while the other stays), in %.
	Instability float64 `json:"instability"`
	// Jitter is j = (E_S − E_D)/T: supply adaptations minus demand changes,
	// per simulated minute. Negative: supply adapts less often than demand
	// changes; positive: it changes more often (thrashing).
	Jitter float64 `json:"jitter"`
}

// SpecSample is the sample length, in simulated seconds, of instability and
// jitter.
const SpecSample = 60

// Elasticity computes the SPEC RG metrics of supply against demand, both one
// value per simulated second.
func Elasticity(demand, supply []int) Spec {
	n := min(len(demand), len(supply))
	var m Spec
	if n == 0 {
		return m
	}
	for i := 0; i < n; i++ {
		d, s := float64(max(demand[i], 1)), float64(supply[i])
		if s < d {
			m.ThetaU += (d - s) / d
			m.TauU++
		} else if s > d {
			m.ThetaO += (s - d) / d
			m.TauO++
		}
	}
	f := 100 / float64(n)
	m.ThetaU *= f
	m.ThetaO *= f
	m.TauU *= f
	m.TauO *= f
	m.Instability, m.Jitter = InstabilityJitter(Resample(demand[:n], SpecSample), Resample(supply[:n], SpecSample),
		float64(n)/SpecSample)
	return m
}

// Resample averages x over consecutive groups of step values (the last group
// may be shorter) and rounds each mean to a whole pod.
func Resample(x []int, step int) []int {
	out := make([]int, 0, (len(x)+step-1)/step)
	for i := 0; i < len(x); i += step {
		g := x[i:min(i+step, len(x))]
		sum := 0
		for _, v := range g {
			sum += v
		}
		out = append(out, int(math.Round(float64(sum)/float64(len(g)))))
	}
	return out
}

// InstabilityJitter computes SPEC RG instability (in %) and jitter (per unit
// of time) of equally spaced samples of demand and supply spanning duration
// units of time.
func InstabilityJitter(demand, supply []int, duration float64) (instability, jitter float64) {
	n := min(len(demand), len(supply))
	var es, ed, unstable int
	for i := 1; i < n; i++ {
		ds, dd := sign(supply[i]-supply[i-1]), sign(demand[i]-demand[i-1])
		if ds != 0 {
			es++
		}
		if dd != 0 {
			ed++
		}
		if ds != dd {
			unstable++
		}
	}
	if n > 1 {
		instability = 100 * float64(unstable) / float64(n-1)
	}
	if duration > 0 {
		jitter = float64(es-ed) / duration
	}
	return instability, jitter
}

// RequestedVsRunning is seed 004's variant of θ and τ (its Equations 3.1–3.4,
// section 3.3): over K decision intervals, N(k) is the replicas during
// interval k as the seed reads them, the Deployment's status.replicas: the
// pods created and not terminating, Ready or not (DecisionSample.Running),
// when the decision ending it is taken; N(k+1) the replicas requested for
// the next interval (the decision):
// θU = 100/K · Σ max(N(k+1) − N(k), 0)/N(k+1), θO = 100/K · Σ max(N(k) −
// N(k+1), 0)/N(k+1), τU and τO the shares of intervals with N(k+1) > N(k)
// and N(k+1) < N(k). It measures how far each request is from what runs (how
// much and how often a policy changes what it asks for, and how slowly pods
// start), not whether there are enough pods.
type RequestedVsRunning struct {
	ThetaU float64 `json:"theta_u"`
	ThetaO float64 `json:"theta_o"`
	TauU   float64 `json:"tau_u"`
	TauO   float64 `json:"tau_o"`
	// Intervals is K, the decisions sampled.
	Intervals int `json:"intervals"`
}

// SeedRequestedVsRunning computes seed 004's variant from a run's decisions.
func SeedRequestedVsRunning(decisions []DecisionSample) RequestedVsRunning {
	m := RequestedVsRunning{Intervals: len(decisions)}
	if len(decisions) == 0 {
		return m
	}
	for _, d := range decisions {
		next, now := float64(max(d.Requested, 1)), float64(d.Running)
		switch {
		case next > now:
			m.ThetaU += (next - now) / next
			m.TauU++
		case next < now:
			m.ThetaO += (now - next) / next
			m.TauO++
		}
	}
	f := 100 / float64(len(decisions))
	m.ThetaU *= f
	m.ThetaO *= f
	m.TauU *= f
	m.TauO *= f
	return m
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}
