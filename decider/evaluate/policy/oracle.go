package policy

import "math"

// Oracle knows the future: how many Ready pods each second needs (Future.Need,
// sized from the true arrival rates) and the init time every pod start will
// take (Future.InitTime, the realised values of the run). At each second it
// keeps the pods needed before a replacement could be Ready, and starts each
// new pod at the last second that still gets it Ready when it is first
// needed. Pods it no longer needs within that time are removed at once.
//
// With a constant init time I this is: desired(t) = the most pods any second
// in [t, t + ⌈I⌉] needs. A pod started at t is Ready at t + I; started one
// second later it would miss second t + ⌈I⌉; and a pod idle now but needed
// again within ⌈I⌉ costs less kept than removed and started again.
//
// The cheapest need curve that still meets the SLO is found by simulation
// (sim.Compare searches a headroom and a smoothing window); without a Need
// the oracle follows the demand curve (Demand).
//
// There are two oracles. OracleName's requests reach its pods at random
// through a Service, the data plane qas and the HPA have, so that comparing
// them with it compares scaling only. PooledOracleName's routing is free:
// through the Service or through a capacity-aware proxy in front
// (Future.Activator, as Knative's activator, which pools the pods' queues),
// for comparisons with the KPA, whose activator does the same.
type Oracle struct {
	name      string
	p         Params
	activator bool
	need      []int
	rate      []float64
	init      func(int) float64
	maxOf     []int     // maxOf[s] = the most pods any second from s on needs
	run       []int     // scratch: running maxima of need from the decision second
	peak      []float64 // scratch: running maxima of rate
	// pending are the planned Ready times of the pods it started that are
	// not Ready yet (it keeps them: they were started for a later need).
	pending []float64
}

// The yardsticks' names. The clairvoyant oracles (Oracle) know the future;
// the reactive oracles (ReactiveOracle) know the true rate of the present
// second the moment it changes and act at once, but not the future; the
// lower bounds are computed, not run: the pod-seconds of sizing each second
// at its true rate with no init cost. The plain names are on the run's data
// plane (random through a Service by default); the -pooled ones may also put
// a pooled queue (an activator) in front of the pods, the KPA's yardsticks.
const (
	OracleName               = "oracle"
	PooledOracleName         = "oracle-pooled"
	ReactiveOracleName       = "oracle-reactive"
	PooledReactiveOracleName = "oracle-reactive-pooled"
	LowerBoundName           = "lower-bound"
	PooledLowerBoundName     = "lower-bound-pooled"
	// YardsticksName in a list of policies stands for all six.
	YardsticksName = "yardsticks"
)

// Yardsticks are the yardsticks' names in the order they are listed.
var Yardsticks = []string{OracleName, ReactiveOracleName, LowerBoundName, PooledOracleName, PooledReactiveOracleName, PooledLowerBoundName}

// IsYardstick tells whether name is one of Yardsticks.
func IsYardstick(name string) bool {
	for _, y := range Yardsticks {
		if y == name {
			return true
		}
	}
	return false
}

// ReactiveOracle knows the true arrival rate of the present second the
// moment it changes (Future.Need, sized from a trailing window of true rates
// ending at the present: no peek ahead) and sets its count at once, every
// second, but its new pods still take their init time: the best a purely
// reactive autoscaler could do. The difference between it and the
// clairvoyant Oracle is what knowing the future is worth.
type ReactiveOracle struct {
	name string
	p    Params
	need []int
}

// NewReactiveOracle returns a reactive oracle named name following need.
func NewReactiveOracle(name string, p Params, need []int) *ReactiveOracle {
	return &ReactiveOracle{name: name, p: p, need: need}
}

// Name is ReactiveOracleName or PooledReactiveOracleName.
func (r *ReactiveOracle) Name() string { return r.name }

// Period is one second.
func (*ReactiveOracle) Period() float64 { return 1 }

// Decide asks for the present second's need: the second starting now.
func (r *ReactiveOracle) Decide(o *Observation) Decision {
	if len(r.need) == 0 {
		return Decision{Replicas: clamp(0, r.p)}
	}
	s := min(max(int(o.Now+1e-9), 0), len(r.need)-1)
	return Decision{Replicas: clamp(r.need[s], r.p)}
}

// NewOracle returns the Service-routed oracle (OracleName) for the future f.
// Its requests always go through the Service: f.Activator is for
// NewPooledOracle (New rejects it for OracleName).
func NewOracle(p Params, f Future) *Oracle {
	f.Activator = false
	return newOracle(OracleName, p, f)
}

// NewPooledOracle returns the oracle whose routing is free (PooledOracleName):
// through the activator when f.Activator, else through the Service.
func NewPooledOracle(p Params, f Future) *Oracle {
	return newOracle(PooledOracleName, p, f)
}

func newOracle(name string, p Params, f Future) *Oracle {
	need, rate := f.Need, f.Sizing
	if need == nil && f.Capacity != nil {
		need, rate = Demand(f.Rates, f.Capacity), f.Rates
	}
	if rate == nil {
		rate = f.Rates
	}
	init := f.InitTime
	if init == nil {
		c := f.Init
		init = func(int) float64 { return c }
	}
	o := &Oracle{name: name, p: p, activator: f.Activator, need: make([]int, len(need)), rate: rate, init: init}
	for i, n := range need {
		o.need[i] = clamp(n, p)
	}
	o.maxOf = make([]int, len(o.need)+1)
	for i := len(o.need) - 1; i >= 0; i-- {
		o.maxOf[i] = max(o.maxOf[i+1], o.need[i])
	}
	return o
}

// Name is OracleName or PooledOracleName.
func (o *Oracle) Name() string { return o.name }

// Pooled tells whether this is the oracle whose routing is free
// (PooledOracleName).
func (o *Oracle) Pooled() bool { return o.name == PooledOracleName }

// Period is one second.
func (*Oracle) Period() float64 { return 1 }

// ActivatorRouting tells the simulator whether the oracle's requests go
// through a capacity-aware proxy (as Knative's activator) rather than at
// random through a Service (Future.Activator).
func (o *Oracle) ActivatorRouting() bool { return o.activator }

// Decide plans with the realised init times of the next pod starts
// (obs.PodStarts is the index of the next one).
func (o *Oracle) Decide(obs *Observation) Decision {
	from := int(obs.Now)
	n, j := len(obs.Pods), obs.PodStarts
	keep := o.pending[:0]
	latest := obs.Now
	for _, t := range o.pending {
		if t > obs.Now {
			keep = append(keep, t)
			latest = math.Max(latest, t)
		}
	}
	o.pending = keep
	o.run, o.peak = o.run[:0], o.peak[:0]
	// Pods needed before a replacement (the next start, index j) could be
	// Ready, or before the pods still starting are Ready: keep them.
	hk := horizon(math.Max(o.init(j), latest-obs.Now))
	want := o.maxNeed(from, hk)
	// Start pod n+m+1 (start index j+m) now if some second it is needed in
	// comes before it could be Ready if started one second later.
	limit := max(o.p.MaxReplicas, 1)
	if from < len(o.maxOf) {
		limit = min(limit, o.maxOf[from])
	}
	add := 0
	for m := 0; n+m < limit; m++ {
		if o.maxNeed(from, horizon(o.init(j+m))) >= n+m+1 {
			add = m + 1
		}
	}
	desired := want
	if add > 0 {
		desired = max(want, n+add)
	}
	for m := 0; m < desired-n; m++ {
		o.pending = append(o.pending, obs.Now+o.init(j+m))
	}
	return Decision{Replicas: clamp(desired, o.p), Forecast: o.peak[hk]}
}

// horizon is the last second, counted from the decision, that a pod started
// now with init time d is the only way to cover: ⌈d⌉.
func horizon(d float64) int { return int(math.Ceil(d - 1e-9)) }

// maxNeed is the most pods any second in [from, from+h] needs (0 past the end
// of the run), extending the running maxima as far as asked.
func (o *Oracle) maxNeed(from, h int) int {
	for len(o.run) <= h {
		s := from + len(o.run)
		v, r := 0, 0.0
		if s < len(o.need) {
			v = o.need[s]
			if s < len(o.rate) {
				r = o.rate[s]
			}
		}
		if k := len(o.run); k > 0 {
			v, r = max(v, o.run[k-1]), math.Max(r, o.peak[k-1])
		}
		o.run = append(o.run, v)
		o.peak = append(o.peak, r)
		if s >= len(o.need) {
			// Past the end nothing more is needed: stop extending.
			for len(o.run) <= h {
				o.run = append(o.run, v)
				o.peak = append(o.peak, r)
			}
		}
	}
	return o.run[h]
}

// Demand is the SPEC RG demand curve: for each second s, the fewest pods
// whose latency bound (Capacity.Pods) meets the target at that second's true
// arrival rate rates[s].
func Demand(rates []float64, c *Capacity) []int {
	d := make([]int, len(rates))
	for i, r := range rates {
		d[i] = c.Pods(r)
	}
	return d
}
