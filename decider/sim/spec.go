package sim

// Spec holds the SPEC Research Group elasticity metrics (Herbst et al., "Ready
// for Rain? A View from SPEC Research on the Future of Cloud Metrics", 2016):
// demand d(t) is the oracle's required pods, supply s(t) the compared curve,
// both sampled each simulated second.
type Spec struct {
	// ThetaU and ThetaO are the under/over-provisioning accuracy:
	// mean of max(d−s,0)/d and max(s−d,0)/d over time, in %.
	ThetaU float64 `json:"theta_u"`
	ThetaO float64 `json:"theta_o"`
	// TauU and TauO are the shares of time under/over-provisioned, in %.
	TauU float64 `json:"tau_u"`
	TauO float64 `json:"tau_o"`
	// Instability is the share of time steps where supply and demand do not
	// move in the same direction (one moves, the other does not or moves the
	// other way), in %.
	Instability float64 `json:"instability"`
	// Jitter is (supply adaptations − demand changes) per simulated minute.
	Jitter float64 `json:"jitter"`
}

// Elasticity computes the SPEC RG metrics of supply against demand.
func Elasticity(demand, supply []int) Spec {
	n := min(len(demand), len(supply))
	var m Spec
	if n == 0 {
		return m
	}
	var es, ed, unstable int
	for i := 0; i < n; i++ {
		d, s := float64(max(demand[i], 1)), float64(supply[i])
		if s < d {
			m.ThetaU += (d - s) / d
			m.TauU++
		} else if s > d {
			m.ThetaO += (s - d) / d
			m.TauO++
		}
		if i > 0 {
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
	}
	f := 100 / float64(n)
	m.ThetaU *= f
	m.ThetaO *= f
	m.TauU *= f
	m.TauO *= f
	if n > 1 {
		m.Instability = 100 * float64(unstable) / float64(n-1)
	}
	m.Jitter = float64(es-ed) / (float64(n) / 60)
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
