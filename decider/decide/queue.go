package decide

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultLead is the pod start time assumed before any pod start has been seen
// (no init-time samples, no override): the backlog's horizon and the scale-down
// margin's look-ahead are one lead.
const DefaultLead = 30 * time.Second

// Calibration constants. They are statistical, not fitted to any trace.
const (
	// biasTailSamples is the number of requests beyond the measured percentile
	// at which one measurement weighs as much as the memory of the correction:
	// a quantile estimated from m tail samples has a relative standard error of
	// about 1/√m, so 100 tail samples (10 %) is as precise as the correction
	// needs to be.
	biasTailSamples = 1000
	// biasMin and biasMax bound the correction of the waiting time's
	// variability factor. Wide: arrivals in batches of B (a scaled trace, a
	// client fanning out) have a variability near B; beyond the bounds the
	// note says the model does not describe the workload.
	biasMin, biasMax = 1.0 / 16, 64.0
)

// backlog is the queue the pods hold beyond what they clear within the target.
type backlog struct {
	// excess per pod with data: requests in the pod (in service and queued)
	// beyond k·T/E[S].
	excess []float64
	total  float64
	maxPod float64
	known  bool
}

// measureBacklog reads the per-pod gauges. clear is the requests one pod clears
// within the target (k·T/E[S]): a request arriving behind more than that is
// late whatever happens next, so only the excess is a backlog.
func measureBacklog(pods []Pod, clear float64) backlog {
	var b backlog
	for _, p := range pods {
		q := p.InService + p.Queued
		if q == 0 && p.InFlightMean == 0 && p.MeasuredLatency == 0 {
			// A pod without queue data (or idle): counts as empty.
			b.excess = append(b.excess, 0)
			continue
		}
		b.known = true
		e := math.Max(0, q-clear)
		b.excess = append(b.excess, e)
		b.total += e
		b.maxPod = math.Max(b.maxPod, e)
	}
	return b
}

// withFrontQueue adds the pooled front's queue to b: the requests there go to the
// first free slots, so they fill the room the pods have left within the target
// (clear − q on each pod below clear) first, and the rest is backlog. A negative or
// non-finite queue counts as none.
func withFrontQueue(b backlog, pods []Pod, front, clear float64) backlog {
	if !(front > 0) || math.IsInf(front, 0) {
		return b
	}
	room := 0.0
	for _, p := range pods {
		room += math.Max(0, clear-(p.InService+p.Queued))
	}
	b.known = true
	b.total += math.Max(0, front-room)
	return b
}

// drainPods is the fluid model of the backlog: the fewest pods with which the
// backlog left when pods ordered now are ready (one lead later) drains within
// the horizon, while λ keeps arriving. kmu is one pod's service rate k/E[S], n
// the pods serving now. It returns the pods (0 when nothing is left to drain at
// the lead) and the backlog left at the lead.
//
// Random routing (a Service) keeps a pod's backlog on that pod: it drains at
// kμ − λ/n whatever the other pods do, so the fullest pod sets the count, and
// no count can drain it faster than kμ. When even λ/n → 0 would not drain it
// within the horizon, its arrivals are held to half its rate (the other half
// drains the backlog), so it drains in at most twice the time it needs alone.
// Least-request and pooled routing share the backlog between all pods: the
// pods' total rate must cover λ plus the backlog over the horizon.
func drainPods(b backlog, routing Routing, lambda, kmu float64, n int32, lead, horizon float64) (int32, float64) {
	if !b.known || kmu <= 0 || horizon <= 0 || n < 1 {
		return 0, 0
	}
	if routing == RoutingRandom {
		perPod := lambda / float64(n)
		var left float64
		for _, e := range b.excess {
			// A pod with no backlog still accumulates one when λ/n > kμ.
			left = math.Max(left, e+(perPod-kmu)*lead)
		}
		if left <= 0 {
			return 0, 0
		}
		allowed := kmu - left/horizon
		allowed = math.Max(allowed, kmu/2)
		return int32(min(math.Ceil(lambda/allowed), math.MaxInt32)), left
	}
	left := b.total + (lambda-float64(n)*kmu)*lead
	if left <= 0 {
		return 0, 0
	}
	return int32(min(math.Ceil((lambda+left/horizon)/kmu), math.MaxInt32)), left
}

// provenRate is the lower confidence bound, at level p, of the rate whose
// count over window w was rate·w, for counts with variance dispersion × mean
// (1: Poisson): (√N − z·√dispersion/2)²/w, the variance-stabilised bound. The
// fast path sizes for it only when it exceeds λ now, so a short window raises
// capacity only when its count proves the higher rate at the SLO's own
// confidence, not on noise.
func provenRate(rate float64, w time.Duration, p, dispersion float64) float64 {
	return provenAt(p, dispersion).rate(rate, w)
}

// provenBound is provenRate at one level and dispersion, its z·√dispersion
// worked out once for many counts (heldLevels reads one per sample).
type provenBound struct{ z float64 }

// provenAt is the bound at level p for counts of the given dispersion.
func provenAt(p, dispersion float64) provenBound {
	return provenBound{normalQuantile(p) * math.Sqrt(math.Max(dispersion, 1))}
}

// rate is provenRate's bound of the rate whose count over w was rate·w.
func (b provenBound) rate(rate float64, w time.Duration) float64 {
	if rate <= 0 || w <= 0 {
		return 0
	}
	n := rate * w.Seconds()
	r := math.Sqrt(n) - b.z/2
	if r <= 0 {
		return 0
	}
	return r * r / w.Seconds()
}

// upperRate is the upper confidence bound twin of provenRate:
// (√N + z·√dispersion/2)²/w.
func upperRate(rate float64, w time.Duration, p, dispersion float64) float64 {
	if w <= 0 {
		return rate
	}
	n := math.Max(rate, 0) * w.Seconds()
	r := math.Sqrt(n) + normalQuantile(p)*math.Sqrt(math.Max(dispersion, 1))/2
	return r * r / w.Seconds()
}

// normalQuantile is Φ⁻¹(p) = √2·erf⁻¹(2p − 1), clamped to [−10, 10] (p within
// 10⁻²³ of 0 or 1, where 2p − 1 rounds to ±1). Every statistical bound of a
// decision reads it, several times a decision: until 2026-11-26 it bisected
// on math.Erf, 100 steps and about 1 µs a call.
func normalQuantile(p float64) float64 {
	return min(max(math.Sqrt2*math.Erfinv(2*p-1), -10), 10)
}

// confidence is the level the engine uses for its statistical bounds: the
// spec's percentile, or 95 % for a mean target.
func confidence(spec Spec) float64 {
	if spec.Percentile > 0 {
		return spec.Percentile / 100
	}
	return 0.95
}

// meanRate is λ's mean over the samples in (from, to]; false when none.
func meanRate(samples []Sample, from, to time.Time) (float64, bool) {
	var s float64
	var n int
	for _, x := range samples {
		if x.Time.After(from) && !x.Time.After(to) {
			s += x.Rate
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return s / float64(n), true
}

// jump is one of the history's jumps over a lead: the ratio of the next
// lead's rate to the last one's, that last lead's mean (its base), and the
// base's depth, its ratio to λ's level: the mean over the depthLeads leads
// before the jump (1 where there is none).
type jump struct{ ratio, base, depth float64 }

// jumpRead is how jumpsOver reads the lead after each sample time: its mean
// (the zero value); with peak its highest sample (at least the mean); with
// held too the highest level reached within it and held for a lead (see
// jumpsOver), at least the mean, or its highest sample as far as that
// sample's count proves it (proven: provenRate at the SLO's confidence and the
// counts' dispersion), whichever is higher.
type jumpRead struct {
	peak, held bool
	proven     provenBound
}

// jumpsOver are the history's jumps over one lead: for each sample time t
// with a full lead of history before and after it, the ratio of λ over
// (t, t+lead] to its mean over (t−lead, t] (the jump's base, kept with it),
// ascending by ratio. The base is a mean over
// a lead, not a single sample: the pods' queues absorb what lasts less than a
// lead. Over (t, t+lead] it is the mean too, or with read.peak the highest sample
// there (at least the mean): the pods there at t carry the whole next lead
// before the ones ordered at t are ready, and a rate that climbs within it
// overloads them at its end while its mean does not (a 2.3× climb in 40 s has a
// mean ratio of about 1.7). The caller asks for peaks only where the cycle's
// rates vary no more than Poisson counts (sizer.peakJumps): where seconds'
// rates vary more (batches), the highest of a lead's samples is their noise
// (±39 % per 15 s on NASA ×50), which denoiseJumps removes only from means.
//
// With read.held the peak is the highest level the rate reaches within
// (t, t+lead] and holds for a lead: the highest mean over (u, u+lead] for u
// at t or at a sample time within the lead (before its end), over the
// history there is, or the lead's highest sample as far as its own count
// proves it (read.proven; heldLevels), whichever is higher,
// and at least the lead's mean. A rise that holds keeps the pods at t short
// until pods ordered at its onset are ready, a lead later, and its level is
// that mean; a sample over it by no more than its count's noise is that
// noise, and its steady state priced for a whole lead held a pod for a
// 15-second Poisson peak (docs/model.md section 2c, round thirty-four); a
// spike its count proves is priced at its height, as before.
// The sample times skip reports (nil: none) are left out.
func jumpsOver(samples []Sample, lead time.Duration, read jumpRead, skip func(time.Time) bool) []jump {
	if len(samples) < 3 || lead <= 0 {
		return nil
	}
	// The samples are oldest first (validateSnapshot), so the first sample
	// after t − lead, after t and after t + lead only move forward as t does:
	// three cursors find them, in integer nanoseconds, rather than a binary
	// search of times for each (six hours of history are 1,440 samples, and
	// the searches were four fifths of a scale-down's cost). Prefix sums give
	// the mean over (a, b].
	n := len(samples)
	at := make([]int64, n)
	sums := make([]float64, n+1)
	for i, s := range samples {
		at[i] = s.Time.UnixNano()
		sums[i+1] = sums[i] + s.Rate
	}
	step, span := at[1]-at[0], int64(lead)
	first, last := at[0], at[n-1]
	var from, mid, to int // the first sample after t − lead, after t, after t + lead
	level := int64(depthLeads) * span
	var since int // the first sample after t − depthLeads·lead
	var held heldLevels
	if read.held {
		held = newHeldLevels(samples, at, sums, span, read)
	}
	var jumps []jump
	for i, t := range at {
		if t-span < first-step || t+span > last || (skip != nil && skip(samples[i].Time)) {
			continue
		}
		for from < n && at[from] <= t-span {
			from++
		}
		for mid < n && at[mid] <= t {
			mid++
		}
		for to < n && at[to] <= t+span {
			to++
		}
		if mid <= from || to <= mid {
			continue
		}
		before := (sums[mid] - sums[from]) / float64(mid-from)
		next := (sums[to] - sums[mid]) / float64(to-mid)
		switch {
		case read.held:
			next = held.peak(at, mid, to, t, span, next)
		case read.peak:
			for _, s := range samples[mid:to] {
				next = math.Max(next, s.Rate)
			}
		}
		if before <= 0 {
			continue
		}
		for since < n && at[since] <= t-level {
			since++
		}
		depth := 1.0
		if lvl := (sums[mid] - sums[since]) / float64(mid-since); lvl > 0 {
			depth = before / lvl
		}
		jumps = append(jumps, jump{next / before, before, depth})
	}
	slices.SortFunc(jumps, func(a, b jump) int { return cmp.Compare(a.ratio, b.ratio) })
	return jumps
}

// heldLevels are what jumpsOver's held peaks read, once per history rather
// than once per lead that holds a sample: for each sample k, the mean over
// (at[k], at[k]+span] where the history spans it (−∞ where it does not),
// and the sample's count at its lower confidence bound over its own interval
// (read.proven; −∞ for the first sample and a repeated time), so that a peak
// takes their maximum as it is. Two cursors find each window's samples;
// prefix sums give its mean.
type heldLevels struct{ mean, proven []float64 }

func newHeldLevels(samples []Sample, at []int64, sums []float64, span int64, read jumpRead) heldLevels {
	n, last := len(at), at[len(at)-1]
	h := heldLevels{mean: make([]float64, n), proven: make([]float64, n)}
	start, end := 0, 0
	for k, u := range at {
		h.mean[k], h.proven[k] = math.Inf(-1), math.Inf(-1)
		if k > 0 && u > at[k-1] {
			h.proven[k] = read.proven.rate(samples[k].Rate, time.Duration(u-at[k-1]))
		}
		if u+span > last {
			continue
		}
		for start < n && at[start] <= u {
			start++
		}
		for end < n && at[end] <= u+span {
			end++
		}
		if end > start {
			h.mean[k] = (sums[end] - sums[start]) / float64(end-start)
		}
	}
	return h
}

// peak is jumpsOver's held peak of the lead (t, t+span] whose samples are
// mid … to−1 (at their times at), its mean mean: the highest mean over
// (u, u+span] for u at a sample time within the lead, before its end (u = t
// is the lead's own mean), where the history holds it all, or the highest of
// the lead's samples' proven counts, whichever is higher, at least mean.
func (h heldLevels) peak(at []int64, mid, to int, t, span int64, mean float64) float64 {
	peak := mean
	for k := mid; k < to; k++ {
		peak = math.Max(peak, h.proven[k])
		if at[k] < t+span {
			peak = math.Max(peak, h.mean[k])
		}
	}
	return peak
}

// weighted is a value standing for w of the original values.
type weighted struct{ v, w float64 }

// thinJumps keeps the n largest of the sorted jump ratios as they are (the
// tail, where the late requests come from) and stands the rest in for by n
// evenly spaced order statistics, each weighing its share: 2n model
// evaluations per pod count instead of one per ratio, exact where it matters.
func thinJumps(sorted []float64, n int) []weighted {
	out := make([]weighted, 0, 2*n)
	if len(sorted) <= 2*n {
		for _, v := range sorted {
			out = append(out, weighted{v, 1})
		}
		return out
	}
	body := sorted[:len(sorted)-n]
	w := float64(len(body)) / float64(n)
	for i := range n {
		out = append(out, weighted{body[(2*i+1)*len(body)/(2*n)], w})
	}
	for _, v := range sorted[len(sorted)-n:] {
		out = append(out, weighted{v, 1})
	}
	return out
}

// jumpQuantile is the p-quantile (nearest rank) of ratios, the jump ratios of
// samples (jumpsOver), and their number. Ratios a sample apart overlap; only a
// history spanning 1/(1−p) leads holds that many independent ones, fewer cannot
// show a p-quantile: ok is false.
func jumpQuantile(samples []Sample, ratios []float64, lead time.Duration, p float64) (float64, int, bool) {
	if len(ratios) == 0 || !spansQuantile(samples, lead, p) {
		return 0, len(ratios), false
	}
	rank := max(1, int(math.Ceil(p*float64(len(ratios)))))
	return ratios[rank-1], len(ratios), true
}

// quantileLeads is how many independent leads a p-quantile of the jumps needs,
// ⌈1/(1 − p)⌉ (20 at p95): the tail the margin keeps exactly (thinJumps), the
// fewest jumps the depth margin reads (likeDepth), and the span jumpQuantile
// asks of a history.
func quantileLeads(p float64) int { return int(math.Ceil(1 / (1 - p))) }

// spansQuantile says whether samples span the quantileLeads(p) leads a
// p-quantile of their jumps needs (false with none).
func spansQuantile(samples []Sample, lead time.Duration, p float64) bool {
	return len(samples) > 0 && samples[len(samples)-1].Time.Sub(samples[0].Time) >= time.Duration(quantileLeads(p))*lead
}

// newestInterval is the interval the snapshot's newest measurements (its
// service time, latency and their counts) are over: the newest scrape, the
// short window, or where there is none the spacing of the newest λ samples.
// A count that is not given is taken as λ over it.
func newestInterval(snap Snapshot) time.Duration {
	if snap.ShortWindow > 0 {
		return snap.ShortWindow
	}
	return sampleStep(snap.ArrivalRates)
}

// sampleStep is the spacing of the last two λ samples (the cycle); 0 with one.
func sampleStep(samples []Sample) time.Duration {
	if len(samples) < 2 {
		return 0
	}
	return samples[len(samples)-1].Time.Sub(samples[len(samples)-2].Time)
}

// solveBias finds b with latency(b) = measured by bisection on log b in
// [biasMin, biasMax]; latency rises with E[S]. It returns the clamped value and
// whether it was clamped.
func solveBias(latency func(b float64) float64, measured float64) (float64, bool) {
	if latency(biasMin) >= measured {
		return biasMin, true
	}
	if hi := latency(biasMax); hi <= measured {
		return biasMax, true
	}
	lo, hi := math.Log(biasMin), math.Log(biasMax)
	for range 60 {
		m := (lo + hi) / 2
		if latency(math.Exp(m)) < measured {
			lo = m
		} else {
			hi = m
		}
	}
	return math.Exp((lo + hi) / 2), false
}

// fresh tells whether snap's newest interval (its DataTime) is one the engine
// has not folded into its averages yet, and marks it folded. A decider that
// decides as often as the collector scrapes sometimes runs twice on one
// point (the two clocks drift), and one that waits out a collector's missed
// cycle runs on the same point until the next comes: each interval counts
// once in the count dispersion, the rate's cv², the pooled service time, the
// closed loop and the backlog's persistence. A snapshot without a DataTime is
// always fresh.
func (e *Engine) fresh(snap Snapshot) bool {
	if snap.DataTime.IsZero() {
		return true
	}
	t := snap.DataTime.UnixNano()
	if t == e.foldedAt {
		return false
	}
	e.foldedAt = t
	return true
}

// dispersionMemory is how many decisions the counts' dispersion averages over.
const dispersionMemory = 20.0

// dispersion is the index of dispersion of the short-window counts (their
// variance over their mean; 1 for Poisson arrivals, about the batch size for
// arrivals in batches), an exponential average over the last dispersionMemory
// decisions of (N − λw)²/(λw·(1 − w/W)), with N the short window's count, λ
// the cycle's rate (the newest λ sample) and W that sample's span, which
// holds the short window (the newest scrape is the newest part of the
// newest window: measurement.RateWindows). Part of N is in λ's own count, so
// for counts independent from one second to the next N − λw varies by
// D·λw·(1 − w/W), not D·λw: until 2026-11-29 the average read two thirds of
// the dispersion (w = 5 s in W = 15 s). A short window as long as the
// cycle's (the controller's store gave the newest point as both) says
// nothing of it and is not counted. It returns the value before this
// decision's sample.
//
// Until it has that many samples it is their plain mean with Poisson's 1 as
// one more sample (each new one weighs 1/(n + 2) after n): an exponential
// average started at 1 with a weight of 1/20 still read a third of the truth
// after 7 decisions, so a cold decider took counts in batches of 50 for
// nearly Poisson ones, and its forecast's bound trusted a line through them
// (nasa-2jul-10h-x50: 81 pods ordered at 35 s for λ ≈ 25/s).
func (e *Engine) dispersion(snap Snapshot, lambda float64, fresh bool) float64 {
	d := e.disp
	if d <= 0 {
		d = 1
	}
	w, span := snap.ShortWindow.Seconds(), sampleStep(snap.ArrivalRates).Seconds()
	if w <= 0 || lambda <= 0 || !fresh || span <= w {
		return d
	}
	mean := lambda * w
	r := (snap.ShortArrivalRate*w - mean) * (snap.ShortArrivalRate*w - mean) / (mean * (1 - w/span))
	e.disp = d + (r-d)*max(1/dispersionMemory, 1/(e.dispN+2))
	e.dispN = min(e.dispN+1, dispersionMemory)
	return d
}

// recordLate counts the recent requests, those over the target and
// those that transients (cycles while a backlog outlasted the lead, or right
// after one) put over the target, read from the measured histogram or
// quantiles: the payback and the spending of the budget (spendBudget) read
// them. Counts decay over biasTailSamples/budget requests, the closed loop's
// memory in requests.
func (e *Engine) recordLate(snap Snapshot, lambda, target float64, transient bool, budget float64) {
	n := snap.LatencySamples
	if n <= 0 {
		n = lambda * newestInterval(snap).Seconds()
	}
	if late, ok := measuredLateShare(snap, target); ok && n > 0 {
		decay := math.Exp(-n * budget / biasTailSamples)
		e.recent.add(n, late, decay)
		e.lateTransient *= decay
		if transient {
			e.lateTransient += n * late
		}
		e.long.add(n, late, math.Exp(-n*budget/(longMemory*biasTailSamples)))
	}
}

// lateMemory is an exponentially weighted count of the requests measured
// (reqs), of those over the target (late), and the share's variance (sq): the
// sum, weights squared, of the squared differences between each cycle's late
// requests and what the share made of its requests, the cycles as clusters.
type lateMemory struct{ reqs, late, sq float64 }

// add folds one cycle of n requests, a share late of them over the target,
// into m, each count decayed by decay first. The cycle's late requests against
// what the share so far makes of its requests are one cluster's contribution
// to the variance (its weight decays as its counts do, squared).
func (m *lateMemory) add(n, share, decay float64) {
	if m.reqs > 0 {
		d := n * (share - m.late/m.reqs)
		m.sq = m.sq*decay*decay + d*d
	}
	m.reqs = m.reqs*decay + n
	m.late = m.late*decay + n*share
}

// share is the share of the remembered requests over the target (0 before
// any).
func (m lateMemory) share() float64 {
	if m.reqs <= 0 {
		return 0
	}
	return m.late / m.reqs
}

// shareError is the standard error of share, the cycles taken as clusters:
// late requests come in clumps (a burst's backlog, a slow dependency), so
// fewer of them are independent than their count says, and the scatter of the
// cycles' late counts about the share measures how many. 0 before two cycles.
func (m lateMemory) shareError() float64 {
	if m.reqs <= 0 {
		return 0
	}
	return math.Sqrt(m.sq) / m.reqs
}

// holdsHalf reports whether m has measured half its memory, times ×
// biasTailSamples/budget requests: the evidence the spending (times 1) and
// the tightening (longMemory) wait for.
func (m lateMemory) holdsHalf(budget, times float64) bool {
	return m.reqs*budget >= times*biasTailSamples/2
}

// state is m as the engine's saved State keeps it (nil before any request).
func (m lateMemory) state() *StateLateCounts {
	if m.reqs <= 0 {
		return nil
	}
	return &StateLateCounts{Requests: m.reqs, Late: m.late, LateSq: m.sq}
}

// longMemory is how many times the closed loop's memory the long late share
// remembers (200,000 requests at p95). The recent share steers the steady
// state within minutes; an SLO is judged over hours, and a share that sits on
// the budget within the recent memory's noise ends over it as often as under.
const longMemory = 10

// tightenBudget is the budget the jump floor and the scale-down's margin aim
// at when the long late share is over its aim: the budget less the share's
// own error at the SLO's confidence (the loop lands on what it aims at, give
// or take that error, so aiming at the budget itself lands on it as often
// over as under). Past it at its upper confidence bound, the floor and the
// margin size for the budget less the excess, by at most maxPayback of it; 0
// otherwise, and until the long memory holds half its requests (as
// spendBudget waits for half the recent one).
func (e *Engine) tightenBudget(budget, conf float64) float64 {
	if !e.long.holdsHalf(budget, longMemory) {
		return 0
	}
	over := e.long.share() + 2*normalQuantile(conf)*e.long.shareError() - budget
	if over <= 0 {
		return 0
	}
	return max(budget*(1-maxPayback), budget-over)
}

// spendBudget is the late share the steady state sizes for (1 − the
// percentile) against the budget 1 − p, and how much of the budget the recent
// requests left unused it spends (beyond the payback alone): the budget less what recent transients
// put over the target (the payback), plus, where the recent requests ran late
// by less than the budget by more than the share's own error at the
// confidence conf (z_conf standard errors; measured over at least half the
// loop's memory), the difference; within (1 ± maxPayback) × the budget.
//
// The second term is the loop closed on the SLO itself. Every rule that holds
// capacity against what the model cannot see (λ's upper bound, the band, the
// jump floor's peaks, the rate mixture's pessimism over batches) errs on the
// safe side, and on NASA with each logged request multiplied qas ran 2–4 %
// late against a 5 % budget at 1.3–1.4 × the reactive oracle's pod-seconds.
// Spending the measured unused budget takes back what those rules over-buy
// where they over-buy it, and nowhere else: a workload whose measured share
// is within its own error of the budget is sized as before. The margin is
// that error (late requests come in clumps, so fewer are independent than the
// count says): until 2026-11-27 a tenth of the budget, the tolerance θ, now
// what the cycles' scatter measures, larger where late requests clump and
// smaller where they do not.
func (e *Engine) spendBudget(budget, conf float64) (eff, spent float64) {
	lo, hi := budget*(1-maxPayback), budget*(1+maxPayback)
	payback := budget - e.transientShare()
	var spare float64
	if e.recent.holdsHalf(budget, 1) {
		spare = e.unusedBudget(budget, conf)
	}
	eff = min(max(payback+spare, lo), hi)
	// What the spare moved it by, beyond the payback alone.
	return eff, math.Max(eff-max(payback, lo), 0)
}

// unusedBudget is the part of the budget the recent requests left unused
// beyond their late share's own error at the confidence conf (z_conf
// standard errors): what the steady state may spend (spendBudget) and how
// far the jump floor waits over its budget (floorBand); 0 where they ran at
// or over the budget less that error.
func (e *Engine) unusedBudget(budget, conf float64) float64 {
	return math.Max(budget-normalQuantile(conf)*e.recent.shareError()-e.recent.share(), 0)
}

// transientShare is the share of recent requests transients put over the target.
func (e *Engine) transientShare() float64 {
	if e.recent.reqs <= 0 {
		return 0
	}
	return e.lateTransient / e.recent.reqs
}

// latencyBias is the current correction of E[S] (1 before any).
func (e *Engine) latencyBias() float64 {
	if e.bias <= 0 {
		return 1
	}
	return e.bias
}

// calibrate compares the latency the model gives for the current allocation
// with the one the proxies measured and moves the correction of E[S] towards
// the value that makes them agree, weighted by how many requests beyond the
// percentile the measurement saw (one cycle's weight is its tail samples over
// those plus biasTailSamples). Everything the model leaves out shows in the
// measured latency and so in the correction: a service-time law with another
// tail, arrivals burstier than Poisson, imbalance between pods. Only while a
// backlog outlasts the lead (draining: the fluid model says it is still there
// when pods ordered now are ready) is the cycle a transient the steady-state
// model is not meant to describe; it is left out. A backlog the pods clear
// within the lead is the steady state of bursty arrivals, and is learnt. It returns the
// correction, this cycle's observation (0: none) and, when it made none, why.
func (e *Engine) calibrate(spec Spec, snap Snapshot, m *sizer, lambda, es float64, serving int32, draining, fresh bool, x *Explanation) (float64, float64, string) {
	bias := e.latencyBias()
	measured := snap.MeasuredLatency
	switch {
	case measured <= 0 || lambda <= 0 || es <= 0 || serving < 1:
		return bias, 0, ""
	case !fresh:
		return bias, 0, "not corrected this cycle: its measurement was folded in already (no newer point from the collector)"
	case draining:
		return bias, 0, "not corrected this cycle: a backlog is draining (a transient the steady-state model does not describe)"
	}
	at := func(b float64) float64 {
		saved := m.waitBias
		m.waitBias = b
		defer func() { m.waitBias = saved }()
		return m.latency(lambda, es, serving)
	}
	obs, clamped := solveBias(at, measured)
	n := snap.LatencySamples
	if n <= 0 {
		n = lambda * newestInterval(snap).Seconds()
	}
	note := ""
	if clamped {
		note = fmt.Sprintf("this cycle's measured latency would need the wait's variability corrected beyond [%.2g, %.2g]×: the model does not describe it (a service-time floor above the target, or a transient)", biasMin, biasMax)
	}
	if late, ok := measuredLateShare(snap, m.target); ok && spec.Percentile > 0 {
		// An integral controller on the SLO's own quantity: the requests over
		// the target, measured against modelled. At equilibrium the model's late
		// requests add up to the measured ones. A step's size is the count
		// difference over the memory (biasTailSamples tail requests, or the
		// cycle's own when larger), times 1/ln(1/(1−p)): the inverse elasticity
		// of ln P(T > t) in the wait's variability factor at the target point,
		// where the wait's tail is about e^{−θt/κ} and θt/κ ≈ ln(1/(1−p)).
		modelled := m.tail(lambda, es, serving, m.target)
		x.MeasuredLateShare, x.ModelledLateShare, x.SteadyLateShare = late, modelled, m.steadyTail(lambda, es, serving, m.target)
		diff := n * (late - modelled)
		step := diff / math.Max(biasTailSamples, n*(late+modelled))
		gain := 1 / -math.Log1p(-confidence(spec))
		bias = min(max(bias*math.Exp(gain*step), biasMin), biasMax)
		e.bias = bias
		return bias, obs, note
	}
	tail := n * (1 - confidence(spec))
	if spec.Percentile == 0 {
		tail = n / 2
	}
	w := tail / (tail + biasTailSamples)
	bias = math.Exp((1-w)*math.Log(bias) + w*math.Log(obs))
	bias = min(max(bias, biasMin), biasMax)
	e.bias = bias
	return bias, obs, note
}

// lateShare reads the share of requests over t from measured latency
// quantiles (at least two, ascending): the exceedance 1 − p/100 is
// interpolated log-linearly in t between the quantiles around t (an
// exponential tail piece by piece), and beyond the highest it follows the
// slope of the two highest; below the lowest, between (0, 1) and it. It
// returns false with fewer than two quantiles.
func lateShare(qs []LatencyQuantile, t float64) (float64, bool) {
	if len(qs) < 2 {
		return 0, false
	}
	pts := make([]LatencyQuantile, 0, len(qs)+1)
	pts = append(pts, LatencyQuantile{Percentile: 0, Seconds: 0})
	pts = append(pts, qs...)
	ex := func(p float64) float64 { return math.Log(1 - p/100) }
	for i := 1; i < len(pts); i++ {
		if t <= pts[i].Seconds {
			a, b := pts[i-1], pts[i]
			if b.Seconds <= a.Seconds {
				return 1 - b.Percentile/100, true
			}
			f := (t - a.Seconds) / (b.Seconds - a.Seconds)
			return math.Exp(ex(a.Percentile) + f*(ex(b.Percentile)-ex(a.Percentile))), true
		}
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	if b.Seconds <= a.Seconds {
		return 0, true
	}
	slope := (ex(b.Percentile) - ex(a.Percentile)) / (b.Seconds - a.Seconds)
	return math.Exp(ex(b.Percentile) + slope*(t-b.Seconds)), true
}

// downRate is the λ a scale-down must still serve: λ's mean over the last lead
// times the jump ratio of the history. With too little history for the
// ratio's quantile, the largest ratio seen instead (the highest λ in the
// history while there is no ratio yet) if it spans at least a lead, and false
// (hold) if it does not. mean is λ's mean over the last lead (ok false: no
// sample in it, and the last sample's rate stands in).
func (e *Engine) downRate(samples []Sample, ratios []float64, now time.Time, lead time.Duration, mean float64, hasMean bool, conf float64, x *Explanation) (float64, bool) {
	if !hasMean && len(samples) > 0 {
		mean = samples[len(samples)-1].Rate
	}
	j, n, ok := jumpQuantile(samples, ratios, lead, conf)
	x.JumpSamples = n
	if !ok {
		if len(samples) == 0 || now.Sub(samples[0].Time) < lead {
			return 0, false
		}
		if len(ratios) > 0 {
			// The largest jump over one lead seen so far, from λ's mean over
			// the last lead: the quantile is out of reach, but the history
			// has shown what λ did within one lead. (Until 2026-11-26 the
			// highest λ in the history: with a 2-minute init that held the
			// peak's pods for the first 40 minutes after any peak.)
			x.JumpRatioMax = math.Max(ratios[len(ratios)-1], 1)
			return mean * x.JumpRatioMax, true
		}
		hi := 0.0
		for _, s := range samples {
			hi = math.Max(hi, s.Rate)
		}
		return hi, true
	}
	x.JumpRatio = j
	return mean * j, true
}

// normalizedAt names the λ that Normalized was computed at, for a reason: λ
// now, or, when the model averages over the seconds' rates, λ's level over
// the level window, with this cycle's λ beside it (a reason that put the
// cycle's λ next to the level's G read as a G that fell as λ rose).
func (x *Explanation) normalizedAt() string {
	if x.LevelWindow > 0 {
		return fmt.Sprintf("λ's level %.4g/s over the last %s; this cycle's λ %.4g/s", x.ArrivalRateLevel, x.LevelWindow, x.ArrivalRate)
	}
	return fmt.Sprintf("λ now = %.4g/s", x.ArrivalRate)
}

// downWhy says where the scale-down's λ came from.
func (x *Explanation) downWhy() string {
	if x.JumpRatio > 0 {
		return fmt.Sprintf("λ's mean over one lead × %.3g, the p-quantile of its jumps over one lead in %d ratios of the history", x.JumpRatio, x.JumpSamples)
	}
	if x.JumpRatioMax > 0 {
		return fmt.Sprintf("λ's mean over one lead × %.3g, the largest of its jumps over one lead in a history too short for their quantile (%d ratios)", x.JumpRatioMax, x.JumpSamples)
	}
	return fmt.Sprintf("the highest λ in the history, too short (%d ratios) for the quantile of its jumps", x.JumpSamples)
}

// measuredLateShare is the share of the interval's requests over t that the
// proxies measured: from the latency histogram when the snapshot has one (exact
// at a bucket bound), else read from the measured quantiles, which overstates
// it where the tail is heavier than exponential between them (log-linear
// interpolation of a convex log-survival). It is never below the share of
// arrivals the pooled fronts gave back unseen (expiredShare): a floor, not an
// addition, since the histogram already holds every expired request it saw
// (expiry.go). False when nothing measured the latency: the expiries alone are
// a lower bound, which the closed loop would read as the share.
func measuredLateShare(snap Snapshot, t float64) (float64, bool) {
	late, ok := lateShareOfBuckets(snap.LatencyBuckets, t)
	if !ok {
		late, ok = lateShare(snap.MeasuredQuantiles, t)
	}
	if !ok {
		return 0, false
	}
	return math.Max(late, expiredShare(snap)), true
}

// lateShareOfBuckets is the share of the histogram's requests over t: the
// buckets above t, and of the bucket holding t the part above it, the bucket's
// requests taken as spread evenly over it (exact when t is a bucket bound, as
// a target usually is). False when the histogram is empty or malformed.
func lateShareOfBuckets(bs []LatencyBucket, t float64) (float64, bool) {
	var all, over, lo float64
	for i, b := range bs {
		if b.Count < 0 || math.IsNaN(b.Count) || math.IsInf(b.Count, 0) || math.IsNaN(b.UpperBound) || (i > 0 && b.UpperBound <= bs[i-1].UpperBound) {
			return 0, false
		}
		all += b.Count
		switch {
		case lo >= t:
			over += b.Count
		case b.UpperBound > t:
			if math.IsInf(b.UpperBound, 1) {
				over += b.Count
			} else {
				over += b.Count * (b.UpperBound - t) / (b.UpperBound - lo)
			}
		}
		lo = b.UpperBound
	}
	if all <= 0 {
		return 0, false
	}
	return over / all, true
}
