package decide

import (
	"math"
	"time"
)

// stabilize records rec at now and returns the stabilised recommendation, as
// the HPA does: scale up to the lowest recommendation of the up window (default
// window 0: at once), scale down to the highest of the down window.
func (e *Engine) stabilize(rec, current int32, now time.Time, up, down ScalingRules) int32 {
	nowNs := now.UnixNano()
	keep := max(up.StabilizationWindow, down.StabilizationWindow)
	// Drop what no window can see any more.
	kept := e.recs[:0]
	for _, r := range e.recs {
		if nowNs-r.at <= int64(keep) {
			kept = append(kept, r)
		}
	}
	e.recs = append(kept, recommendation{at: nowNs, replicas: rec})

	upRec, downRec := rec, rec
	for _, r := range e.recs {
		age := time.Duration(nowNs - r.at)
		if age <= up.StabilizationWindow {
			upRec = min(upRec, r.replicas)
		}
		if age <= down.StabilizationWindow {
			downRec = max(downRec, r.replicas)
		}
	}
	switch {
	case current < upRec:
		return upRec
	case current > downRec:
		return downRec
	default:
		return current
	}
}

// rateLimit bounds the change from current to desired by the policies of its
// direction, counting the changes already made inside each policy's period.
// It returns the limited count and the policy description that bit, if any.
func (e *Engine) rateLimit(desired, current int32, now time.Time, up, down ScalingRules) (int32, string) {
	nowNs := now.UnixNano()
	switch {
	case desired > current:
		if up.SelectPolicy == SelectDisabled {
			return current, "scale-up disabled by policy"
		}
		limit, ok := e.limit(current, nowNs, up, true)
		if ok && desired > limit {
			return max(limit, current), "scale-up rate limit"
		}
	case desired < current:
		if down.SelectPolicy == SelectDisabled {
			return current, "scale-down disabled by policy"
		}
		limit, ok := e.limit(current, nowNs, down, false)
		if ok && desired < limit {
			return min(limit, current), "scale-down rate limit"
		}
	}
	return desired, ""
}

// limit is the HPA's calculateScaleUpLimitWithScalingRules and its scale-down
// twin: for each policy, the replica count at the start of its period plus (or
// minus) what the policy allows, combined by SelectPolicy.
func (e *Engine) limit(current int32, nowNs int64, rules ScalingRules, up bool) (int32, bool) {
	if len(rules.Policies) == 0 {
		return 0, false
	}
	var result int32
	if up == (rules.SelectPolicy != SelectMin) {
		result = math.MinInt32
	} else {
		result = math.MaxInt32
	}
	for _, p := range rules.Policies {
		var added, removed int32
		for _, ev := range e.events {
			// Strictly inside the period, as the HPA's getReplicasChangePerPeriod
			// (timestamp + period after now): a step exactly one period ago
			// opened the previous period, not this one. Counting it would halve
			// a 100 %-per-15 s limit for a decider that runs every 15 s.
			if nowNs-ev.at < int64(p.Period) {
				if ev.delta > 0 {
					added += ev.delta
				} else {
					removed -= ev.delta
				}
			}
		}
		start := float64(current - added + removed)
		if !up {
			start = float64(current + removed - added)
		}
		var l int32
		switch {
		case up && p.Type == PolicyPods:
			l = int32(start) + p.Value
		case up:
			l = int32(math.Ceil(start * (1 + float64(p.Value)/100)))
		case p.Type == PolicyPods:
			l = int32(start) - p.Value
		default:
			l = int32(math.Ceil(start * (1 - float64(p.Value)/100)))
		}
		// Max means "the policy allowing the biggest change": the highest
		// limit up, the lowest limit down.
		if (up && rules.SelectPolicy != SelectMin) || (!up && rules.SelectPolicy == SelectMin) {
			result = max(result, l)
		} else {
			result = min(result, l)
		}
	}
	return result, true
}

// recordScale notes a change of replicas at now, and forgets events older than
// any policy period can see.
func (e *Engine) recordScale(delta int32, now time.Time, up, down ScalingRules) {
	nowNs := now.UnixNano()
	var longest time.Duration
	for _, p := range append(append([]ScalingPolicy{}, up.Policies...), down.Policies...) {
		longest = max(longest, p.Period)
	}
	kept := e.events[:0]
	for _, ev := range e.events {
		if nowNs-ev.at <= int64(longest) {
			kept = append(kept, ev)
		}
	}
	e.events = kept
	if delta != 0 {
		e.events = append(e.events, scaleEvent{at: nowNs, delta: delta})
	}
}
