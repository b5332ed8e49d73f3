package policy

import "math"

// Oracle knows the true future arrival rate and the init time: at each second
// it wants the fewest pods whose latency bound (Capacity) meets the target for
// every second from now until a pod started now would be ready and one more
// decision period has passed. Pods it no longer needs are removed at once.
type Oracle struct {
	p Params
	f Future
}

// NewOracle returns the oracle for the future f.
func NewOracle(p Params, f Future) *Oracle { return &Oracle{p: p, f: f} }

// Name is "oracle".
func (*Oracle) Name() string { return "oracle" }

// Period is one second.
func (*Oracle) Period() float64 { return 1 }

// Decide returns the most pods any second in [now, now+init+1] needs.
func (o *Oracle) Decide(obs *Observation) Decision {
	from := int(obs.Now)
	to := from + int(math.Ceil(o.f.Init)) + 1
	need, peak := 1, 0.0
	for s := from; s <= to && s < len(o.f.Rates); s++ {
		need = max(need, o.f.Capacity.Pods(o.f.Rates[s]))
		peak = max(peak, o.f.Rates[s])
	}
	return Decision{Replicas: clamp(need, o.p), Forecast: peak}
}

// Demand is the oracle's required pods for each second: the SPEC RG demand curve.
func Demand(rates []float64, c *Capacity) []int {
	d := make([]int, len(rates))
	for i, r := range rates {
		d[i] = c.Pods(r)
	}
	return d
}
