package policy

import "math"

func init() {
	extra["hpa-cooldown"] = func(p Params, _ Future) Policy { return NewCooldownHPA(p, p.cpuTarget()) }
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
// pods that have a previous sample, and how many such pods there are; each,
// when set, is given every such pod and the cores it used (for a policy that
// looks at pods one by one).
func (m *usageMeter) measure(o *Observation, each func(p Pod, cores float64)) (used, requested float64, pods int) {
	dt := o.Now - m.lastT
	for _, p := range o.Pods {
		if prev, ok := m.last[p.ID]; ok && p.Ready && dt > 0 {
			cores := (p.BusyCum - prev) / dt
			used += cores
			requested += p.CPU
			pods++
			if each != nil {
				each(p, cores)
			}
		}
	}
	clear(m.last)
	for _, p := range o.Pods {
		m.last[p.ID] = p.BusyCum
	}
	m.lastT = o.Now
	return used, requested, pods
}

// Seed 000 (predictive horizontal pod autoscaling, sections 3.4–3.5 and the
// implementation chapter 4.2) and the HPA of its time, which it compares
// against. The era's HPA (Kubernetes 1.2–1.5: pkg/controller/podautoscaler
// horizontal.go and cmd/kube-controller-manager options.go) syncs every 30 s,
// holds while the utilisation is within 10 % of the target, sets
// TargetNumOfPods = ⌈utilisation / target × current replicas⌉ (the seed's
// §3.4.2), and rescales only if the last rescale was more than 3 minutes ago
// for a scale-up (upscaleForbiddenWindow) or 5 minutes ago for a scale-down
// (downscaleForbiddenWindow). The utilisation is usage / request over the
// Ready pods with a sample since the last sync (the seed does not say which
// pods; Kubernetes 1.5's metrics client counts running and Ready ones). The
// era's max(2 × current, 4) scale-up limit is not in the seed's description
// and is not applied.
//
// The predictive variant replaces the utilisation, for scale-up, by a
// least-squares line through the utilisations of the last p·c seconds (p the
// mean pod initialisation time measured so far, c = 20, at most 3 minutes:
// §4.2.2 and its footnote 4), evaluated at now + p; when the line's slope is
// negative the current utilisation is used (reactive), as before any pod has
// initialised (p = 0 leaves one point).
const (
	PredictiveHPASync     = 30.0
	PredictiveHPAUpCool   = 180.0
	PredictiveHPADownCool = 300.0
	// PredictiveHPAHistoryFactor is c, and PredictiveHPAHistoryMax the cap
	// on p·c, seconds.
	PredictiveHPAHistoryFactor = 20.0
	PredictiveHPAHistoryMax    = 180.0
)

// PredictiveHPA is seed 000's predictive HPA, or with predictive false the
// reactive HPA of its time (hpa-cooldown).
type PredictiveHPA struct {
	p          Params
	predictive bool
	target     float64
	meter      usageMeter
	ts, us     []float64
	lastScal   float64
}

// NewPredictiveHPA returns seed 000's autoscaler with a CPU utilisation target.
func NewPredictiveHPA(p Params, target float64) *PredictiveHPA {
	return &PredictiveHPA{p: p, predictive: true, target: target, meter: newUsageMeter(), lastScal: math.Inf(-1)}
}

// NewCooldownHPA returns the reactive HPA of seed 000's time (hpa-cooldown).
func NewCooldownHPA(p Params, target float64) *PredictiveHPA {
	h := NewPredictiveHPA(p, target)
	h.predictive = false
	return h
}

// Name is "predictive-hpa" or "hpa-cooldown".
func (h *PredictiveHPA) Name() string {
	if h.predictive {
		return "predictive-hpa"
	}
	return "hpa-cooldown"
}

// Period is its 30 s sync.
func (*PredictiveHPA) Period() float64 { return PredictiveHPASync }

// Decide runs one sync.
func (h *PredictiveHPA) Decide(o *Observation) Decision {
	current := len(o.Pods)
	used, req, n := h.meter.measure(o, nil)
	if n == 0 {
		return Decision{Replicas: current}
	}
	util := used / req
	predicted := util
	if h.predictive {
		init := 0.0
		for _, d := range o.InitTimes {
			init += d
		}
		if len(o.InitTimes) > 0 {
			init /= float64(len(o.InitTimes))
		}
		h.ts = append(h.ts, o.Now)
		h.us = append(h.us, util)
		from := o.Now - min(init*PredictiveHPAHistoryFactor, PredictiveHPAHistoryMax)
		drop := 0
		for drop < len(h.ts) && h.ts[drop] <= from && drop < len(h.ts)-1 {
			drop++
		}
		h.ts, h.us = h.ts[drop:], h.us[drop:]
		if a, b, ok := lineOfBestFit(h.ts, h.us); ok && b > 0 {
			predicted = a + b*(o.Now+init)
		}
	}
	ratio := predicted / h.target
	if math.Abs(1-ratio) <= HPATolerance {
		return Decision{Replicas: current}
	}
	desired := clamp(int(math.Ceil(ratio*float64(current))), h.p)
	switch {
	case desired > current && o.Now-h.lastScal <= PredictiveHPAUpCool,
		desired < current && o.Now-h.lastScal <= PredictiveHPADownCool:
		return Decision{Replicas: current}
	}
	if desired != current {
		h.lastScal = o.Now
	}
	return Decision{Replicas: desired}
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
// experiments' setting). Scaling periods from its Table 4.1: Algorithm 1
// every 2 minutes (Table 4.6 also tries 1, 3, 4 and 5), Algorithm 2 every
// minute, Algorithm 3 every 5 minutes on one-minute measurements.
const (
	Alg4Target  = 0.5
	Alg4Measure = 60.0
	Alg4Window  = 5
	Alg1Period  = 120.0
)

// OneStep is seed 004's Algorithm 1 (one-step history): scale by the HPA
// equation when the direction repeats the previous decision, by one pod when it
// reverses it. Initial values n = 1, D = Up as in the seed. It decides every
// scaling period (Params.Alg1Period, default 2 minutes), on the utilisation
// over that period.
type OneStep struct {
	p      Params
	period float64
	target float64
	meter  usageMeter
	n      int
	up     bool
}

// NewOneStep returns Algorithm 1.
func NewOneStep(p Params, target float64) *OneStep {
	period := p.Alg1Period
	if period <= 0 {
		period = Alg1Period
	}
	return &OneStep{p: p, period: period, target: target, meter: newUsageMeter(), n: 1, up: true}
}

// Name is "alg1".
func (*OneStep) Name() string { return "alg1" }

// Period is the scaling period.
func (a *OneStep) Period() float64 { return a.period }

// Decide runs Algorithm 1.
func (a *OneStep) Decide(o *Observation) Decision {
	used, req, n := a.meter.measure(o, nil)
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
	used, req, n := w.meter.measure(o, nil)
	if n > 0 {
		w.cores = append(w.cores, used)
		w.pods = append(w.pods, float64(n))
		if len(w.cores) > Alg4Window {
			w.cores, w.pods = w.cores[1:], w.pods[1:]
		}
		w.tick++
	}
	// Without a measurement this minute (no Ready pod with a sample) there is
	// no request per pod to relate the window to: hold, as the seed's loop
	// does when the metrics server returns nothing.
	if n == 0 || len(w.cores) == 0 {
		return Decision{Replicas: len(o.Pods)}
	}
	if w.moving && (len(w.cores) < Alg4Window || w.tick%Alg4Window != 0) {
		return Decision{Replicas: len(o.Pods), MeasureOnly: true}
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
