package sim

import "math"

// Two candidate pooled data planes that can be built from sidecars
// (issue #20), beside the ideal pooled queue (RoutePooled):
//
// RoutePeer, peer handoff. A Service sends each request to a Ready pod at
// random. A proxy with a free slot serves it; one whose k slots are full hands
// it to a peer chosen by power of two choices over the peers' advertised free
// slots, and queues it locally if neither advertises one. Every proxy
// advertises its free slots every Handoff.Period seconds (each on its own
// phase), so what a sender reads is up to a period old; a sender counts the
// requests it has handed to a peer since that peer's last advertisement
// against it (it cannot see the other senders'). At each of its own ticks a
// proxy with a local queue also tries to hand its queued requests off, oldest
// first. A handed-off request reaches the peer Handoff.Hop seconds later; the
// peer takes it only into a free slot (it is never queued there, so it is
// never handed again: hop limit 1) and otherwise refuses it, and it goes back
// to the end of the sender's queue another Hop later (the refusal's round
// trip). Draining pods (out of the EndpointSlice) receive nothing but still
// hand off what they hold.
//
// RouteFront, a capacity-aware front (one Deployment, like Knative's
// activator). Checked every Handoff.Period seconds: the front is in the path
// while spare capacity is short, that is while some Ready pod has no free
// slot or requests wait anywhere; out of it when every Ready pod has a free
// slot. In the path, each request pays Handoff.Hop to reach the front, which
// holds requests in one FIFO and gives each to a Ready pod with a free slot
// (as RoutePooled); out of it, requests go to a random Ready pod as through a
// Service.

// RouteOverflow, sidecars overflowing to a shared front. A Service sends
// each request to a Ready pod at random; a proxy with a free slot serves
// it, and one whose slots are all busy sends it to the front (one Deployment)
// instead of queueing it: the front holds overflow requests in one FIFO, and
// a proxy whose slot frees with no local queue pulls the oldest from it (a
// Ready pod that a free-slot scan finds takes a new one at once). Only the
// overflow requests pay: two hops (to the front, and its 100 Continue back),
// charged before the front queues them, and the pull's hops, during which
// the puller's slot is held (pull): the request reaches the puller as the
// answer to its pull (one hop; a pod whose slot has just freed sends the
// pull first, one more), and the puller takes it only after the front's 100
// Continue to its result (a round trip), so that no request is processed
// twice. Nothing is advertised: pods pull, so nothing goes stale.

// Handoff configures RoutePeer, RouteFront and RouteOverflow. Its zero value
// has no hop cost and 1 s advertisements and checks; Fresh makes them
// instant. The matrix and simulate use DefaultHandoff.
type Handoff struct {
	// Hop is the latency a request pays for each extra hop (to a peer, back
	// from a refusing peer, or through the front), seconds.
	Hop float64
	// Period is the advertisement period (RoutePeer; each proxy also retries
	// its queue on its own tick) and the front's check period (RouteFront),
	// seconds; zero means 1 s.
	Period float64
	// Fresh makes senders read the peers' true free slots (less the requests
	// on their way to them) instead of the last advertisements, and the front
	// check spare capacity at every arrival: the limit of instant
	// advertisements.
	Fresh bool
}

// DefaultHandoff is the peer handoff and fronts the evaluation simulates:
// 0.5 ms per extra hop (an assumed pod-to-pod proxy hop on one cluster
// network, not a measurement; docs/pooling.md also runs 2 ms) and
// advertisements every second.
var DefaultHandoff = Handoff{Hop: 0.0005, Period: 1}

func (h Handoff) period() float64 {
	if h.Period > 0 {
		return h.Period
	}
	return 1
}

// HandoffStats counts what the extra hops of RoutePeer, RouteFront and
// RouteOverflow did.
type HandoffStats struct {
	// HandedOff counts handoffs a peer accepted; Refused the ones it refused
	// (its free slot was gone when the request arrived).
	HandedOff int `json:"handed_off"`
	Refused   int `json:"refused"`
	// ViaFront counts requests that went through the front (RouteFront,
	// RouteOverflow).
	ViaFront int `json:"via_front"`
	// Hops counts requests by the extra hops they paid before service (0 to
	// 6, 7 or more), so the added latency's percentiles are Hop times these:
	// a handed-off request 1 or 2 (refused once); one through the front 1,
	// or on RouteOverflow 2 and the pull's 3 or 4.
	Hops [8]int `json:"hops"`
	// HandedTwice counts requests started after more than one accepted
	// handoff: the hop limit says zero.
	HandedTwice int `json:"handed_twice"`
	// FrontInPath is the seconds the front was in the path.
	FrontInPath float64 `json:"front_in_path_seconds"`
}

// HopsAt is the extra hops of the request at percentile p (0–100) of all
// requests started.
func (h HandoffStats) HopsAt(p float64) int {
	n := 0
	for _, c := range h.Hops {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	seen := 0
	for i, c := range h.Hops {
		seen += c
		if seen >= rank {
			return i
		}
	}
	return len(h.Hops) - 1
}

// peerState is one pod's side of peer handoff.
type peerState struct {
	// adv is the free slots the pod advertised last, epoch how many
	// advertisements it has made.
	adv   int
	epoch uint32
	// incoming counts handoffs on their way to this pod.
	incoming int
	// claims are this pod's handoffs to each peer since that peer's
	// advertisement of the recorded epoch.
	claims  map[int]claim
	ticking bool
}

type claim struct {
	epoch uint32
	n     int
}

func (s *sim) peer(id int) *peerState {
	for len(s.peers) <= id {
		s.peers = append(s.peers, peerState{})
	}
	return &s.peers[id]
}

// peerReady starts pod id's advertisement ticks, on a random phase.
func (s *sim) peerReady(id int) {
	ps := s.peer(id)
	ps.adv = s.cfg.Concurrency - s.pods[id].inService
	ps.epoch++
	if !ps.ticking {
		ps.ticking = true
		s.heap.push(event{t: s.now + s.rngRoute.Float64()*s.cfg.Handoff.period(), pod: int32(id), k: evAdvert})
	}
}

// advertTick is pod id's tick: it advertises its free slots and hands its
// queued requests off while a peer advertises room.
func (s *sim) advertTick(id int) {
	p := &s.pods[id]
	ps := s.peer(id)
	if p.gone {
		ps.ticking = false
		return
	}
	ps.adv = max(0, s.cfg.Concurrency-p.inService)
	ps.epoch++
	for p.queue.size > 0 {
		if !s.handOff(id, p.queue.peek()) {
			break
		}
		p.queue.pop()
	}
	s.heap.push(event{t: s.now + s.cfg.Handoff.period(), pod: int32(id), k: evAdvert})
}

// peerArrive routes an arrival through the peer data plane.
func (s *sim) peerArrive(req request) {
	id := s.pick()
	if s.pods[id].inService < s.cfg.Concurrency {
		s.route(id, req)
		return
	}
	if s.handOff(id, req) {
		return
	}
	s.pods[id].queue.push(req)
}

// free is the free slots sender from believes peer to have.
func (s *sim) free(from, peer int) int {
	ps := s.peer(peer)
	if s.cfg.Handoff.Fresh {
		return s.cfg.Concurrency - s.pods[peer].inService - ps.incoming
	}
	c := s.peer(from).claims[peer]
	if c.epoch != ps.epoch {
		c.n = 0
	}
	return ps.adv - c.n
}

// handOff hands req from pod from to the better of two random Ready peers
// (the only one if there is one) if it advertises a free slot; false if
// neither does, or the request was handed off before (hop limit 1).
func (s *sim) handOff(from int, req request) bool {
	peers := len(s.ready)
	if s.pods[from].readyIdx >= 0 {
		peers--
	}
	if req.hops > 0 || peers < 1 {
		return false
	}
	a := s.randomPeer(from)
	if peers >= 2 {
		b := s.randomPeer(from)
		for b == a {
			b = s.randomPeer(from)
		}
		if s.free(from, b) > s.free(from, a) {
			a = b
		}
	}
	return s.handOffTo(from, a, req)
}

// randomPeer is a Ready pod other than from, uniformly.
func (s *sim) randomPeer(from int) int {
	for {
		if id := s.ready[s.rngRoute.IntN(len(s.ready))]; id != from {
			return id
		}
	}
}

func (s *sim) handOffTo(from, to int, req request) bool {
	if to == from || s.free(from, to) <= 0 {
		return false
	}
	ps := s.peer(to)
	snd := s.peer(from)
	if snd.claims == nil {
		snd.claims = map[int]claim{}
	}
	c := snd.claims[to]
	if c.epoch != ps.epoch {
		c = claim{epoch: ps.epoch}
	}
	c.n++
	snd.claims[to] = c
	ps.incoming++
	req.hops++
	req.paid++
	if h := s.cfg.Handoff.Hop; h > 0 {
		s.heap.push(event{t: s.now + h, arr: req.arr, svc: req.svc, pod: int32(to), gen: uint32(from), k: evHandoff,
			hops: req.hops, paid: req.paid})
		return true
	}
	s.handOffArrive(to, from, req)
	return true
}

// handOffArrive is a handed-off request reaching pod to: it starts in a free
// slot or is refused back to from.
func (s *sim) handOffArrive(to, from int, req request) {
	s.peer(to).incoming--
	p := &s.pods[to]
	if p.ready && !p.draining && p.inService < s.cfg.Concurrency {
		s.res.Handoff.HandedOff++
		s.route(to, req)
		return
	}
	s.res.Handoff.Refused++
	req.hops--
	req.paid++
	if h := s.cfg.Handoff.Hop; h > 0 {
		s.heap.push(event{t: s.now + h, arr: req.arr, svc: req.svc, pod: int32(from), k: evRefused, hops: req.hops, paid: req.paid})
		return
	}
	s.refusedBack(from, req)
}

// refusedBack puts a refused request back on its sender: in a free slot, or
// at the end of its queue. The sender cannot be gone (it holds the
// client's connection while it hands off), but if the simulator removed it,
// the request goes to a Ready pod as a new arrival would.
func (s *sim) refusedBack(from int, req request) {
	switch {
	case !s.pods[from].gone:
		s.route(from, req)
	case len(s.ready) == 0:
		s.front.push(req)
	default:
		s.route(s.pick(), req)
	}
}

// frontEnter sends an arrival through the front: it reaches it a hop later.
func (s *sim) frontEnter(req request) {
	req.paid++
	s.res.Handoff.ViaFront++
	if h := s.cfg.Handoff.Hop; h > 0 {
		s.heap.push(event{t: s.now + h, arr: req.arr, svc: req.svc, k: evFront, paid: req.paid})
		return
	}
	s.frontArrive(req)
}

// frontArrive is a request reaching the front: the oldest waiting go first,
// then a free slot; taken out of the path meanwhile, the front passes it to a
// random Ready pod.
func (s *sim) frontArrive(req request) {
	switch {
	case len(s.ready) == 0 || s.front.size > 0:
		s.front.push(req)
	case !s.activator:
		s.route(s.pick(), req)
	default:
		if id, ok := s.freePod(); ok {
			s.route(id, s.pull(req, false))
		} else {
			s.front.push(req)
		}
	}
}

// frontShort tells whether spare capacity is short: some Ready pod has no
// free slot, or requests wait (in front or in a pod's queue).
func (s *sim) frontShort() bool {
	if s.front.size > 0 {
		return true
	}
	for _, id := range s.ready {
		if p := &s.pods[id]; p.inService >= s.cfg.Concurrency || p.queue.size > 0 {
			return true
		}
	}
	return false
}

// frontCheck puts the front in or out of the path by spare capacity (or
// keeps it in while the policy wants its own activator there).
func (s *sim) frontCheck() {
	on := s.frontShort() || s.policyActivator
	s.frontOn = on
	if on != s.activator {
		s.setActivator(on)
	}
}

// wantActivator is whether the activator (or front) belongs in the path
// after a decision of a policy that routes through one.
func (s *sim) wantActivator(router ActivatorRouter) bool {
	s.policyActivator = router.ActivatorRouting()
	switch s.cfg.Routing {
	case RouteFront:
		return s.frontOn || s.policyActivator
	case RouteOverflow:
		return true
	}
	return s.cfg.Routing == RoutePooled || s.policyActivator
}

// overflowArrive routes an arrival through RouteOverflow: a free slot on
// its random pod, else two hops to the front.
func (s *sim) overflowArrive(req request) {
	id := s.pick()
	if s.pods[id].inService < s.cfg.Concurrency && s.front.size == 0 {
		s.route(id, req)
		return
	}
	if s.pods[id].inService < s.cfg.Concurrency {
		// Requests wait in front: the pod's free slot pulls the oldest,
		// and this one joins the end of the line (FIFO across the pool).
		s.route(id, s.pull(s.front.pop(), false))
	}
	req.paid += 2
	s.res.Handoff.ViaFront++
	if h := s.cfg.Handoff.Hop; h > 0 {
		s.heap.push(event{t: s.now + 2*h, arr: req.arr, svc: req.svc, k: evFront, paid: req.paid})
		return
	}
	s.frontArrive(req)
}

func (q *fifo) peek() request { return q.buf[q.head] }

// The hops a pulled request holds its puller's slot for before its service
// starts (RouteOverflow; docs/pooling.md, "Wire protocol"): the front's
// answer to a waiting pull, then the result's 100 Continue round trip; a pod
// whose slot has just freed sends its pull first. Until 2026-11-28 the
// simulator charged none of them. Against the live data plane on loopback
// (test/bench/pooling.sh, 4 pods, exponential 50 ms, ρ 0.3 then 0.9 for
// 15 s, five rounds against ten seeds) it then gave the pooled plane 14.4 %
// late and a p95 of 304 ms where the proxies measured 23.8 % and 416 ms,
// while random routing agreed (43.9 % against 39.7 %): at ρ 0.9 a pulled
// request's millisecond of held slot is capacity the burst does not have.
const (
	pullWaitingHops = 3
	pullOnFreeHops  = 4
)

// pull is req as pulled from the front by a pod whose slot frees (onFree) or
// had a pull waiting: on RouteOverflow it holds the slot for the pull's hops
// before its service, which its latency and the slot's busy time include (as
// the puller's proxy measures it, slot to response end); req itself on the
// other planes, whose fronts push.
func (s *sim) pull(req request, onFree bool) request {
	if s.cfg.Routing != RouteOverflow {
		return req
	}
	hops := pullWaitingHops
	if onFree {
		hops = pullOnFreeHops
	}
	req.paid += uint8(hops)
	req.svc += float64(hops) * s.cfg.Handoff.Hop
	return req
}
