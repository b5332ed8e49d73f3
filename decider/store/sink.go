package store

import (
	"context"
	"math"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
)

// PointWriter accepts points without blocking; influx.Writer implements it.
type PointWriter interface {
	Write(points ...*write.Point)
}

// InfluxSink records every decision as a qas_decision point, for the dashboards'
// annotations and for audits of why the autoscaler acted.
type InfluxSink struct {
	W PointWriter
}

// RecordDecision implements measurement.DecisionSink. The writer buffers and retries,
// so an InfluxDB outage delays the point instead of failing the cycle. The point
// carries the scaled workload's name, so that dashboards match decisions to the
// workload's measurements.
func (s InfluxSink) RecordDecision(_ context.Context, of measurement.DecisionOf, d decide.Decision, dryRun bool) error {
	s.W.Write(DecisionPoint(of.Namespace, of.Name, of.Workload, d, dryRun))
	return nil
}

// DecisionPoint is the qas_decision point of one decision (internal/influx.Schema).
// Values InfluxDB cannot store (an unstable queue's infinite latency) are left out, and
// so is an unknown workload.
func DecisionPoint(namespace, name, workload string, d decide.Decision, dryRun bool) *write.Point {
	x := d.Explanation
	reason := x.Reason
	if x.HeldBecause != "" {
		reason = "held: " + x.HeldBecause
	}
	fields := map[string]any{
		"current_replicas":       int64(x.CurrentReplicas),
		"desired_replicas":       int64(d.DesiredReplicas),
		"desired_cpu_millicores": d.DesiredCPU,
		"dry_run":                dryRun,
		"reason":                 reason,
	}
	if x.ModelledLateShare > 0 {
		// Only a cycle the closed loop compared has them; 0 would read as "no
		// request late" on a dashboard.
		fields["measured_late_share"] = x.MeasuredLateShare
		fields["modelled_late_share"] = x.ModelledLateShare
		fields["steady_late_share"] = x.SteadyLateShare
	}
	if x.TailModel != "" {
		fields["tail_calibrated"] = x.TailModel == decide.TailMeasured
	}
	for k, v := range map[string]float64{
		"arrival_rate":              x.ArrivalRate,
		"forecast_arrival_rate":     x.ForecastArrivalRate,
		"forecast_arrival_rate_low": x.ForecastArrivalRateLow,
		"service_mean_seconds":      x.ServiceTime,
		// The pooled service-time estimate (decide/service.go).
		"service_mean_interval_seconds": x.ServiceTimeInterval,
		"service_samples":               x.ServiceSamples,
		"modelled_latency_seconds":      x.Latency,
		"measured_latency_seconds":      x.MeasuredLatency,
		"target_seconds":                x.Target,
		"lead_seconds":                  x.Lead.Seconds(),
		"forecast_window_seconds":       x.ForecastWindow.Seconds(),
		"normalized":                    x.Normalized,
		// The queue terms (issue #15).
		"short_arrival_rate":      x.ShortArrivalRate,
		"short_arrival_rate_low":  x.ShortArrivalRateLow,
		"backlog":                 x.Backlog,
		"drain_replicas":          float64(x.DrainReplicas),
		"latency_bias":            x.LatencyBias,
		"jump_ratio":              x.JumpRatio,
		"count_dispersion":        x.CountDispersion,
		"transient_late_share":    x.TransientLateShare,
		"recent_late_share":       x.RecentLateShare,
		"recent_late_share_error": x.RecentLateShareError,
		"spent_late_share":        x.SpentLateShare,
		"long_late_share":         x.LongLateShare,
		"long_late_share_error":   x.LongLateShareError,
		"tightened_budget":        x.TightenedBudget,
		"effective_percentile":    x.EffectivePercentile,
		"jump_replicas":           float64(x.JumpReplicas),
		"jump_late_share":         x.JumpLateShare,
		"jump_budget":             x.JumpBudget,
		"jump_band":               x.JumpBand,
		"jump_current_late_share": x.JumpCurrentLateShare,
		"down_late_share":         x.DownLateShare,
		"recent_jumps":            float64(x.RecentJumps),
		"recent_margin_replicas":  float64(x.RecentMarginReplicas),
		"depth":                   x.Depth,
		"depth_jumps":             float64(x.DepthJumps),
		"depth_margin_replicas":   float64(x.DepthMarginReplicas),
		"jump_ratio_max":          x.JumpRatioMax,
		"jump_unseen_weight":      x.JumpUnseenWeight,
		"unseen_rise_ratio":       x.UnseenRiseRatio,
		"declared_rise":           x.DeclaredRise,
		"declared_rise_weight":    x.DeclaredRiseWeight,
		"jumps_rescaled":          float64(x.JumpsRescaled),
		"jump_base":               x.JumpBase,
		"service_late_share":      x.ServiceLateShare,
		"service_shape_weight":    x.ServiceShapeWeight,
		// The rate mixture (docs/model.md section 2c).
		"rate_cv2":             x.RateCV2,
		"arrival_rate_level":   x.ArrivalRateLevel,
		"level_window_seconds": x.LevelWindow.Seconds(),
		// The pooled fronts' expiries and refusals (decide/expiry.go).
		"backlog_expired": x.BacklogExpired,
		// Named apart from the workload's front_expired_rate, a different count
		// (decide/expiry.go).
		"expired_rate":            x.FrontExpiredRate,
		"front_refused_full_rate": x.FrontRefusedRate,
		"expired_late_share":      x.ExpiredLateShare,
	} {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			fields[k] = v
		}
	}
	if r := x.Recurrence; r != nil && r.PeriodSeconds > 0 {
		for k, v := range map[string]float64{
			"recurrence_period_seconds": r.PeriodSeconds,
			"recurrence_occurrences":    float64(len(r.Occurrences)),
			"recurrence_confidence":     r.Confidence,
			"recurrence_chance":         r.Chance,
			"recurrence_next_seconds":   r.Next.Sub(d.Time).Seconds(),
			"recurrence_forecast_rate":  r.Rate,
		} {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				fields[k] = v
			}
		}
		fields["recurrence_active"] = r.Active
		fields["recurrence_contradicted"] = r.Contradicted
	}
	tags := map[string]string{"namespace": namespace, "queueautoscaler": name, "action": d.Action.String()}
	if workload != "" {
		tags["workload"] = workload
	}
	return write.NewPoint(influx.Decision, tags, fields, d.Time)
}
