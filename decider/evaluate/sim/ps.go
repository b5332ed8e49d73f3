package sim

import "math"

// Processor sharing by CPU allocation (Config.Sharing). Each pod keeps a
// virtual clock v, the service a request in it has received at full speed
// since the pod's start; it advances at the pod's current per-request rate.
// A request entering at v with service time S finishes when v reaches v + S
// (its finish tag), so the next completion is the smallest tag, due after
// (tag − v) / rate. Every change of the pod's rate re-schedules that one
// event; older events carry an older schedule version and are dropped.
//
// The rate is recomputed at the pod's own events (arrivals, completions,
// resizes); a change of its node's load from other pods takes effect at the
// pod's next event.

type psJob struct {
	tag, arr, svc, start float64
}

type psState struct {
	jobs    []psJob
	v, t    float64
	rate    float64
	version uint32
}

// psUnit is the cores one request uses at full speed.
func (s *sim) psUnit() float64 { return psUnitOf(s.cfg) }

func psUnitOf(cfg Config) float64 {
	if cfg.BusyCPU > 0 {
		return cfg.BusyCPU
	}
	return math.Min(1, cfg.CPU)
}

// psRate is the speed of each request of pod id now, as a share of full speed.
func (s *sim) psRate(id int) float64 {
	p := &s.pods[id]
	n := float64(len(p.ps.jobs))
	if n == 0 {
		return 0
	}
	r := math.Min(1, p.cpu/(n*s.psUnit()))
	if p.node >= 0 && len(s.nodes) > 0 {
		if demand := s.background(p.node) + s.nodes[p.node].busy; demand > s.cfg.NodeCPU {
			r *= s.cfg.NodeCPU / demand
		}
	}
	return r
}

// psAdvance brings pod id's virtual clock to now.
func (s *sim) psAdvance(id int) {
	ps := &s.pods[id].ps
	ps.v += ps.rate * (s.now - ps.t)
	ps.t = s.now
}

// psAdd starts req on pod id (its service place is already counted).
func (s *sim) psAdd(id int, req request) {
	s.psAdvance(id)
	ps := &s.pods[id].ps
	ps.jobs = append(ps.jobs, psJob{tag: ps.v + req.svc, arr: req.arr, svc: req.svc, start: s.now})
	s.psReschedule(id)
}

// psReschedule sets pod id's rate for its current requests and schedules its
// next completion, superseding any earlier one.
func (s *sim) psReschedule(id int) {
	p := &s.pods[id]
	p.ps.version++
	p.ps.rate = s.psRate(id)
	if len(p.ps.jobs) == 0 || p.ps.rate <= 0 {
		return
	}
	first := p.ps.jobs[0].tag
	for _, j := range p.ps.jobs[1:] {
		first = math.Min(first, j.tag)
	}
	dt := math.Max(0, first-p.ps.v) / p.ps.rate
	s.heap.push(event{t: s.now + dt, pod: int32(id), gen: p.ps.version, k: evPS})
}

// psEvent completes pod id's request with the smallest finish tag, unless the
// event was superseded.
func (s *sim) psEvent(id int, version uint32) {
	p := &s.pods[id]
	if version != p.ps.version || len(p.ps.jobs) == 0 {
		return
	}
	s.psAdvance(id)
	k := 0
	for i, j := range p.ps.jobs {
		if j.tag < p.ps.jobs[k].tag {
			k = i
		}
	}
	j := p.ps.jobs[k]
	last := len(p.ps.jobs) - 1
	p.ps.jobs[k] = p.ps.jobs[last]
	p.ps.jobs = p.ps.jobs[:last]
	// The proxy measures a request's time in service, sharing included.
	s.finish(id, j.arr, s.now-j.start)
	if req, ok := s.next(id); ok {
		s.psAdd(id, req)
		return
	}
	s.idle(id)
	s.psReschedule(id)
}
