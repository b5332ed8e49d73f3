package decide

import (
	"fmt"
	"math"
)

// The pooled data plane's expiries (issue #20, docs/pooling.md "Expired at the
// front"). A front gives an accepted overflow back unseen, a 503 marked
// Qas-Expired, when no pod pulled it within the front's maximum wait (5 s in the
// front the decider deploys, at most 1 min) or when the front shuts down. Such a
// request waited far beyond any latency target the front's wait leaves room
// for, and its pods had no free slot all that time: capacity is short now.
//
// Which count. The senders count each such 503 once, by what they did with it:
// served it themselves (expired_requeued_rate) or relayed it to the client
// (expired_relayed_rate). The fronts' own front_expired_rate counts the same
// events from the other side, plus requests that no capacity shortage made
// leave the queue: a sender gone (its client left), bytes found bad after
// acceptance, and a sender whose decision deadline passed just as the 100
// Continue was on its way (it queued the request locally after waiting only the
// decision deadline). So Snapshot.FrontExpiredRate is the senders' sum, and
// front_expired_rate is never added to it (that would count each expiry twice).
//
// What the latency histogram shows of them. The sender observes both kinds in
// its latency histogram with the latency from the request's first arrival: a
// relayed 503 when it relays it (Recorder.EndOverflowed), a requeued request when
// it ends here (served, or the local 503 of a full queue). So the histogram
// already counts them as late, and adding them to its share would count them
// twice. It misses them only where it cannot see them: a snapshot with latency
// quantiles and no histogram (the share is interpolated from p50/p95/p99 and
// understates a lump of requests at the front's maximum wait beyond p99), and a
// requeued request still waiting or in service at the interval's end (it is
// observed in a later interval). The expiries' share of arrivals is therefore a
// floor under the measured late share, not an addition to it.

// expiredShare is the share of the last interval's arrivals the fronts gave
// back unseen: FrontExpiredRate over λ now, at most 1; 0 without arrivals
// (expiries of requests that arrived before then are that interval's). The
// snapshot is validated: the rate is finite and non-negative.
func expiredShare(snap Snapshot) float64 {
	if snap.FrontExpiredRate <= 0 || len(snap.ArrivalRates) == 0 {
		return 0
	}
	lambda := snap.ArrivalRates[len(snap.ArrivalRates)-1].Rate
	if lambda <= 0 {
		return 0
	}
	return math.Min(1, snap.FrontExpiredRate/lambda)
}

// withExpired adds the fronts' expiries of the last interval to the backlog b:
// FrontExpiredRate × the interval (newestInterval: the newest point's, the
// collector's cycle) requests that waited past the front's maximum wait, beyond
// what the pods clear within the target whatever room they had (they were
// queued where every pod could pull them, and none did). They have left the
// front's queue, so FrontQueue does not hold them. A requeued one may still wait
// in its pod's queue at the interval's end and be in that pod's gauge too: the
// overlap is at most the requeued ones not yet served, and errs towards
// capacity while the fronts give requests up. It records the rates and the
// requests added in x; without an interval (no short window and one λ
// sample) nothing is added.
func withExpired(b backlog, snap Snapshot, x *Explanation) backlog {
	x.FrontExpiredRate, x.FrontRefusedRate = snap.FrontExpiredRate, snap.FrontRefusedRate
	x.ExpiredLateShare = expiredShare(snap)
	step := newestInterval(snap)
	if snap.FrontExpiredRate <= 0 || step <= 0 {
		return b
	}
	n := snap.FrontExpiredRate * step.Seconds()
	b.known = true
	b.total += n
	x.BacklogExpired = n
	return b
}

// expiredNote says, for a reason the backlog decided (its drain, or no
// scale-down while it is queued), how much of the backlog the fronts'
// expiries are, and when the backlog is theirs alone that without them there
// would be none. Empty when no expiry is in the backlog.
func (x *Explanation) expiredNote() string {
	if !(x.BacklogExpired > 0) {
		return ""
	}
	if x.BacklogExpired >= x.Backlog {
		return fmt.Sprintf(" (all of it the %.0f requests the pooled fronts gave back unseen over the last interval, %.4g/s, past their maximum wait: without them there is no backlog)",
			x.BacklogExpired, x.FrontExpiredRate)
	}
	return fmt.Sprintf(" (%.0f of them the requests the pooled fronts gave back unseen over the last interval, %.4g/s, past their maximum wait)",
		x.BacklogExpired, x.FrontExpiredRate)
}
