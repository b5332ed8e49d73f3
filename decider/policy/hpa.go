package policy

import "math"

// HPA constants, from Kubernetes (pkg/controller/podautoscaler and the
// "Horizontal Pod Autoscaling" documentation, v1.30+ defaults).
const (
	// HPASync is --horizontal-pod-autoscaler-sync-period.
	HPASync = 15.0
	// HPATolerance is --horizontal-pod-autoscaler-tolerance.
	HPATolerance = 0.1
	// HPADownWindow is behavior.scaleDown.stabilizationWindowSeconds default.
	HPADownWindow = 300.0
	// HPAMetricWindow is the metrics-server usage window (its default
	// --metric-resolution of 15 s).
	HPAMetricWindow = 15.0
	// DefaultHPATarget is the CPU utilisation target used when none is given.
	DefaultHPATarget = 0.7
)

// HPA is Kubernetes' horizontal pod autoscaler on CPU utilisation
// (usage / request), with its defaults:
//   - desired = ceil(current × utilisation / target), no change while the
//     ratio is within the tolerance 0.1 (replica_calculator.go);
//   - pods not Ready, or Ready for less than one metric window (their sample
//     predates readiness; the doc's cpu-initialization handling), are left out
//     first; if the ratio then says scale up they count as 0 % usage, and the
//     change is dropped if that brings the ratio within tolerance or flips its
//     direction (the "unready pods" rule). Pods without metrics count as 100 %
//     when scaling down and 0 % when scaling up; in the simulator every Ready
//     pod has metrics, so this only applies to unready pods.
//   - scale-down stabilisation: the highest recommendation of the last 5 min;
//   - scale-up limit max(4 pods, 100 %) per 15 s; scale-down 100 % per 15 s.
type HPA struct {
	p      Params
	target float64
	last   map[int]float64 // pod → BusyCum at the previous metric sample
	lastT  float64
	recs   []rec
	// ups are the scale-up events within the rate-limit period.
	ups []rec
}

type rec struct {
	t float64
	n int
}

// NewHPA returns an HPA with the CPU utilisation target (e.g. 0.7).
func NewHPA(p Params, target float64) *HPA {
	return &HPA{p: p, target: target, last: map[int]float64{}, lastT: math.Inf(-1)}
}

// Name is "hpa".
func (*HPA) Name() string { return "hpa" }

// Period is the 15 s sync period.
func (*HPA) Period() float64 { return HPASync }

// Decide runs one HPA sync.
func (h *HPA) Decide(o *Observation) Decision {
	current := len(o.Pods)
	dt := o.Now - h.lastT
	usage := map[int]float64{}
	for _, p := range o.Pods {
		if prev, ok := h.last[p.ID]; ok && dt > 0 {
			usage[p.ID] = (p.BusyCum - prev) / dt
		}
	}
	clear(h.last)
	for _, p := range o.Pods {
		h.last[p.ID] = p.BusyCum
	}
	h.lastT = o.Now
	rec := h.recommend(o, usage, current)
	return Decision{Replicas: h.behave(o.Now, rec, current)}
}

func (h *HPA) recommend(o *Observation, usage map[int]float64, current int) int {
	var sumUse, sumReq float64
	counted, unready, missing := 0, 0, 0
	for _, p := range o.Pods {
		u, ok := usage[p.ID]
		switch {
		case !p.Ready || o.Now-p.ReadyAt < HPAMetricWindow:
			unready++
		case !ok:
			missing++
		default:
			sumUse += u
			sumReq += p.CPU
			counted++
		}
	}
	if counted == 0 {
		// No metrics at all: the HPA does not act (FailedGetResourceMetric).
		return current
	}
	ratio := sumUse / sumReq / h.target
	if unready == 0 && missing == 0 {
		if math.Abs(1-ratio) <= HPATolerance {
			return current
		}
		return int(math.Ceil(ratio * float64(counted)))
	}
	reqPer := sumReq / float64(counted)
	if missing > 0 {
		if ratio < 1 {
			sumUse += float64(missing) * reqPer // assumed at 100 % of request
		}
		sumReq += float64(missing) * reqPer
	}
	if ratio > 1 && unready > 0 {
		sumReq += float64(unready) * reqPer // assumed at 0 % usage
	}
	n := counted + missing
	if ratio > 1 {
		n += unready
	}
	newRatio := sumUse / sumReq / h.target
	if math.Abs(1-newRatio) <= HPATolerance || (ratio > 1) != (newRatio > 1) {
		return current
	}
	return int(math.Ceil(newRatio * float64(n)))
}

// behave applies the default behavior: down stabilisation, up rate limit, bounds.
func (h *HPA) behave(now float64, rec, current int) int {
	h.recs = append(h.recs, struct {
		t float64
		n int
	}{now, rec})
	keep := h.recs[:0]
	stable := rec
	for _, r := range h.recs {
		if now-r.t <= HPADownWindow {
			keep = append(keep, r)
			if r.n > stable && rec < current {
				stable = r.n
			}
		}
	}
	h.recs = keep
	if rec < current {
		stable = min(stable, current)
	}
	// Scale-up limit: max(4 pods, 100 %) per 15 s, relative to the replicas
	// at the start of the period (current minus scale-ups within it).
	added := 0
	ups := h.ups[:0]
	for _, u := range h.ups {
		if now-u.t < HPASync {
			ups = append(ups, u)
			added += u.n
		}
	}
	h.ups = ups
	start := current - added
	upLimit := max(start+4, 2*start)
	desired := clamp(min(stable, upLimit), h.p)
	if desired > current {
		h.ups = append(h.ups, struct {
			t float64
			n int
		}{now, desired - current})
	}
	return desired
}
