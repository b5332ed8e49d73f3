package resources

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// FillStatus writes what the cycle observed and decided into the status.
// initTime is the observed pod start time, reported whether or not predictive
// scaling uses it.
func FillStatus(st *v1alpha1.QueueAutoscalerStatus, qa *v1alpha1.QueueAutoscaler, d decide.Decision, snap decide.Snapshot, replicas int32, actErr error, dryRun bool, initTime time.Duration, now time.Time) {
	x := d.Explanation
	gen := qa.Generation
	st.Reference = qa.Spec.ScaleTargetRef.Kind + "/" + qa.Spec.ScaleTargetRef.Name
	st.TargetSummary = qa.Spec.Target.Summary()
	st.CurrentReplicas = replicas
	st.DesiredReplicas = d.DesiredReplicas
	if x.HeldBecause == "" {
		st.ArrivalRate = strconv.FormatFloat(x.ArrivalRate, 'g', 4, 64) + "/s"
		st.ServiceTime = Seconds(x.ServiceTime)
		st.ModelledLatency = Seconds(x.Latency)
		if x.MeasuredLatency > 0 {
			st.MeasuredLatency = Seconds(x.MeasuredLatency)
		}
	}
	if initTime > 0 {
		st.InitTime = initTime.Round(time.Millisecond).String()
	}
	if len(snap.Pods) > 0 && snap.Pods[0].CPURequest > 0 {
		st.CurrentCPU = resource.NewMilliQuantity(snap.Pods[0].CPURequest, resource.DecimalSI)
	}
	if d.DesiredCPU > 0 {
		st.DesiredCPU = resource.NewMilliQuantity(d.DesiredCPU, resource.DecimalSI)
	}
	st.LastDecision = &v1alpha1.DecisionSummary{
		Time:   metav1.NewTime(now),
		Action: d.Action.String(),
		Reason: Summary(x),
		Model:  modelSummary(x),
		DryRun: dryRun,
	}
	SetCondition(st, "Ready", metav1.ConditionTrue, "Reconciled", "the spec is valid and the target was found", gen, now)
	if actErr != nil {
		SetCondition(st, "AbleToScale", metav1.ConditionFalse, "FailedAction", actErr.Error(), gen, now)
	} else {
		SetCondition(st, "AbleToScale", metav1.ConditionTrue, "SucceededGetScale", "the scale subresource of the target answers", gen, now)
	}
	if x.HeldBecause != "" {
		SetCondition(st, "ScalingActive", metav1.ConditionFalse, "Holding", x.HeldBecause, gen, now)
	} else {
		SetCondition(st, "ScalingActive", metav1.ConditionTrue, "ValidMeasurements", "the latency model has fresh measurements", gen, now)
	}
	clockSkewCondition(st, snap.DataTime, gen, now)
	RecurrenceCondition(st, x.Recurrence, gen, now)
	limited := d.DesiredReplicas == qa.Spec.MaxReplicas && x.Recommendation > qa.Spec.MaxReplicas ||
		d.DesiredReplicas == qa.Spec.MinReplicas && x.Recommendation < qa.Spec.MinReplicas && x.Recommendation > 0
	if why := Unreachable(x); why != "" {
		SetCondition(st, "ScalingLimited", metav1.ConditionTrue, "TargetUnreachable", why, gen, now)
	} else if limited {
		SetCondition(st, "ScalingLimited", metav1.ConditionTrue, "OutsideBounds",
			fmt.Sprintf("the model recommends %d replicas, outside [%d, %d]", x.Recommendation, qa.Spec.MinReplicas, qa.Spec.MaxReplicas), gen, now)
	} else {
		SetCondition(st, "ScalingLimited", metav1.ConditionFalse, "DesiredWithinRange", "the recommendation is within the bounds", gen, now)
	}
}

// RecurrenceCondition reports the recurring-burst detector's finding as the
// RecurringBursts condition, its message the detector's note (the period, the
// evidence and the next forecast onset, or why the workload is reactive): True
// while a period holds, False when none does or the last forecast burst did
// not come. Without a long history (r nil) the condition is left as it is.
func RecurrenceCondition(st *v1alpha1.QueueAutoscalerStatus, r *decide.Recurrence, gen int64, now time.Time) {
	switch {
	case r == nil:
	case r.PeriodSeconds > 0 && !r.Contradicted:
		SetCondition(st, "RecurringBursts", metav1.ConditionTrue, "Recurring", r.Note, gen, now)
	case r.Contradicted:
		SetCondition(st, "RecurringBursts", metav1.ConditionFalse, "ForecastBurstMissed", r.Note, gen, now)
	default:
		SetCondition(st, "RecurringBursts", metav1.ConditionFalse, "NoRecurrence", r.Note, gen, now)
	}
}

// ClockSkewTolerance: measurements dated more than this after the decider's now mean
// that the collector's clock (which times every point) is ahead of the decider's.
const ClockSkewTolerance = 5 * time.Second

// clockSkewCondition reports a collector clock ahead of the decider's as the ClockSkew
// condition (the data is still used), rather than as missing data. Once the clocks
// agree again the condition turns False; it is never added while they agree.
func clockSkewCondition(st *v1alpha1.QueueAutoscalerStatus, dataTime time.Time, gen int64, now time.Time) {
	if ahead := dataTime.Sub(now); !dataTime.IsZero() && ahead > ClockSkewTolerance {
		SetCondition(st, "ClockSkew", metav1.ConditionTrue, "CollectorClockAhead", fmt.Sprintf(
			"the newest measurement is dated %s after the decider's clock: qas-collector's clock is ahead (the data is used; synchronise the clocks)",
			ahead.Round(time.Second)), gen, now)
		return
	}
	clearCondition(st, "ClockSkew", "ClocksAgree", "no measurement is dated after the decider's clock", gen, now)
}

// ProxyClockTolerance: a proxy whose clock is further than this from the collector's is
// reported (the collector's own threshold for counting a skewed proxy).
const ProxyClockTolerance = 10 * time.Second

// ProxyClockCondition reports a proxy clock far from the collector's as the
// ProxyClockSkew condition. Points are timed by the collector's scrape clock, so the
// skew costs no data, but a node whose clock is off is worth an SRE's look. offset is
// the largest (in magnitude) offset in seconds, positive when a proxy is ahead. Once
// the clocks agree again the condition turns False; it is never added while they agree.
func ProxyClockCondition(st *v1alpha1.QueueAutoscalerStatus, offset float64, gen int64, now time.Time) {
	if math.IsNaN(offset) || math.IsInf(offset, 0) || math.Abs(offset) > 1e9 {
		return // not a measurement (the collector writes finite offsets); say nothing
	}
	if d := time.Duration(math.Abs(offset) * float64(time.Second)); d > ProxyClockTolerance {
		reason, dir := "ProxyClockAhead", "ahead of"
		if offset < 0 {
			reason, dir = "ProxyClockBehind", "behind"
		}
		SetCondition(st, "ProxyClockSkew", metav1.ConditionTrue, reason, fmt.Sprintf(
			"a pod's qas-proxy clock is %s %s qas-collector's (points are timed by the collector, so no data is lost; synchronise the node's clock)",
			d.Round(time.Second), dir), gen, now)
		return
	}
	clearCondition(st, "ProxyClockSkew", "ClocksAgree", "every proxy's clock is within "+ProxyClockTolerance.String()+" of the collector's", gen, now)
}

// clearCondition turns a condition that reports a problem False once the problem has
// gone; a condition that was never set stays absent, so a healthy workload's status
// does not list every problem it does not have.
func clearCondition(st *v1alpha1.QueueAutoscalerStatus, typ, reason, message string, gen int64, now time.Time) {
	if slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool { return c.Type == typ }) {
		SetCondition(st, typ, metav1.ConditionFalse, reason, message, gen, now)
	}
}

// HoldStatus records a cycle that did not reach the engine (holding decision d) as
// the last decision.
func HoldStatus(st *v1alpha1.QueueAutoscalerStatus, d decide.Decision, dryRun bool, now time.Time) {
	st.LastDecision = &v1alpha1.DecisionSummary{Time: metav1.NewTime(now), Action: d.Action.String(), Reason: Summary(d.Explanation), DryRun: dryRun}
}

// Summary is a decision's reason in one line.
func Summary(x decide.Explanation) string {
	if x.HeldBecause != "" {
		return "held: " + x.HeldBecause
	}
	return x.Reason
}

// SetCondition adds or updates a condition, keeping its transition time unless its
// status changed.
func SetCondition(st *v1alpha1.QueueAutoscalerStatus, typ string, status metav1.ConditionStatus, reason, msg string, gen int64, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = metav1.NewTime(now)
		}
		c.Status, c.Reason, c.Message, c.ObservedGeneration = status, reason, msg, gen
		return
	}
	st.Conditions = append(st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now),
	})
}

// Seconds formats a latency in seconds the way kubectl users read durations; an
// unstable queue's infinite latency reads "unstable".
func Seconds(s float64) string {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return "unstable"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond / 10).String()
}

// Unreachable says why no allocation the engine weighed meets the target (a target
// below what one request takes, or a percentile so far out that no pod count brings
// it down), or "" when one does or none was weighed. The engine then sizes the
// workload near the latency floor; the status must not read as healthy.
func Unreachable(x decide.Explanation) string {
	if x.HeldBecause != "" {
		return ""
	}
	var best *decide.Candidate
	for i, c := range x.Candidates {
		switch c.Kind {
		case decide.CandidateHorizontal, decide.CandidateVertical, decide.CandidateBoth:
		default:
			continue
		}
		if c.MeetsTarget && c.Feasible {
			return ""
		}
		// The best allocation named is the lowest modelled latency among those that
		// could be carried out, or among all when none could.
		if better := c.Feasible && (best == nil || !best.Feasible); better || best == nil ||
			c.Feasible == best.Feasible && c.ModelledLatency < best.ModelledLatency {
			best = &x.Candidates[i]
		}
	}
	if best == nil {
		return ""
	}
	at := "mean"
	if x.Percentile > 0 {
		at = "p" + strconv.FormatFloat(x.Percentile, 'g', -1, 64)
	}
	return fmt.Sprintf("the target %s latency of %s is unreachable: the best allocation weighed (%d pods) models %s, and adding pods cannot bring it below the floor set by the service time E[S] = %s; the workload is sized near that floor. Raise the target or lower the percentile",
		at, Seconds(x.Target), best.Replicas, Seconds(best.ModelledLatency), Seconds(x.ServiceTime))
}

// modelSummary names the queue model, and the latency tail's service model
// when the engine said which it used.
func modelSummary(x decide.Explanation) string {
	s := fmt.Sprintf("%s %s", x.Model, x.ServiceModel)
	if x.TailModel != "" {
		s += ", " + x.TailModel + " service tail"
	}
	return s
}
