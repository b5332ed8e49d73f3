package policy

import "math"

func init() {
	extra["predictive-hpa"] = func(p Params, _ Future) Policy { return NewPredictiveHPA(p, p.cpuTarget()) }
	extra["alg1"] = func(p Params, _ Future) Policy { return NewOneStep(p, Alg4Target) }
	extra["alg2"] = func(p Params, _ Future) Policy { return NewWindowed(p, Alg4Target, false) }
	extra["alg3"] = func(p Params, _ Future) Policy { return NewWindowed(p, Alg4Target, true) }
}

// usageMeter turns pods' cumulative CPU into per-interval usage, as
// metrics-server does between two scrapes.
type usageMeter struct {
	last  map[int]float64
	lastT float64
}

func newUsageMeter() usageMeter { return usageMeter{last: map[int]float64{}, lastT: math.Inf(-1)} }

// measure returns the CPU cores used and the requested cores of the Ready
// pods that have a previous sample, and how many such pods there are.
func (m *usageMeter) measure(o *Observation) (used, requested float64, pods int) {
	dt := o.Now - m.lastT
	for _, p := range o.Pods {
		if prev, ok := m.last[p.ID]; ok && p.Ready && dt > 0 {
			used += (p.BusyCum - prev) / dt
			requested += p.CPU
			pods++
		}
	}
	clear(m.last)
	for _, p := range o.Pods {
		m.last[p.ID] = p.BusyCum
	}
	m.lastT = o.Now
	return used, requested, pods
}

// Seed 000 (predictive horizontal pod autoscaling, section 3.5 and the
// implementation chapter): the HPA of its time (30 s sync, tolerance 0.1, no
// rescale within 3 min of the last one for scale-up or 5 min for scale-down)
// with the utilisation replaced, for scale-up, by a least-squares line through
// every previous utilisation measurement evaluated at now + the average pod
// initialisation time; when the line's slope is negative the current
// utilisation is used (reactive).
const (
	PredictiveHPASync     = 30.0
	PredictiveHPAUpCool   = 180.0
	PredictiveHPADownCool = 300.0
)

// PredictiveHPA is seed 000's predictive HPA.
type PredictiveHPA struct {
	p        Params
	target   float64
	meter    usageMeter
	ts, us   []float64
	lastScal float64
}

// NewPredictiveHPA returns seed 000's autoscaler with a CPU utilisation target.
func NewPredictiveHPA(p Params, target float64) *PredictiveHPA {
	return &PredictiveHPA{p: p, target: target, meter: newUsageMeter(), lastScal: math.Inf(-1)}
}

// Name is "predictive-hpa".
func (*PredictiveHPA) Name() string { return "predictive-hpa" }

// Period is its 30 s sync.
func (*PredictiveHPA) Period() float64 { return PredictiveHPASync }

// Decide runs one sync.
func (h *PredictiveHPA) Decide(o *Observation) Decision {
	current := len(o.Pods)
	used, req, n := h.meter.measure(o)
	if n == 0 {
		return Decision{Replicas: current}
	}
	util := used / req
	h.ts = append(h.ts, o.Now)
	h.us = append(h.us, util)
	init := 0.0
	for _, d := range o.InitTimes {
		init += d
	}
	if len(o.InitTimes) > 0 {
		init /= float64(len(o.InitTimes))
	}
	predicted := util
	if a, b, ok := lineOfBestFit(h.ts, h.us); ok && b > 0 {
		predicted = a + b*(o.Now+init)
	}
	ratio := predicted / h.target
	if math.Abs(1-ratio) <= HPATolerance {
		return Decision{Replicas: current}
	}
	desired := clamp(int(math.Ceil(ratio*float64(current))), h.p)
	switch {
	case desired > current && o.Now-h.lastScal < PredictiveHPAUpCool,
		desired < current && o.Now-h.lastScal < PredictiveHPADownCool:
		return Decision{Replicas: current}
	}
	if desired != current {
		h.lastScal = o.Now
	}
	return Decision{Replicas: desired, Forecast: 0}
}

// lineOfBestFit is the least-squares line y = a + b·x (seed 000: b from the
// centred sums, a = ȳ − b·x̄).
func lineOfBestFit(x, y []float64) (a, b float64, ok bool) {
	n := float64(len(x))
	if len(x) < 2 {
		return 0, 0, false
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return 0, 0, false
	}
	b = sxy / sxx
	return my - b*mx, b, true
}

// Seed 004 (chapter 3.4): three variations of the HPA equation
// n_k = ⌈n_{k−1} · U(k)/U⌉ on CPU utilisation with a 50 % goal (its
// experiments' setting), measurements every minute.
const (
	Alg4Target  = 0.5
	Alg4Measure = 60.0
	Alg4Window  = 5
)

// OneStep is seed 004's Algorithm 1 (one-step history): scale by the HPA
// equation when the direction repeats the previous decision, by one pod when it
// reverses it. Initial values n = 1, D = Up as in the seed. It decides every
// minute, on the utilisation of that minute.
type OneStep struct {
	p      Params
	target float64
	meter  usageMeter
	n      int
	up     bool
}

// NewOneStep returns Algorithm 1.
func NewOneStep(p Params, target float64) *OneStep {
	return &OneStep{p: p, target: target, meter: newUsageMeter(), n: 1, up: true}
}

// Name is "alg1".
func (*OneStep) Name() string { return "alg1" }

// Period is one minute.
func (*OneStep) Period() float64 { return Alg4Measure }

// Decide runs Algorithm 1.
func (a *OneStep) Decide(o *Observation) Decision {
	used, req, n := a.meter.measure(o)
	if n == 0 {
		return Decision{Replicas: len(o.Pods)}
	}
	u := used / req
	hpa := clamp(int(math.Ceil(float64(a.n)*u/a.target)), a.p)
	switch {
	case u > a.target && a.up:
		a.n = hpa
	case u > a.target:
		a.n = clamp(a.n+1, a.p)
	case a.up:
		a.n = clamp(a.n-1, a.p)
	default:
		a.n = hpa
	}
	a.up = u > a.target
	return Decision{Replicas: a.n}
}

// Windowed is seed 004's Algorithm 2 (rolling average: every minute, over the
// last five one-minute measurements) or Algorithm 3 (moving window: every five
// minutes, over the five measurements of that window). Both use Equation 3.6,
// Σ cores / Σ pods over the window, relative to the request. (Algorithm 3's
// pseudocode divides by the number of measurements instead; the text says the
// formula is Equation 3.6's, which is what we use.)
type Windowed struct {
	p      Params
	target float64
	moving bool
	meter  usageMeter
	cores  []float64
	pods   []float64
	n      int
	// tick counts the measurements taken.
	tick int
}

// NewWindowed returns Algorithm 2 (moving=false) or 3 (moving=true).
func NewWindowed(p Params, target float64, moving bool) *Windowed {
	return &Windowed{p: p, target: target, moving: moving, meter: newUsageMeter(), n: 1}
}

// Name is "alg2" or "alg3".
func (w *Windowed) Name() string {
	if w.moving {
		return "alg3"
	}
	return "alg2"
}

// Period is the one-minute measurement interval; Algorithm 3 acts on every fifth.
func (*Windowed) Period() float64 { return Alg4Measure }

// Decide records a measurement and, when due, decides.
func (w *Windowed) Decide(o *Observation) Decision {
	used, req, n := w.meter.measure(o)
	if n > 0 {
		w.cores = append(w.cores, used)
		w.pods = append(w.pods, float64(n))
		if len(w.cores) > Alg4Window {
			w.cores, w.pods = w.cores[1:], w.pods[1:]
		}
		w.tick++
	}
	if len(w.cores) == 0 || (w.moving && (len(w.cores) < Alg4Window || w.tick%Alg4Window != 0 || n == 0)) {
		return Decision{Replicas: len(o.Pods)}
	}
	var c, p float64
	for i := range w.cores {
		c += w.cores[i]
		p += w.pods[i]
	}
	u := c / p / (req / float64(n))
	w.n = clamp(int(math.Ceil(float64(w.n)*u/w.target)), w.p)
	return Decision{Replicas: w.n}
}
