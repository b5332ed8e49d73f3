// Package sim is a discrete-event simulation of requests served by an
// autoscaled set of pods, used to compare autoscaling policies on traces.
//
// Arrivals are a non-homogeneous Poisson process whose rate is constant within
// each simulated second (the trace profile). A request is routed to a Ready pod
// chosen uniformly at random, as kube-proxy's iptables mode does for a Service;
// with no Ready pod it waits in a front queue (as Knative's activator holds
// requests) until one is Ready. Each pod serves at most k requests at once and
// queues the rest FIFO. Pods take an init time (a distribution, drawn per
// pod start from the seed's own stream: InitTimes) to become Ready; removed
// Ready pods stop receiving requests and finish the ones they hold. Each busy slot uses CPU/k cores, so a pod's CPU utilisation is its
// busy-slot share. The simulation is deterministic for a seed.
package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// Config describes one simulated workload.
type Config struct {
	// Rates are the arrival rates per simulated second.
	Rates       []float64
	Service     Dist
	Init        Dist
	Concurrency int
	// CPU is the pod CPU request in cores.
	CPU float64
	// BusyCPU is the cores one busy slot uses; zero means CPU/Concurrency (a
	// fully busy pod uses exactly its request). Setting it apart from CPU is
	// what makes the HPA's utilisation (usage / request) depend on the request.
	BusyCPU float64
	// CPUBound is the share f of the service time that scales with CPU: a pod
	// resized from CPU to r serves in E[S]·(f·CPU/r + 1 − f). Zero means
	// service times do not depend on the CPU request.
	CPUBound float64
	// Target latency in seconds, and the percentile (0,100) it applies to.
	Target, Percentile float64
	// Nodes, when positive, places pods on that many nodes of NodeCPU cores,
	// each also running Background cores of other work. A pod goes on the node
	// with the least CPU requested that still has room for its request (the
	// scheduler's LeastAllocated); with no room it stays Pending and starts
	// when room appears. A request starting on a node whose demand (background
	// plus busy slots) exceeds its cores has its service time stretched by
	// demand/cores: CPU contention, so absolute node load matters. Zero Nodes
	// means unlimited capacity.
	Nodes               int
	NodeCPU, Background float64
	// Backgrounds, when set, gives each node its own background demand
	// (one per node; nodes past its end use Background). Demand above NodeCPU oversubscribes
	// the node: a hot node, where migration matters.
	Backgrounds []float64
	// Sharing turns each pod into a processor-sharing server: the up to
	// Concurrency requests in service progress at once, sharing the pod's CPU
	// request equally. A request alone runs at full speed (its sampled service
	// time) on PSUnit cores; n requests each run at min(1, CPU/(n·PSUnit)) of
	// full speed, and on a node whose demand exceeds its cores at that times
	// cores/demand. PSUnit is BusyCPU, or min(1, CPU) when BusyCPU is zero.
	// CPUBound does not apply: the CPU allocation sets the speed directly.
	Sharing bool
	// Routing is the data plane in front of the pods (RouteRandom, the zero
	// value, as a Service; RouteLeastRequest; RoutePooled). A policy that
	// puts Knative's activator in the path (ActivatorRouter) is routed
	// pooled while it does, and by Routing otherwise.
	Routing Routing
	// Handoff is the extra hop's cost and the advertisement period of the
	// peer-handoff and front data planes (RoutePeer, RouteFront).
	Handoff Handoff
	// OracleWindows and OracleSteps, when set, replace the yardsticks'
	// search grid (OracleWindows, OracleSteps): a coarser grid for a large
	// matrix.
	OracleWindows []int
	OracleSteps   int
	// InitialReplicas are Ready at time 0; default 1.
	InitialReplicas int
	Seed            uint64
	// Progress, when set, is called with the simulated second now and then.
	Progress func(second, total int)
	// Context, when set, stops the simulation when it ends (a signal to the
	// command): Run then returns at the next simulated second with a partial
	// Result, and Compare returns an error wrapping context.Cause.
	Context context.Context
}

// stopped returns a non-nil channel closed when cfg's context ends, or nil
// (a channel that is never ready) without one.
func (cfg Config) stopped() <-chan struct{} {
	if cfg.Context == nil {
		return nil
	}
	return cfg.Context.Done()
}

const (
	evCompletion = iota
	evReady
	evPS // the next completion of a processor-sharing pod
	// Peer handoff and the front (peer.go).
	evAdvert  // a pod's advertisement tick
	evHandoff // a handed-off request reaches its peer (gen: the sender)
	evRefused // a refused request is back at its sender
	evFront   // a request reaches the front
	evCheck   // the front's check of spare capacity
)

type event struct {
	t   float64
	arr float64 // arrival time of the request (completion) or unused
	svc float64 // service time of the request (completion)
	pod int32
	gen uint32 // evPS: the pod's schedule version it was computed for
	k   uint8
	// hops and paid are the request's (evHandoff, evRefused, evFront).
	hops, paid uint8
}

type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].t <= a[i].t {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *eventHeap) pop() event {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r].t < a[l].t {
			m = r
		}
		if a[i].t <= a[m].t {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// request is one request waiting: its arrival time and its service time (at
// full speed), drawn when it arrived.
type request struct {
	arr, svc float64
	// hops counts the handoffs a peer accepted (at most 1), paid the extra
	// hops it has paid (RoutePeer, RouteFront).
	hops, paid uint8
}

// fifo is a ring buffer of waiting requests.
type fifo struct {
	buf        []request
	head, size int
}

func (q *fifo) push(v request) {
	if q.size == len(q.buf) {
		nb := make([]request, max(8, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = v
	q.size++
}

func (q *fifo) pop() request {
	v := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return v
}

type pod struct {
	created, readyAt float64
	ready, draining  bool
	gone             bool
	inService        int
	queue            fifo
	busyCum, lastUpd float64
	readyIdx         int // index in sim.ready, −1 if not there
	cpu              float64
	node             int // −1 while Pending (or with no node model)
	pending          bool
	svcN             int     // requests finished
	svcSum           float64 // their service times, seconds
	ps               psState
	// surgeFor is the pod this one replaces in a migration (−1: none);
	// surge is this pod's replacement while it starts (−1: none).
	surgeFor, surge int
	// move is the migration a replacement carries out, and moveRec its index in
	// Result.Moves.
	move    policy.Move
	moveRec int
	started float64 // when the pod got a node and its containers started
}

type sim struct {
	cfg Config
	// Separate streams for arrivals, service times, routing and init times
	// (common random numbers): every policy run on a seed sees the same
	// arrivals with the same service times, whatever its pods do, and the
	// j-th pod start takes the same init time.
	rngArr, rngSvc, rngRoute *rand.Rand
	initSeq                  *InitTimes
	starts                   int // pods started so far (the next start's index)
	now                      float64
	heap                     eventHeap
	pods                     []pod
	active                   []int // not draining, not gone (includes starting pods)
	ready                    []int // Ready and not draining
	front                    fifo
	existing                 int // pods not gone (starting, ready, draining)
	lastPodT                 float64
	inflight                 int
	lastInT                  float64
	curCPU                   float64 // CPU request of new pods (changed by vertical resizes)
	reqCores                 float64 // CPU requested by existing pods
	res                      *Result
	sec                      policy.Second
	inits                    []float64
	cpuTotal                 float64
	cpuMark                  float64
	reqMark                  float64 // CPURequested at the end of the last second
	nodes                    []node
	surges                   int // replacement pods still starting
	// activator: requests wait in the front queue and go only to a Ready pod
	// with a free service place (Knative's activator in the request path).
	activator bool
	// moves is told when a migration ends, as the controller tells the engine.
	moves MigrationObserver
	// lat is the recent response times policies may measure.
	lat latWindow
	// peers are the pods' sides of peer handoff (RoutePeer); frontOn tells
	// whether spare capacity put the front in the path at the last check
	// (RouteFront), policyActivator whether the policy wants its activator
	// there.
	peers                    []peerState
	frontOn, policyActivator bool
}

// MigrationObserver is implemented by a policy that wants to know when a
// migration it asked for ends, as the controller tells QAS's engine for its
// pacing: m is the Move carried out, moved is true when the replacement is Ready
// and the moved pod gone, false when a scale-down removed the pod being moved
// (and its replacement) first.
type MigrationObserver interface {
	MigrationEnded(m policy.Move, fromNode int, now float64, moved bool)
}

// ActivatorRouter is implemented by a policy whose autoscaler may put a
// proxy in the request path that holds requests until a pod has a free place
// (Knative's activator). The simulator asks at the start and after every
// decision, and routes that way while the answer is true, at random
// otherwise.
type ActivatorRouter interface {
	ActivatorRouting() bool
}

type node struct {
	requested float64 // sum of pod requests, cores
	busy      float64 // cores used by busy slots of pods on the node
	usedCum   float64 // core-seconds used, background included, capped at capacity
	lastUpd   float64
}

func (s *sim) nodeTouch(n int) {
	nd := &s.nodes[n]
	nd.usedCum += math.Min(s.cfg.NodeCPU, s.background(n)+nd.busy) * (s.now - nd.lastUpd)
	nd.lastUpd = s.now
}

// place puts pod id on the least-requested node with room; false if none.
func (s *sim) place(id int) bool {
	if len(s.nodes) == 0 {
		return true
	}
	best := -1
	for i := range s.nodes {
		if s.nodes[i].requested+s.pods[id].cpu <= s.cfg.NodeCPU+1e-9 && (best < 0 || s.nodes[i].requested < s.nodes[best].requested) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	s.nodes[best].requested += s.pods[id].cpu
	s.pods[id].node = best
	return true
}

// startPod places a new pod and schedules its readiness, or leaves it Pending.
func (s *sim) startPod(id int, ready bool) {
	p := &s.pods[id]
	if !s.place(id) {
		p.pending = true
		return
	}
	p.pending = false
	p.started = s.now
	if ready {
		s.makeReady(id)
		return
	}
	s.heap.push(event{t: s.now + s.nextInit(), pod: int32(id), k: evReady})
}

// nextInit is the init time of the pod starting now.
func (s *sim) nextInit() float64 {
	d := s.initSeq.At(s.starts)
	s.starts++
	return d
}

func (s *sim) release(id int) {
	p := &s.pods[id]
	if p.node >= 0 && len(s.nodes) > 0 {
		s.nodes[p.node].requested -= p.cpu
		p.node = -1
	}
}

// Run simulates cfg under policy p.
func Run(cfg Config, p policy.Policy) *Result {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.InitialReplicas < 1 {
		cfg.InitialReplicas = 1
	}
	s := &sim{cfg: cfg, rngArr: newRand(cfg.Seed, 1), rngSvc: newRand(cfg.Seed, 2), rngRoute: newRand(cfg.Seed, 3),
		initSeq: NewInitTimes(cfg.Init, cfg.Seed), curCPU: cfg.CPU}
	s.res = newResult(p.Name(), cfg)
	s.activator = cfg.Routing == RoutePooled || cfg.Routing == RouteOverflow
	router, _ := p.(ActivatorRouter)
	if router != nil {
		s.policyActivator = router.ActivatorRouting()
		s.activator = s.activator || s.policyActivator
	}
	s.moves, _ = p.(MigrationObserver)
	if cfg.Nodes > 0 {
		s.nodes = make([]node, cfg.Nodes)
	}
	for i := 0; i < cfg.InitialReplicas; i++ {
		s.startPod(s.addPod(), true)
	}
	s.inits = StartingInitTimes(cfg)
	if cfg.Routing == RouteFront && !cfg.Handoff.Fresh {
		s.heap.push(event{t: cfg.Handoff.period(), k: evCheck})
	}
	total := len(cfg.Rates)
	nextArr := s.nextArrival(0)
	// The first decision comes one period in: no autoscaler acts on an empty window.
	nextDecision := p.Period()
	obs := &policy.Observation{Concurrency: cfg.Concurrency, Latency: &s.lat}
	lastDesired := cfg.InitialReplicas
	stop := cfg.stopped()
seconds:
	for second := 0; second < total; second++ {
		select {
		case <-stop:
			break seconds // the rest of the Result stays zero: its caller discards it
		default:
		}
		end := float64(second + 1)
		for {
			t := end
			ev := false
			if len(s.heap) > 0 && s.heap[0].t < t {
				t, ev = s.heap[0].t, true
			}
			if nextArr < t {
				s.now = nextArr
				s.arrive()
				nextArr = s.nextArrival(nextArr)
				continue
			}
			if !ev {
				break
			}
			e := s.heap.pop()
			s.now = e.t
			switch e.k {
			case evCompletion:
				s.complete(int(e.pod), e.arr, e.svc)
			case evPS:
				s.psEvent(int(e.pod), e.gen)
			case evAdvert:
				s.advertTick(int(e.pod))
			case evHandoff:
				s.handOffArrive(int(e.pod), int(e.gen), request{arr: e.arr, svc: e.svc, hops: e.hops, paid: e.paid})
			case evRefused:
				s.refusedBack(int(e.pod), request{arr: e.arr, svc: e.svc, hops: e.hops, paid: e.paid})
			case evFront:
				s.frontArrive(request{arr: e.arr, svc: e.svc, paid: e.paid})
			case evCheck:
				s.frontCheck()
				s.heap.push(event{t: s.now + cfg.Handoff.period(), k: evCheck})
			default:
				s.makeReady(int(e.pod))
			}
		}
		s.now = end
		s.closeSecond(second)
		if end >= nextDecision {
			nextDecision = end + p.Period()
			s.observe(obs)
			// status.replicas: the pods created and not terminating (a
			// migration's replacement is outside the count until it takes over).
			running, ready := len(s.active)-s.surges, len(s.ready)
			d := p.Decide(obs)
			if !d.MeasureOnly {
				s.res.Decisions = append(s.res.Decisions, DecisionSample{At: end, Running: running, Ready: ready, Requested: d.Replicas})
			}
			s.res.Forecast[second] = d.Forecast
			if d.Replicas != lastDesired {
				s.res.Actions++
				lastDesired = d.Replicas
			}
			if d.CPU > 0 && d.CPU != s.curCPU {
				s.resize(d.CPU)
			}
			s.scale(d.Replicas)
			if d.Migrate != nil {
				s.migrate(*d.Migrate, obs)
			}
			if router != nil {
				s.setActivator(s.wantActivator(router))
			}
		} else if second > 0 {
			s.res.Forecast[second] = s.res.Forecast[second-1]
		}
		if cfg.Routing == RouteFront {
			if s.activator {
				s.res.Handoff.FrontInPath++
			}
		}
		s.res.Desired[second] = lastDesired
		s.res.Ready[second] = len(s.ready)
		if cfg.Progress != nil && second%60 == 0 {
			cfg.Progress(second, total)
		}
	}
	if cfg.Progress != nil && (cfg.Context == nil || cfg.Context.Err() == nil) {
		cfg.Progress(total, total)
	}
	s.podTick()
	s.res.finish()
	return s.res
}

// nextArrival draws the next arrival after t from the piecewise-constant rate,
// using memorylessness to restart at each second's boundary.
func (s *sim) nextArrival(t float64) float64 {
	for {
		sec := int(t)
		if sec >= len(s.cfg.Rates) {
			return math.Inf(1)
		}
		r := s.cfg.Rates[sec]
		if r > 0 {
			x := t + s.rngArr.ExpFloat64()/r
			if x < float64(sec+1) {
				return x
			}
		}
		t = float64(sec + 1)
	}
}

func (s *sim) inTick() {
	s.sec.InFlight += float64(s.inflight) * (s.now - s.lastInT)
	s.lastInT = s.now
}

func (s *sim) podTick() {
	s.res.PodSeconds += float64(s.existing) * (s.now - s.lastPodT)
	s.res.CPURequested += s.reqCores * (s.now - s.lastPodT)
	s.lastPodT = s.now
}

// busyDelta changes pod id's busy slots by d, keeping the integrals.
func (s *sim) busyDelta(id, d int) {
	s.touch(id)
	if s.cfg.Sharing {
		s.psAdvance(id)
	}
	p := &s.pods[id]
	before := s.podCores(id)
	p.inService += d
	if p.node >= 0 && len(s.nodes) > 0 {
		s.nodeTouch(p.node)
		s.nodes[p.node].busy += s.podCores(id) - before
	}
}

// podCores is the CPU pod id uses now: its busy slots' cores, or with
// processor sharing the smaller of its request and what its requests want.
func (s *sim) podCores(id int) float64 {
	p := &s.pods[id]
	if s.cfg.Sharing {
		return math.Min(p.cpu, float64(p.inService)*s.psUnit())
	}
	return float64(p.inService) * s.slot(id)
}

func (s *sim) touch(id int) {
	p := &s.pods[id]
	d := s.podCores(id) * (s.now - p.lastUpd)
	p.busyCum += d
	s.cpuTotal += d
	p.lastUpd = s.now
}

func (s *sim) arrive() {
	s.sec.Arrivals++
	s.inTick()
	s.inflight++
	req := request{arr: s.now, svc: s.cfg.Service.Sample(s.rngSvc)}
	if s.cfg.Routing == RouteFront && len(s.ready) > 0 {
		if s.cfg.Handoff.Fresh {
			s.frontCheck()
		}
		if s.activator {
			s.frontEnter(req)
			return
		}
	}
	if s.cfg.Routing == RouteOverflow && len(s.ready) > 0 {
		s.overflowArrive(req)
		return
	}
	if len(s.ready) == 0 || s.front.size > 0 {
		// Requests already waiting in front go first (FIFO).
		s.front.push(req)
		return
	}
	if s.activator {
		if id, ok := s.freePod(); ok {
			s.route(id, req)
		} else {
			s.front.push(req)
		}
		return
	}
	if s.cfg.Routing == RoutePeer {
		s.peerArrive(req)
		return
	}
	s.route(s.pick(), req)
}

// pick chooses a Ready pod for a request outside the activator: uniformly at
// random (a Service through kube-proxy), or with least-request balancing the
// one of two random Ready pods holding fewer requests (Envoy's LEAST_REQUEST
// with its default choice_count of 2, power of two choices).
func (s *sim) pick() int {
	n := len(s.ready)
	a := s.ready[s.rngRoute.IntN(n)]
	if s.cfg.Routing != RouteLeastRequest || n == 1 {
		return a
	}
	b := s.ready[s.rngRoute.IntN(n)]
	pa, pb := &s.pods[a], &s.pods[b]
	if pb.inService+pb.queue.size < pa.inService+pa.queue.size {
		return b
	}
	return a
}

// setActivator puts the activator in or out of the request path; taken out,
// it hands the requests it holds to Ready pods at random.
func (s *sim) setActivator(on bool) {
	s.activator = on
	for !on && s.front.size > 0 && len(s.ready) > 0 {
		s.route(s.pick(), s.front.pop())
	}
}

// freePod is a Ready pod with a free service place, scanning from a random
// one; false when every Ready pod is full.
func (s *sim) freePod() (int, bool) {
	n := len(s.ready)
	start := s.rngRoute.IntN(n)
	for i := 0; i < n; i++ {
		id := s.ready[(start+i)%n]
		if s.pods[id].inService < s.cfg.Concurrency {
			return id, true
		}
	}
	return 0, false
}

// next is the request pod id serves next when a place frees: the head of its
// own queue, or with the activator the head of the front queue (if the pod
// is still in the Service).
func (s *sim) next(id int) (request, bool) {
	p := &s.pods[id]
	if p.queue.size > 0 {
		return p.queue.pop(), true
	}
	if s.activator && s.front.size > 0 && p.ready && !p.draining {
		return s.pull(s.front.pop(), true), true
	}
	return request{}, false
}

func (s *sim) route(id int, req request) {
	p := &s.pods[id]
	if p.inService < s.cfg.Concurrency {
		s.busyDelta(id, 1)
		s.start(id, req)
		return
	}
	p.queue.push(req)
}

func (s *sim) start(id int, req request) {
	s.res.Handoff.Hops[min(int(req.paid), len(s.res.Handoff.Hops)-1)]++
	if req.hops > 1 {
		s.res.Handoff.HandedTwice++
	}
	if s.cfg.Sharing {
		s.psAdd(id, req)
		return
	}
	arr, svc := req.arr, req.svc
	if n := s.pods[id].node; n >= 0 && len(s.nodes) > 0 {
		if demand := s.background(n) + s.nodes[n].busy; demand > s.cfg.NodeCPU {
			svc *= demand / s.cfg.NodeCPU
		}
	}
	if f := s.cfg.CPUBound; f > 0 {
		svc *= f*s.cfg.CPU/s.pods[id].cpu + 1 - f
	}
	s.heap.push(event{t: s.now + svc, arr: arr, svc: svc, pod: int32(id), k: evCompletion})
}

func (s *sim) complete(id int, arr, svc float64) {
	s.finish(id, arr, svc)
	if req, ok := s.next(id); ok {
		s.start(id, req)
		return
	}
	s.idle(id)
}

// finish records a request that pod id completed after svc seconds in service.
func (s *sim) finish(id int, arr, svc float64) {
	s.inTick()
	s.inflight--
	s.sec.Completions++
	s.sec.ServiceSum += svc
	s.sec.ServiceSq += svc * svc
	s.sec.LatencySum += s.now - arr
	s.lat.add(s.res.record(s.now-arr, s.now))
	s.sec.Latency[policy.LatencyBucket(s.now-arr)]++
	s.sec.Service[policy.LatencyBucket(svc)]++
	p := &s.pods[id]
	p.svcN++
	p.svcSum += svc
	if p.node >= 0 && len(s.nodes) > 0 {
		s.res.NodeServed[p.node]++
	}
}

// idle frees one of pod id's service places; a draining pod with none left goes.
func (s *sim) idle(id int) {
	p := &s.pods[id]
	s.busyDelta(id, -1)
	if p.draining && p.inService == 0 {
		s.podTick()
		p.gone = true
		s.existing--
		s.reqCores -= p.cpu
		s.release(id)
	}
}

func (s *sim) addPod() int {
	s.podTick()
	id := len(s.pods)
	s.pods = append(s.pods, pod{created: s.now, readyIdx: -1, lastUpd: s.now, node: -1, cpu: s.curCPU, surgeFor: -1, surge: -1})
	s.reqCores += s.curCPU
	s.active = append(s.active, id)
	s.existing++
	return id
}

func (s *sim) makeReady(id int) {
	p := &s.pods[id]
	if p.gone || p.draining {
		return
	}
	p.ready, p.readyAt = true, s.now
	p.readyIdx = len(s.ready)
	s.ready = append(s.ready, id)
	if id >= s.cfg.InitialReplicas {
		s.inits = append(s.inits, s.now-p.created)
	}
	if old := p.surgeFor; old >= 0 {
		// The replacement is Ready: the migrated pod goes (and drains).
		p.surgeFor = -1
		s.pods[old].surge = -1
		s.surges--
		s.res.Migrations++
		from := s.pods[old].node // read first: removing a pod that holds no request releases its node
		for i, a := range s.active {
			if a == old {
				s.remove(i)
				break
			}
		}
		s.moveEnded(id, from, true)
	}
	if s.cfg.Routing == RoutePeer {
		s.peerReady(id)
	}
	s.drainFront(id)
}

// drainFront hands the requests waiting in front, oldest first, to the Ready
// pods once pod id is Ready. Behind the activator they go only to free
// places, the new pod's (every other Ready pod is full, or the requests would
// not be waiting); the rest wait for the next free place. Without it they go
// at random, all of them, as a Service does once it has endpoints: the pods
// queue them, ahead of any later arrival.
func (s *sim) drainFront(id int) {
	if s.activator {
		for s.front.size > 0 && s.pods[id].inService < s.cfg.Concurrency {
			s.route(id, s.front.pop())
		}
		return
	}
	for s.front.size > 0 {
		s.route(s.pick(), s.front.pop())
	}
}

func (s *sim) unready(id int) {
	p := &s.pods[id]
	if p.readyIdx < 0 {
		return
	}
	last := s.ready[len(s.ready)-1]
	s.ready[p.readyIdx] = last
	s.pods[last].readyIdx = p.readyIdx
	s.ready = s.ready[:len(s.ready)-1]
	p.readyIdx = -1
}

// scale applies a desired replica count: new pods start with an init time;
// removals take starting pods first (newest first), then the Ready pods
// holding the fewest requests, which drain. Migration replacements still
// starting do not count and are never chosen; removing a pod that is being
// migrated removes its replacement too.
func (s *sim) scale(desired int) {
	desired = max(desired, 0)
	for len(s.active)-s.surges < desired {
		s.startPod(s.addPod(), false)
	}
	for len(s.active)-s.surges > desired {
		victim := -1
		for i := len(s.active) - 1; i >= 0; i-- {
			if p := &s.pods[s.active[i]]; !p.ready && p.surgeFor < 0 {
				victim = i
				break
			}
		}
		if victim < 0 {
			best := math.MaxInt
			for i, id := range s.active {
				if p := &s.pods[id]; p.surgeFor < 0 {
					if n := p.inService + p.queue.size; n < best {
						best, victim = n, i
					}
				}
			}
		}
		id := s.active[victim]
		from := s.pods[id].node
		s.remove(victim)
		if r := s.pods[id].surge; r >= 0 {
			s.pods[id].surge = -1
			s.pods[r].surgeFor = -1
			s.surges--
			for i, a := range s.active {
				if a == r {
					s.remove(i)
					break
				}
			}
			s.moveEnded(r, from, false)
		}
	}
}

// remove takes s.active[i] out of service: it stops receiving requests and
// goes once it holds none.
func (s *sim) remove(i int) {
	id := s.active[i]
	s.active = append(s.active[:i], s.active[i+1:]...)
	p := &s.pods[id]
	s.unready(id)
	s.podTick()
	if p.inService == 0 {
		p.gone = true
		s.existing--
		s.reqCores -= p.cpu
		s.release(id)
	} else {
		p.draining = true
	}
}

// moveEnded records the end of the move replacement r carried out off node
// from, and tells the policy.
func (s *sim) moveEnded(r, from int, moved bool) {
	rec := &s.res.Moves[s.pods[r].moveRec]
	rec.End, rec.Moved = s.now, moved
	if s.moves != nil {
		s.moves.MigrationEnded(s.pods[r].move, from, s.now, moved)
	}
}

// migrate carries out a move as the controller does, surge first: a
// replacement pod is created on the target node and, once Ready (after an init
// time), the moved pod is removed. As in the controller, one move is under way
// at a time; a move while another is, of a pod that is gone, or to a node
// without room for its request is not carried out. o is what the policy saw
// when it asked for the move.
func (s *sim) migrate(m policy.Move, o *policy.Observation) {
	if len(s.nodes) == 0 || m.ToNode < 0 || m.ToNode >= len(s.nodes) || m.Pod < 0 || m.Pod >= len(s.pods) || s.surges > 0 {
		return
	}
	old := &s.pods[m.Pod]
	if old.gone || old.draining || old.surge >= 0 || old.surgeFor >= 0 || old.node == m.ToNode {
		return
	}
	if s.nodes[m.ToNode].requested+s.curCPU > s.cfg.NodeCPU+1e-9 {
		return
	}
	id := s.addPod()
	p := &s.pods[id]
	p.node = m.ToNode
	s.nodes[m.ToNode].requested += p.cpu
	p.started = s.now
	p.surgeFor = m.Pod
	s.pods[m.Pod].surge = id
	s.surges++
	rec := MoveRecord{Start: s.now, From: s.pods[m.Pod].node, To: m.ToNode, PodsOnNodes: make([]int, len(s.nodes))}
	for _, op := range o.Pods {
		if op.Node >= 0 && op.Node < len(s.nodes) {
			rec.PodsOnNodes[op.Node]++
		}
	}
	p.move, p.moveRec = m, len(s.res.Moves)
	s.res.Moves = append(s.res.Moves, rec)
	s.heap.push(event{t: s.now + s.nextInit(), pod: int32(id), k: evReady})
}

func (s *sim) background(n int) float64 {
	if n < len(s.cfg.Backgrounds) {
		return s.cfg.Backgrounds[n]
	}
	return s.cfg.Background
}

func (s *sim) closeSecond(second int) {
	s.inTick()
	s.podTick()
	s.res.Arrivals[second] = s.sec.Arrivals
	for i := range s.pods {
		if !s.pods[i].gone {
			s.touch(i)
		}
	}
	for _, id := range s.active {
		if s.pods[id].pending {
			s.startPod(id, false)
		}
	}
	for n := range s.nodes {
		s.nodeTouch(n)
	}
	s.res.CPUUsed[second] = s.cpuTotal - s.cpuMark
	s.cpuMark = s.cpuTotal
	s.res.CPURequestedPerSecond[second] = s.res.CPURequested - s.reqMark
	s.reqMark = s.res.CPURequested
	s.res.Existing[second] = s.existing
	s.res.seconds = append(s.res.seconds, s.sec)
	s.sec = policy.Second{}
	s.lat.next()
}

func (s *sim) observe(o *policy.Observation) {
	o.Now = s.now
	o.Seconds = s.res.seconds
	o.Pods = o.Pods[:0]
	for _, id := range s.active {
		p := &s.pods[id]
		if p.surgeFor >= 0 {
			// A migration's replacement is the controller's, outside the
			// replica count, until it takes over from the moved pod.
			continue
		}
		o.Pods = append(o.Pods, policy.Pod{ID: id, Ready: p.ready, Created: p.created, ReadyAt: p.readyAt,
			Pending: p.pending, Started: p.started,
			Completions: p.svcN, ServiceSum: p.svcSum, BusyCum: p.busyCum, CPU: p.cpu, Node: p.node,
			InService: p.inService, Queued: p.queue.size})
	}
	o.Nodes = o.Nodes[:0]
	for _, n := range s.nodes {
		o.Nodes = append(o.Nodes, policy.Node{CPU: s.cfg.NodeCPU, Requested: n.requested, UsedCum: n.usedCum})
	}
	o.InitTimes = s.inits
	o.PodStarts = s.starts
	o.FrontQueued = s.front.size
}

// StartingInitTimes are the creation→Ready times of the initial replicas,
// which were started before the run: known from t = 0, as a real autoscaler
// reads them from the pods' conditions (seed 000 averages over every pod
// ever Ready). They come from their own stream, so they do not shift the
// init times of the pods started during the run (InitTimes).
func StartingInitTimes(cfg Config) []float64 {
	n := max(cfg.InitialReplicas, 1)
	r := newRand(cfg.Seed, 5)
	out := make([]float64, n)
	for i := range out {
		out[i] = cfg.Init.Sample(r)
	}
	return out
}

// Routing is the data plane that spreads requests over the Ready pods.
type Routing int

const (
	// RouteRandom sends each request to a Ready pod chosen uniformly at
	// random, as a Kubernetes Service does through kube-proxy.
	RouteRandom Routing = iota
	// RouteLeastRequest sends each request to the one of two random Ready
	// pods that holds fewer requests (Envoy's least-request balancer; IPVS's
	// least-connection is the same idea over all pods).
	RouteLeastRequest
	// RoutePooled holds requests in one queue in front of the pods and gives
	// each to a Ready pod with a free place, as Knative's activator does.
	RoutePooled
	// RoutePeer is peer handoff between sidecars: random routing, and a
	// proxy whose slots are full hands a request to a peer advertising a
	// free slot (peer.go).
	RoutePeer
	// RouteFront is a capacity-aware front, in the path only while spare
	// capacity is short (peer.go).
	RouteFront
	// RouteOverflow is random routing where a proxy whose slots are full
	// sends the request to a shared front queue, from which pods with a
	// free slot pull (peer.go).
	RouteOverflow
)

// Routings are the data planes, in the order results list them.
var Routings = []Routing{RouteRandom, RouteLeastRequest, RoutePooled, RoutePeer, RouteFront, RouteOverflow}

// String is the routing's name: random, leastRequest or pooled.
func (r Routing) String() string {
	switch r {
	case RouteLeastRequest:
		return "leastRequest"
	case RoutePooled:
		return "pooled"
	case RoutePeer:
		return "peer"
	case RouteFront:
		return "front"
	case RouteOverflow:
		return "overflow"
	}
	return "random"
}

// Spec is the spec.routing a user would give QAS for this data plane:
// random for a Service; leastRequest for least-request balancing; pooled for
// the planes that hold requests in one queue until a pod has a free slot
// (pooled, and the front and overflow planes, whose fronts do so whenever a
// pod is full). Peer handoff is random: the Service spreads the requests, and
// a proxy hands one off only to a peer whose advertisement, up to a period
// old, says it has room (a third are refused at 1 s, docs/pooling.md), so its
// queues are neither pooled nor balanced; the per-pod model is the bound on
// the safe side, and the closed loop lowers the wait's variability by what
// the handoffs save. (Peer handoff is not a data plane QAS builds; the CRD
// has no value for it.)
func (r Routing) Spec() decide.Routing {
	switch r {
	case RouteLeastRequest:
		return decide.RoutingLeastRequest
	case RoutePooled, RouteFront, RouteOverflow:
		return decide.RoutingPooled
	}
	return decide.RoutingRandom
}

// HandsOff tells whether requests take extra hops on this data plane, at
// Config.Handoff's cost: peer handoff, the front and overflow to a front.
func (r Routing) HandsOff() bool {
	return r == RoutePeer || r == RouteFront || r == RouteOverflow
}

// ParseRouting reads random, leastRequest, pooled, peer, front or overflow.
func ParseRouting(s string) (Routing, error) {
	for _, r := range Routings {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("routing %q: want random, leastRequest, pooled, peer, front or overflow", s)
}

func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15*stream))
}

// slot is the cores one busy slot of pod id uses.
func (s *sim) slot(id int) float64 {
	if s.cfg.BusyCPU > 0 {
		return s.cfg.BusyCPU
	}
	return s.pods[id].cpu / float64(s.cfg.Concurrency)
}

// resize changes the CPU request of every active pod in place (and of new
// pods). A pod whose node lacks room for the new request keeps its old one,
// as Kubernetes marks such a resize Infeasible.
func (s *sim) resize(cpu float64) {
	s.podTick()
	s.curCPU = cpu
	for _, id := range s.active {
		p := &s.pods[id]
		if p.node >= 0 && len(s.nodes) > 0 {
			n := &s.nodes[p.node]
			if n.requested-p.cpu+cpu > s.cfg.NodeCPU+1e-9 {
				continue
			}
			s.nodeTouch(p.node)
			s.touch(id)
			if s.cfg.Sharing {
				s.psAdvance(id)
			}
			old := s.podCores(id)
			n.requested += cpu - p.cpu
			s.reqCores += cpu - p.cpu
			p.cpu = cpu
			n.busy += s.podCores(id) - old
			if s.cfg.Sharing {
				s.psReschedule(id)
			}
			continue
		}
		s.touch(id)
		if s.cfg.Sharing {
			s.psAdvance(id)
		}
		s.reqCores += cpu - p.cpu
		p.cpu = cpu
		if s.cfg.Sharing {
			s.psReschedule(id)
		}
	}
	s.res.Resizes++
}
