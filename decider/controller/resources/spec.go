package resources

import (
	"fmt"
	"time"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// Spec converts the resource's spec into the decision engine's Spec, applying
// the same defaults the CRD schema applies (so an object that bypassed defaulting, such
// as one built in a test, means the same thing), and validates the result. Errors name
// the field at fault in the resource's terms.
func Spec(s v1alpha1.QueueAutoscalerSpec) (decide.Spec, error) {
	target, err := parseDuration("spec.target.latency", s.Target.Latency)
	if err != nil {
		return decide.Spec{}, err
	}
	out := decide.Spec{
		MinReplicas:  s.MinReplicas,
		MaxReplicas:  s.MaxReplicas,
		Target:       target,
		Tolerance:    s.Tolerance,
		Concurrency:  int(s.Concurrency),
		Model:        decide.ModelKind(s.Model),
		Routing:      decide.Routing(s.Routing),
		ServiceModel: decide.ServiceModel(s.ServiceModel),
	}
	if out.MinReplicas == 0 {
		out.MinReplicas = 1
	}
	if out.Concurrency == 0 {
		out.Concurrency = 1
	}
	if out.Routing == "" {
		out.Routing = decide.RoutingRandom
	}
	if out.Model == "" {
		out.Model = decide.ModelPerPod
		if out.Routing != decide.RoutingRandom {
			out.Model = decide.ModelPooled
		}
	}
	if out.ServiceModel == "" {
		out.ServiceModel = decide.ServiceMMc
	}
	if s.Target.Percentile != nil {
		out.Percentile = *s.Target.Percentile
	}
	if v := s.Vertical; v != nil {
		out.Vertical.Enabled = v.Enabled
		if v.MinCPU != nil {
			out.Vertical.MinCPU = v.MinCPU.MilliValue()
		}
		if v.MaxCPU != nil {
			out.Vertical.MaxCPU = v.MaxCPU.MilliValue()
		}
		if v.PodOverheadCPU != nil {
			out.Vertical.PodOverheadCPU = v.PodOverheadCPU.MilliValue()
		}
	}
	if m := s.Migration; m != nil {
		out.Migration.Enabled = m.Enabled
		out.Migration.NodeThreshold = m.NodeThreshold
		out.Migration.Mover = decide.Mover(m.Mover)
		out.Migration.AllowLocalStorage = m.AllowLocalStorage
		if out.Migration.NodeThreshold == 0 {
			out.Migration.NodeThreshold = 0.85
		}
		if out.Migration.Mover == "" {
			out.Migration.Mover = decide.MoverOwn
		}
		out.Migration.Cooldown = decide.DefaultMigrationCooldown
		if m.Cooldown != "" {
			if out.Migration.Cooldown, err = parseDuration("spec.migration.cooldown", m.Cooldown); err != nil {
				return decide.Spec{}, err
			}
		}
	}
	if b := s.Burst; b != nil {
		out.Burst.Rise = b.Rise
		if b.Every != "" {
			if out.Burst.Every, err = parseDuration("spec.burst.every", b.Every); err != nil {
				return decide.Spec{}, err
			}
		}
	}
	if p := s.Predictive; p != nil {
		out.Predictive.Enabled = p.Enabled
		if p.LeadOverride != "" {
			if out.Predictive.LeadOverride, err = parseDuration("spec.predictive.leadOverride", p.LeadOverride); err != nil {
				return decide.Spec{}, err
			}
		}
	}
	if s.MaxDataAge != "" {
		if out.MaxDataAge, err = parseDuration("spec.maxDataAge", s.MaxDataAge); err != nil {
			return decide.Spec{}, err
		}
	}
	if b := s.Behavior; b != nil {
		out.Behavior.ScaleUp = rules(b.ScaleUp, decide.DefaultScaleUp)
		out.Behavior.ScaleDown = rules(b.ScaleDown, decide.DefaultScaleDown)
	}
	if err := decide.Validate(out); err != nil {
		return decide.Spec{}, fmt.Errorf("invalid QueueAutoscaler spec: %w", err)
	}
	return out, nil
}

// rules overlays the user's rules on the direction's defaults, field by field, as the
// HPA does.
func rules(in *v1alpha1.ScalingRules, defaults func() decide.ScalingRules) *decide.ScalingRules {
	if in == nil {
		return nil
	}
	out := defaults()
	if in.StabilizationWindowSeconds != nil {
		out.StabilizationWindow = time.Duration(*in.StabilizationWindowSeconds) * time.Second
	}
	if in.SelectPolicy != "" {
		out.SelectPolicy = decide.SelectPolicy(in.SelectPolicy)
	}
	if len(in.Policies) > 0 {
		out.Policies = nil
		for _, p := range in.Policies {
			out.Policies = append(out.Policies, decide.ScalingPolicy{
				Type: decide.PolicyType(p.Type), Value: p.Value, Period: time.Duration(p.PeriodSeconds) * time.Second,
			})
		}
	}
	return &out
}

func parseDuration(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration such as 200ms: %w", field, v, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s: %q must be positive", field, v)
	}
	return d, nil
}
