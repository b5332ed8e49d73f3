package decide

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// FieldError is an invalid Spec or Snapshot field.
type FieldError struct {
	Field string // e.g. "spec.maxReplicas"
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func badFloat(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// Validate checks spec and returns every problem found, each a *FieldError
// naming its field (joined with errors.Join). Zero values that have defaults are
// valid.
func Validate(spec Spec) error {
	var errs []error
	add := func(field, format string, args ...any) { errs = append(errs, fieldErr(field, format, args...)) }
	if spec.MinReplicas < 1 {
		add("spec.minReplicas", "must be at least 1, got %d", spec.MinReplicas)
	}
	if spec.MaxReplicas < spec.MinReplicas {
		add("spec.maxReplicas", "must be at least minReplicas (%d), got %d", spec.MinReplicas, spec.MaxReplicas)
	}
	if spec.Target <= 0 {
		add("spec.target", "must be a positive duration, got %s", spec.Target)
	}
	if badFloat(spec.Percentile) || spec.Percentile < 0 || spec.Percentile >= 100 {
		add("spec.percentile", "must be 0 (mean) or in (0,100), got %v", spec.Percentile)
	}
	if badFloat(spec.Tolerance) || spec.Tolerance < 0 || spec.Tolerance >= 1 {
		add("spec.tolerance", "must be in [0,1), got %v", spec.Tolerance)
	}
	if spec.Concurrency < 0 {
		add("spec.concurrency", "must be positive (0 means 1), got %d", spec.Concurrency)
	}
	switch spec.Model {
	case "", ModelPooled, ModelPerPod, ModelAuto:
	default:
		add("spec.model", "must be one of pooled, per-pod, auto, got %q", spec.Model)
	}
	switch spec.Routing {
	case "", RoutingRandom, RoutingLeastRequest, RoutingPooled:
	default:
		add("spec.routing", "must be one of random, leastRequest, pooled, got %q", spec.Routing)
	}
	switch spec.ServiceModel {
	case "", ServiceMMc, ServiceAllenCunneen:
	default:
		add("spec.serviceModel", "must be one of M/M/c, allen-cunneen, got %q", spec.ServiceModel)
	}
	if spec.MaxDataAge < 0 {
		add("spec.maxDataAge", "must not be negative, got %s", spec.MaxDataAge)
	}
	v := spec.Vertical
	if v.Enabled {
		if v.MinCPU <= 0 {
			add("spec.vertical.minCPU", "must be positive millicores, got %d", v.MinCPU)
		}
		if v.MaxCPU < v.MinCPU {
			add("spec.vertical.maxCPU", "must be at least minCPU (%d), got %d", v.MinCPU, v.MaxCPU)
		}
	}
	if v.PodOverheadCPU < 0 {
		add("spec.vertical.podOverheadCPU", "must not be negative, got %d", v.PodOverheadCPU)
	}
	if badFloat(v.CPUBoundFraction) || v.CPUBoundFraction < 0 || v.CPUBoundFraction > 1 {
		add("spec.vertical.cpuBoundFraction", "must be in [0,1], got %v", v.CPUBoundFraction)
	}
	m := spec.Migration
	if badFloat(m.NodeThreshold) || m.NodeThreshold < 0 || m.NodeThreshold > 1 {
		add("spec.migration.nodeThreshold", "must be in (0,1] (0 means 0.85), got %v", m.NodeThreshold)
	}
	switch m.Mover {
	case "", MoverOwn, MoverNeighbour:
	default:
		add("spec.migration.mover", "must be own or neighbour, got %q", m.Mover)
	}
	if badFloat(m.SlowFactor) || (m.SlowFactor != 0 && m.SlowFactor < 1) {
		add("spec.migration.slowFactor", "must be at least 1 (0 means 1.5), got %v", m.SlowFactor)
	}
	if badFloat(m.ThrottleThreshold) || m.ThrottleThreshold < 0 || m.ThrottleThreshold > 1 {
		add("spec.migration.throttleThreshold", "must be in [0,1], got %v", m.ThrottleThreshold)
	}
	if badFloat(m.DataMoveBytesPerSecond) || m.DataMoveBytesPerSecond < 0 {
		add("spec.migration.dataMoveBytesPerSecond", "must not be negative, got %v", m.DataMoveBytesPerSecond)
	}
	if m.Cooldown < 0 {
		add("spec.migration.cooldown", "must not be negative (0 means 5m), got %s", m.Cooldown)
	}
	if b := spec.Burst; b.Rise != 0 || b.Every != 0 {
		for _, fe := range b.Check(spec.Percentile) {
			add("spec.burst"+fe.Field, "%s", fe.Msg)
		}
	}
	p := spec.Predictive
	if p.LeadOverride < 0 {
		add("spec.predictive.leadOverride", "must not be negative, got %s", p.LeadOverride)
	}
	if badFloat(p.InitPercentile) || p.InitPercentile < 0 || p.InitPercentile > 100 {
		add("spec.predictive.initPercentile", "must be in (0,100] (0 means 90), got %v", p.InitPercentile)
	}
	if badFloat(p.WindowFactor) || (p.WindowFactor != 0 && p.WindowFactor < 1) {
		add("spec.predictive.windowFactor", "must be at least 1 (0 means 5), got %v", p.WindowFactor)
	}
	switch p.Method {
	case "", ForecastHolt, ForecastLeastSquares:
	default:
		add("spec.predictive.method", "must be holt or least-squares, got %q", p.Method)
	}
	for _, dr := range []struct {
		dir string
		r   *ScalingRules
	}{{"scaleUp", spec.Behavior.ScaleUp}, {"scaleDown", spec.Behavior.ScaleDown}} {
		dir, r := dr.dir, dr.r
		if r == nil {
			continue
		}
		base := "spec.behavior." + dir
		if r.StabilizationWindow < 0 || r.StabilizationWindow > time.Hour {
			add(base+".stabilizationWindowSeconds", "must be in [0s, 1h], got %s", r.StabilizationWindow)
		}
		switch r.SelectPolicy {
		case "", SelectMax, SelectMin, SelectDisabled:
		default:
			add(base+".selectPolicy", "must be Max, Min or Disabled, got %q", r.SelectPolicy)
		}
		for i, pol := range r.Policies {
			f := fmt.Sprintf("%s.policies[%d]", base, i)
			if pol.Type != PolicyPods && pol.Type != PolicyPercent {
				add(f+".type", "must be Pods or Percent, got %q", pol.Type)
			}
			if pol.Value <= 0 {
				add(f+".value", "must be positive, got %d", pol.Value)
			}
			if pol.Period <= 0 || pol.Period > 30*time.Minute {
				add(f+".periodSeconds", "must be in (0s, 30m], got %s", pol.Period)
			}
		}
	}
	return errors.Join(errs...)
}

// Check returns what is wrong with a declared rise for a target at
// percentile (0: the mean), each FieldError's Field the part of the burst at
// fault (".rise", ".every", or "" for the burst as a whole); nil when it is
// valid. Every may be zero (DefaultBurstEvery). The spec's validation and the
// command line's flags (simulate, evaluate) both read it.
func (b Burst) Check(percentile float64) []FieldError {
	var errs []FieldError
	if badFloat(b.Rise) || b.Rise <= 1 || b.Rise > MaxBurstRise {
		errs = append(errs, FieldError{".rise", fmt.Sprintf("must be in (1, %g], got %v", MaxBurstRise, b.Rise)})
	}
	if b.Every != 0 && (b.Every < MinBurstEvery || b.Every > MaxBurstEvery) {
		errs = append(errs, FieldError{".every", fmt.Sprintf("must be between %s and %s (0 means %s), got %s", MinBurstEvery, MaxBurstEvery, DefaultBurstEvery, b.Every)})
	}
	if percentile == 0 {
		errs = append(errs, FieldError{"", "needs a percentile target: a declared rise is priced by its late share, and a mean target has no budget of late requests"})
	}
	return errs
}
