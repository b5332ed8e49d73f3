package decide

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// historyJumps are the history's jumps over one lead as the floor and the
// scale-down's margin read them: jumpsOver (at their peak when peak is set:
// sizer.peakJumps for the floor, sizer.peakJumpsDown for the margin; the peak
// held for a lead or proven by its count once the history spans a p-quantile's
// leads, sizer.jumpRead), without
// the onsets a confirmed recurrence explains, the seconds' own noise removed
// from their means (sizer.jumps, over the whole set); ascending by ratio.
func historyJumps(snap Snapshot, m *sizer, lead time.Duration, recur *Recurrence, peak bool) []jump {
	var skip func(time.Time) bool
	if recur.confirmed() {
		skip = func(t time.Time) bool { return recur.explains(t, lead) }
	}
	js := jumpsOver(snap.ArrivalRates, lead, m.jumpRead(lead, peak), skip)
	ratios := make([]float64, len(js))
	for i, j := range js {
		ratios[i] = j.ratio
	}
	for i, r := range m.jumps(ratios, lead, peak) {
		js[i].ratio = r
	}
	return js
}

// jumpRatios are the ratios of js at the present's base (atBase; x shows how
// many it rescaled), ascending; base is λ's mean over the last lead, and
// with none (0) the ratios are as they are.
func jumpRatios(js []jump, base float64, x *Explanation) []float64 {
	if base <= 0 {
		ratios := make([]float64, len(js))
		for i, j := range js {
			ratios[i] = j.ratio
		}
		return ratios
	}
	var ratios []float64
	ratios, x.JumpsRescaled = atBase(js, base)
	return ratios
}

// RecentHistory is how much of λ's history the scale-down's margin also
// reads on its own (recentMargin): the last hour, the controller's whole
// window until round twenty-nine.
const RecentHistory = time.Hour

// marginOverJumps is the scale-down's margin over one history, the whole
// snapshot's or its last hour (recentMargin): the fewest pods in [lo, hi]
// whose late share over the likely λ of the next lead, base × each of ratios
// (the history's jumps at the base: historyJumps, jumpRatios) and one more
// lead at the largest or at a rate the history ran at and has not shown a
// rise to (jumpLeads, noRiseRatio), is within budget. x shows the leads and
// the share.
func (m *sizer) marginOverJumps(ratios []float64, samples []Sample, lead time.Duration, base, conf float64, lo, hi int32, budget float64, x *Explanation) int32 {
	leads := jumpLeads(ratios, samples, lead, conf, m.spec.Burst, noRiseRatio(ratios, samples, lead, base, coldStartRate(m.snap.ArrivalRates, lead, conf)), x)
	return m.minPodsOverJumps(base, leads, lo, hi, budget, x)
}

// recentMargin is what the scale-down's margin keeps when whole pods are what
// the snapshot's whole history asks for: the larger of those and the fewest
// pods, up to hi, whose late share over the jumps of the last RecentHistory
// alone is
// within budget (marginOverJumps, as for the whole history). It reads that
// hour only when the history spans more.
//
// A long history weighs each jump by how often it comes in six hours, so a
// rare spike is remembered for as long as six hours hold it. Where the
// traffic has changed its nature within them, as from a quiet night to a busy
// morning, the quieter hours' jumps dilute the present hour's, and the margin
// priced that hour below what the hour itself shows: on NASA 2 July from
// 04:00 the morning held 4 % fewer pod-minutes than under an hour's history,
// and went over the budget (docs/model.md section 2c, rounds twenty-nine and
// thirty). A scale-down keeps what neither history disproves, as it keeps the
// peaks the floor does not order (peakJumpsDown). x.RecentJumps counts
// that hour's jumps; when it keeps more, x.RecentMarginReplicas is its count
// and x.DownLateShare its share.
func (m *sizer) recentMargin(whole int32, now time.Time, lead time.Duration, base float64, recur *Recurrence, peak bool, conf float64, hi int32, budget float64, x *Explanation) int32 {
	x.RecentJumps, x.RecentMarginReplicas = 0, 0
	recent, ok := lastOf(m.snap, now, RecentHistory)
	if !ok {
		return whole
	}
	var probe Explanation
	ratios := jumpRatios(historyJumps(recent, m, lead, recur, peak), base, &probe)
	x.RecentJumps = len(ratios)
	n, share := m.marginAbove(whole, ratios, recent.ArrivalRates, lead, base, conf, hi, budget)
	if n > whole {
		x.RecentMarginReplicas, x.DownLateShare = n, share
	}
	return n
}

// marginAbove is the scale-down's margin over another history's ratios
// (marginOverJumps) searched from rec up, the count the whole history's
// margin keeps: that count and its late share when it is more than rec, rec
// and 0 when not (or with no ratio). The other history's leads and notes stay
// out of the decision's explanation; only its count and share are kept.
func (m *sizer) marginAbove(rec int32, ratios []float64, samples []Sample, lead time.Duration, base, conf float64, hi int32, budget float64) (int32, float64) {
	if len(ratios) == 0 {
		return rec, 0
	}
	var probe Explanation
	n := m.marginOverJumps(ratios, samples, lead, base, conf, rec, hi, budget, &probe)
	if n <= rec {
		return rec, 0
	}
	return n, probe.DownLateShare
}

// depthLeads is how many leads λ's level spans: a jump's depth and the
// present's are λ's mean over the last lead ÷ its mean over the depthLeads
// leads before (the forecast's default window, Predictive.WindowFactor).
const depthLeads = 5

// depthShare is the share of the history's jumps the depth margin reads: the
// half whose depth is nearest the present's.
const depthShare = 0.5

// depthMargin is what the scale-down's margin keeps when rec pods are what the
// whole history and its last hour ask for: the larger of those and the fewest
// pods, up to hi, whose late share over the jumps from a depth like the
// present's alone is within budget (marginAbove over likeDepth of js, the
// jumps the whole history's margin read, already without their seconds' noise).
// A rate below its level tends to return to it, and one above it
// to fall back; the whole history's jumps price the next lead as if the
// present sat anywhere, and after a dip the margin let pods go that the
// return to the level needed: on NASA 2 July 14:00 ×100 on the overflow plane
// it took 7 pods to 5 as λ fell from 64 to 46/s, two minutes before λ climbed
// back 3.5 × (docs/model.md section 2c, round thirty-one). It keeps what such
// jumps ask for and never fewer pods than rec: the jumps from other depths
// still stand for the onsets they saw (selecting by depth alone let a warm
// burst's pods go in the calm after it, and the next burst came onto them).
// At least 1/(1 − conf) of the jumps are read, as many as the margin keeps of
// the tail exactly; where that is all of them, they are the whole history's
// and ask for no more. x.Depth is the present's depth; when the depth margin
// keeps more, x.DepthJumps counts the jumps it read and x.DepthMarginReplicas
// is its count (x.DownLateShare its share).
func (m *sizer) depthMargin(rec int32, js []jump, now time.Time, lead time.Duration, base, conf float64, hi int32, budget float64, x *Explanation) int32 {
	x.Depth, x.DepthJumps, x.DepthMarginReplicas = 0, 0, 0
	level, ok := meanRate(m.snap.ArrivalRates, now.Add(-depthLeads*lead), now)
	if !ok || level <= 0 || base <= 0 {
		return rec
	}
	x.Depth = base / level
	like := likeDepth(js, x.Depth, quantileLeads(conf))
	if len(like) == len(js) {
		return rec
	}
	var probe Explanation
	ratios := jumpRatios(like, base, &probe)
	n, share := m.marginAbove(rec, ratios, m.snap.ArrivalRates, lead, base, conf, hi, budget)
	if n > rec {
		x.DepthJumps, x.DepthMarginReplicas, x.DownLateShare = len(ratios), n, share
	}
	return n
}

// likeDepth is the depthShare of js whose depths are nearest depth (by the
// ratio between them; a tie goes to the earlier jump), and never fewer than
// least (all of js if it has no more); nearest first.
func likeDepth(js []jump, depth float64, least int) []jump {
	k := max(int(math.Ceil(depthShare*float64(len(js)))), least)
	if k >= len(js) {
		return js
	}
	// Each jump's distance is worked out once, not in every comparison.
	type near struct {
		far float64
		j   jump
	}
	byNear := make([]near, len(js))
	for i, j := range js {
		byNear[i] = near{math.Abs(math.Log(j.depth / depth)), j}
	}
	slices.SortStableFunc(byNear, func(a, b near) int { return cmp.Compare(a.far, b.far) })
	out := make([]jump, k)
	for i := range out {
		out[i] = byNear[i].j
	}
	return out
}

// depthNote says, for a reason, that the jumps from a like depth kept more
// pods than the other histories ("" if not).
func (x *Explanation) depthNote() string {
	if x.DepthMarginReplicas == 0 {
		return ""
	}
	return fmt.Sprintf("; λ's mean over the last lead is %.3g × its level over %d leads, and the %d jumps from the depths nearest it ask for %d pods (late share %.3g): the margin keeps them",
		x.Depth, depthLeads, x.DepthJumps, x.DepthMarginReplicas, x.DownLateShare)
}

// lastOf is snap with λ's samples after now − window only, when its history
// spans more than window before now (false: snap as it is). An hour's
// history, its first sample an hour before now, is its own last hour.
func lastOf(snap Snapshot, now time.Time, window time.Duration) (Snapshot, bool) {
	if len(snap.ArrivalRates) == 0 || now.Sub(snap.ArrivalRates[0].Time) <= window {
		return snap, false
	}
	from, rates := now.Add(-window), snap.ArrivalRates
	snap.ArrivalRates = rates[sort.Search(len(rates), func(i int) bool { return rates[i].Time.After(from) }):]
	return snap, true
}

// recentNote says, for a reason, that the last RecentHistory's jumps alone
// kept more pods than the whole history's ("" if not).
func (x *Explanation) recentNote() string {
	if x.RecentMarginReplicas == 0 {
		return ""
	}
	return fmt.Sprintf("; the %d jumps of the last %s alone ask for %d pods (late share %.3g), and the margin keeps them",
		x.RecentJumps, RecentHistory, x.RecentMarginReplicas, x.DownLateShare)
}

// rescaledNote says, for a reason, how many jumps atBase rescaled ("" if none).
func (x *Explanation) rescaledNote() string {
	if x.JumpsRescaled == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of the jumps rose from a lower rate and count here as the same rise in requests per second, not the same ratio", x.JumpsRescaled)
}

// tightenedNote says, for a reason, that the floor and the margin aim below
// the budget because the long late share is over its aim ("" if not).
func (x *Explanation) tightenedNote() string {
	if x.TightenedBudget <= 0 {
		return ""
	}
	return fmt.Sprintf(" (the floor and the margin aim at %.3g: the last %.0f requests ran %.3g%% late, ± %.2g%%: over the budget less twice that error at the SLO's confidence)",
		x.TightenedBudget, x.LongRequests, 100*x.LongLateShare, 100*x.LongLateShareError)
}

// atBase is the jumps' ratios as they apply at the present base, ascending,
// and how many were rescaled. A jump seen from a lower base counts as the
// same rise in requests per second, not the same ratio: the ratio 1 + (r −
// 1)·b₀/b. The history cannot say whether a rise scales with the base (a
// flash crowd of a share of the users) or not (a ramp that adds users at a
// steady pace, the Poisson noise of a low rate, which grows only as √λ), and
// the ratio alone read the quiet hours' rises as multiples of the busy
// hour's rate: on six hours of NASA from 04:00, the night's noise and the
// morning ramp made the engine hold 4.6–5.6× the pods of the reactive oracle
// (docs/model.md section 2c). A jump seen from a higher base keeps its ratio
// (the rise it would bring here is smaller, but a ratio seen on more requests
// is better evidence than the same rise on fewer). Rises only: a fall is the
// same whichever way it is read.
func atBase(js []jump, base float64) ([]float64, int) {
	out := make([]float64, len(js))
	n := 0
	for i, j := range js {
		out[i] = j.ratio
		if j.ratio > 1 && j.base < base {
			out[i] = 1 + (j.ratio-1)*j.base/base
			n++
		}
	}
	slices.Sort(out)
	return out, n
}

// jumpFloor is the fewest pods whose modelled late share over the likely λ of
// the next lead is within budget: λ's mean over the last lead times each of
// the history's jump ratios over one lead (jumpsOver), each weighted by its
// requests, as the scale-down's margin keeps (docs/model.md section 2c). A
// reactive policy serves the first lead of a jump with the pods it already
// has, whatever it orders then, so the capacity for the jumps the history
// shows must be there before they come: in the steady state as well as after
// a scale-down. It replaces the transient budget, which made the steady state
// pay for those late requests afterwards at a stricter percentile (up to p99.5,
// where a 200 ms target at 50 ms service is below the model's floor and the
// engine sized for 1.1 × the floor: 5× the pods of p95). ok is false (no
// floor) for a mean target or while the history holds no jump ratio (it spans
// less than two leads); at most hi, and at most what the steady state of
// the largest jump in the history needs. The onsets a confirmed recurrence
// explains are left out, as from the scale-down's margin: the forecast starts
// pods a lead before each, so the steady state need not hold them all along.
// base is λ's mean over the last lead (0: none, and no floor); budget is 1 −
// p, or the budget as the steady state spends it (Decide's floorBudget).
func (e *Engine) jumpFloor(spec Spec, m *sizer, lead time.Duration, ratios []float64, leads []weighted, base, budget float64, hi int32, x *Explanation) (n int32, ok bool) {
	if spec.Percentile <= 0 || lead <= 0 {
		return 0, false
	}
	x.JumpPeak = m.peakJumps()
	x.JumpPeakHeld = x.JumpPeak && m.heldJumps(lead)
	if len(leads) == 0 {
		// The floor averages the late share over the ratios the history has
		// (it reads no quantile of them), so one ratio, a history two leads
		// long, is evidence enough; waiting for the 1/(1−p) leads a p-quantile
		// needs left the first 40 minutes of a 2-minute init without a floor,
		// where every ramp then ran late for one init time. A declared rise
		// (Spec.Burst) is a lead too, history or not.
		return 0, false
	}
	if base <= 0 {
		return 0, false
	}
	// Never more than the steady state of the largest jump in the history
	// needs: when even that misses the budget on average (a target the model
	// cannot meet at any count), more pods would buy nothing.
	largest := 0.0
	for _, l := range leads {
		largest = math.Max(largest, l.v)
	}
	hi = min(hi, m.minPods(base*largest, m.es))
	var probe Explanation
	n = m.minPodsOverJumps(base, leads, 1, hi, budget, &probe)
	x.JumpReplicas, x.JumpLateShare, x.JumpBudget = n, probe.DownLateShare, budget
	return n, true
}

// floorCalls reports whether the jump floor, which asks for more pods than
// the current ones, orders them now: only when the history's jumps put the
// current pods' late share over the floor's budget by more than floorBand.
// Within it the floor waits, as the steady state does within G's band ±θ:
// the floor's count moves with λ's mean over the last lead and with the
// jumps a short history holds (the extra lead at the largest weighs 8/(8 +
// n) for n ratios at a 2-minute init and 15 s samples: 0.42 six minutes
// into a run), and on a smooth rate a
// pod it ordered was often removed by the scale-down's margin once it
// served, its start paid for nothing (the diurnal hour ×40 with a 2-minute
// init, seed 1: four pods started and removed in its first half hour). The
// band is what the recent requests left of the budget unused, so a workload
// running at its budget gets none and the floor acts as before. x shows the
// band, the current pods' share and whether it held them.
func (e *Engine) floorCalls(m *sizer, base float64, leads []weighted, current int32, floorBudget, budget, conf, tol float64, x *Explanation) bool {
	band := e.floorBand(budget, conf, tol)
	if band <= 0 {
		return true
	}
	share := m.lateOverJumps(base, leads, current)
	x.JumpBand, x.JumpCurrentLateShare = band, share
	if share > floorBudget+band {
		return true
	}
	x.JumpHeld = true
	return false
}

// floorBand is how far over its budget the floor lets the history's jumps put
// the current pods' late share before it orders more (floorCalls): the budget
// the recent requests left unused (unusedBudget, as the steady state's
// spending reads it, but from the first request rather than half the loop's
// memory), at most tol × budget (θ, as G's band); 0 before any request is
// measured or where none is left unused. Read with less caution (one standard error, or none) the band moved
// the cells of the matrix that sit within a tenth of a point of the budget
// over it (docs/model.md section 2c, round twenty-six).
func (e *Engine) floorBand(budget, conf, tol float64) float64 {
	if e.recent.reqs <= 0 {
		return 0
	}
	return min(e.unusedBudget(budget, conf), tol*budget)
}

// heldNote says, for a reason, that the floor's pods wait within its band.
func (x *Explanation) heldNote(current int32) string {
	return fmt.Sprintf(" (the history's jumps over one lead ask for %d pods, but put the %d here at a late share of %.3g, within %.3g of the floor's budget %.3g: the budget the recent requests left unused; no scale-up for them)",
		x.JumpReplicas, current, x.JumpCurrentLateShare, x.JumpBand, x.JumpBudget)
}

// jumpLeads is the set of jump ratios (ascending) the floor and the
// scale-down's margin average the late share over: the history's, thinned
// (thinJumps), and one more lead at the largest of them. A history of n
// leads cannot say how often a jump as large as its largest comes: by the
// rule of succession the next lead brings one at least that large with
// probability 1/(n + 1), which the extra lead's weight, one lead's samples
// among the n leads' (ratios are one per sample and overlap over a lead),
// gives it. Without it the largest jump counts at its observed frequency,
// 1/n, and a short history's one burst counts for nothing once it is older
// than a lead; the margin therefore used to keep the largest jump's pods
// whole until the history spanned 1/(1−p) leads (40 minutes at a 2-minute
// init), and the floor waited for two leads and then priced the burst at its
// frequency. x.JumpRatioMax and x.JumpUnseenWeight show the extra lead.
// Computed once a decision, for both (nil: no ratio).
//
// A declared rise (Spec.Burst) joins them (declareRise), with or without a
// history.
//
// unseen > the largest ratio puts the extra lead there instead (noRiseRatio:
// a rate the history ran at and has not shown a rise to); 0 leaves it at the
// largest.
func jumpLeads(ratios []float64, samples []Sample, lead time.Duration, conf float64, burst Burst, unseen float64, x *Explanation) []weighted {
	if len(ratios) == 0 {
		return declareRise(nil, burst, lead, x)
	}
	set := thinJumps(ratios, quantileLeads(conf))
	perLead := 1.0
	if step := sampleStep(samples); step > 0 {
		perLead = math.Max(1, lead.Seconds()/step.Seconds())
	}
	largest := ratios[len(ratios)-1]
	x.JumpRatioMax = math.Max(largest, 1)
	x.JumpUnseenWeight = perLead / (perLead + float64(len(ratios)))
	x.UnseenRiseRatio = 0
	if unseen > largest {
		largest, x.UnseenRiseRatio = unseen, unseen
	}
	return declareRise(append(set, weighted{largest, perLead}), burst, lead, x)
}

// noRiseRatio is where the scale-down's margin puts its extra lead (jumpLeads)
// over the jumps of samples when the history has not shown how λ could reach a
// rate it has run at, over base, λ's mean over the last lead (0: at the
// largest ratio, as the rule of succession has it):
//
//   - While none of the jumps has risen (the largest ratio at most 1, as at a
//     cold start on a falling rate): the highest mean over one lead of samples
//     (highestLeadMean). A history that has only held or fallen says nothing
//     of how far the rate may rise, and the largest of its ratios, 1, would
//     price no rise at all: at k = 4, where a pod's steady state runs at
//     ρ 0.85, that took a cold NASA hour from 3 pods to 1 at 68 req/s and,
//     when the rate rose 20 %, put 17,400 requests late in the 2 minutes new
//     pods took (docs/simulation.md, "Other SLOs, held out"). What the history
//     does show is the rate it has run at. (Until 2026-11-26 the margin held
//     the history's single highest sample until it spanned 1/(1−p) leads; on
//     NASA ×50, whose seconds come in batches, that sample is the batches'
//     noise.)
//   - While the decision's whole λ history spans fewer than the 1/(1 − p)
//     leads a p-quantile of its jumps needs, whether or not a jump rose: also
//     start, the rate it started at (coldStartRate). A level the history
//     reached through the jumps it shows is priced by those jumps; the level
//     it started at was reached by none of them. Until 2026-11-29 the first
//     ratio above 1 ended the extra lead's level, however small the rise: on
//     a cold NASA hour from 14:00 ×100 (the overflow plane, 2-minute init) a
//     3 % rise among seven jumps took the margin from 7 pods to 5 in one
//     decision, the history having started at 107/s and the rate at 61/s, and
//     λ climbed to 118/s in the next three minutes: 17,900 requests late
//     (docs/model.md section 2c, round thirty-two). samples may be a part of the history (the last
//     hour's, recentMargin); where that part starts is no start, since the
//     rise to it is in the history (with a lead over 3 minutes an hour never
//     spans 20 leads, and the rate of an hour ago would weigh in every
//     decision).
//
// It weighs as the extra lead does, so it fades as ratios accumulate. 0 when
// there is no ratio, no sample, no base, or no such rate above base.
func noRiseRatio(ratios []float64, samples []Sample, lead time.Duration, base, start float64) float64 {
	if len(ratios) == 0 || len(samples) == 0 || !(base > 0) {
		return 0
	}
	hi := start
	if ratios[len(ratios)-1] <= 1 {
		hi = math.Max(hi, highestLeadMean(samples, lead))
	}
	if hi > base {
		return hi / base
	}
	return 0
}

// coldStartRate is the rate a λ history started at, λ's mean over its first
// lead (startLeadMean), while it spans fewer than the quantileLeads(conf)
// leads a p-quantile of its jumps needs (spansQuantile); 0 once it spans them.
func coldStartRate(history []Sample, lead time.Duration, conf float64) float64 {
	if spansQuantile(history, lead, conf) {
		return 0
	}
	return startLeadMean(history, lead)
}

// startLeadMean is λ's mean over the history's first lead: its samples from
// the first to a lead after it, both included (0 when the history spans less
// than a lead, as highestLeadMean).
func startLeadMean(samples []Sample, lead time.Duration) float64 {
	if len(samples) == 0 || lead <= 0 || samples[len(samples)-1].Time.Sub(samples[0].Time) < lead {
		return 0
	}
	first := samples[0].Time
	m, _ := meanRate(samples, first.Add(-lead), first.Add(lead))
	return m
}

// highestLeadMean is the highest of λ's means over (t − lead, t], for each
// sample time t at least a lead after the first (0 when the history spans
// less than a lead). One pass: the window's sum moves with t.
func highestLeadMean(samples []Sample, lead time.Duration) float64 {
	if len(samples) == 0 || lead <= 0 {
		return 0
	}
	hi, sum, j := 0.0, 0.0, 0
	for i, s := range samples {
		sum += s.Rate
		for !samples[j].Time.After(s.Time.Add(-lead)) {
			sum -= samples[j].Rate
			j++
		}
		if s.Time.Sub(samples[0].Time) >= lead {
			hi = math.Max(hi, sum/float64(i-j+1))
		}
	}
	return hi
}

// declareRise adds the spec's declared rise to the weighted leads: leads at a
// ratio of b.Rise or more weigh at least s = lead/b.Every of the whole (at
// most a half), the share of leads such a rise takes if it comes once every
// b.Every. Where the history's own leads at that ratio or more already weigh
// s, nothing is added; without a history the present rate held (a ratio of 1)
// stands beside it, weighing 1 − s. Unchanged without a declared rise; b.Every
// is the spec's or DefaultBurstEvery (withDefaults).
func declareRise(leads []weighted, b Burst, lead time.Duration, x *Explanation) []weighted {
	if b.Rise <= 1 || b.Every <= 0 || lead <= 0 {
		return leads
	}
	share := math.Min(lead.Seconds()/b.Every.Seconds(), 0.5)
	if len(leads) == 0 {
		leads = []weighted{{1, 1}}
	}
	total, at := 0.0, 0.0
	for _, l := range leads {
		total += l.w
		if l.v >= b.Rise {
			at += l.w
		}
	}
	x.DeclaredRise = b.Rise
	if at >= share*total {
		return leads
	}
	w := (share*total - at) / (1 - share)
	x.DeclaredRiseWeight = w / (total + w)
	return append(leads, weighted{b.Rise, w})
}

// peakNote says, for a reason, how the floor or the margin read a jump's
// peak: held (jumpRead) or the lead's highest sample.
func (x *Explanation) peakNote(held bool) string {
	if held {
		return "each jump to the highest level within its lead that a lead's mean holds, or its highest sample as far as its count proves it"
	}
	return "each jump to the highest rate within its lead"
}

// declaredNote says, for a reason, that the floor or the margin priced a
// declared rise ("" if none).
func (x *Explanation) declaredNote(b Burst) string {
	if x.DeclaredRise == 0 {
		return ""
	}
	if x.DeclaredRiseWeight == 0 {
		return fmt.Sprintf(" (the declared rise ×%.3g every %s: the history shows it that often)", x.DeclaredRise, b.Every)
	}
	return fmt.Sprintf(" (and the declared rise ×%.3g every %s, weighing %.3g of the leads)", x.DeclaredRise, b.Every, x.DeclaredRiseWeight)
}

// peakJumps reports whether the jump floor's ratios price the peak within
// the next lead (jumpsOver): only when the model does not average over the
// seconds' rates, whose variation would make that peak noise.
func (s *sizer) peakJumps() bool { return s.mix == nil }

// heldJumps reports whether the peaks the floor and the margin read are held
// ones (jumpsOver with jumpRead.held): once the decision's whole λ history
// spans the quantileLeads leads a p-quantile of its jumps needs
// (spansQuantile), as the margin's cold start reads it (coldStartRate).
//
// A lead's highest 15-second sample priced as the steady state of a whole
// lead held a pod for each Poisson peak: on NASA 2 July 04:00 ×50 (a Poisson
// resampling) with a 2-minute init on the overflow plane, a third pod for
// λ 15–20/s that two serve at 3 % late, the count the margin and the floor set
// in most decisions, while the measured late share sat at 2.6–3.6 % against a
// 5 % budget. The peak a rise reaches and holds for a lead, or a spike its
// count proves, is what the pods there carry until those ordered at its
// onset are ready; the rest of a sample's excess is its count's noise. A
// short history keeps the highest sample, as before: it has too few leads to
// say how often a lead's peak holds, and the caution costs little there (on
// the increase–decrease ×5 with a 2-minute init, whose first 5 minutes are
// flat, the held peak lost the pod that a Poisson peak had started before the
// ramp, and 3 of 10 seeds crossed the budget; docs/model.md section 2c, round
// thirty-four).
func (s *sizer) heldJumps(lead time.Duration) bool {
	return spansQuantile(s.snap.ArrivalRates, lead, confidence(s.spec))
}

// jumpRead is how the floor and the margin read the next lead of each of the
// history's jumps (jumpsOver): at its peak where peak is set, held
// (heldJumps) at the SLO's confidence and the counts' dispersion.
func (s *sizer) jumpRead(lead time.Duration, peak bool) jumpRead {
	r := jumpRead{peak: peak}
	if peak && s.heldJumps(lead) {
		r.held, r.proven = true, provenAt(confidence(s.spec), s.dispersion)
	}
	return r
}

// peakJumpsDown reports whether the scale-down's margin prices the peak
// within the next lead: as the floor does, and also under the mixture while
// one sample's own noise is within the tolerance band: one step spans the
// level window (levelSeconds, cv²/θ²; equivalently cv²/step ≤ θ², the
// relative variance of a step's mean rate, its seconds independent). The
// mixture turns on at cv² 0.01 per second for the model's sake; that says
// nothing of whether a lead's highest 5–15 s sample is noise (at 0.01 a 5 s
// sample is ±4.5 %). On bursty traffic whose cv² hovers there (MMPP, bursts:
// 0.005–0.03) the margin's ratios fell from peaks to means whenever a burst's
// first seconds lifted the cv² across 0.01, and the margin let pods go at
// the onset of the burst itself (the warm MMPP with a 2-minute init, seed
// 2: 13 → 11 pods as λ rose from 20/s to 100/s). The floor keeps the means:
// a scale-up is ordered on what the counts prove, a scale-down on what they
// do not disprove (docs/model.md section 2c, round sixteen).
func (s *sizer) peakJumpsDown() bool {
	if s.peakJumps() {
		return true
	}
	step := sampleStep(s.snap.ArrivalRates).Seconds()
	return step > 0 && levelSeconds(s.cv2, s.spec.Tolerance) <= step
}

// jumps are the history's jump ratios with the seconds' own noise removed
// when the model averages over the seconds' rates and the ratios are means
// (denoiseJumps); as they are otherwise.
func (s *sizer) jumps(ratios []float64, lead time.Duration, peak bool) []float64 {
	if s.mix == nil || peak {
		return ratios
	}
	return denoiseJumps(ratios, s.cv2, lead.Seconds())
}
