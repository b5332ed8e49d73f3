package resources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

func baseSpec() v1alpha1.QueueAutoscalerSpec {
	return v1alpha1.QueueAutoscalerSpec{
		ScaleTargetRef: v1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MaxReplicas:    10,
		Target:         v1alpha1.LatencyTarget{Latency: "200ms", Percentile: ptr(95.0)},
	}
}

func TestSpec(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.QueueAutoscalerSpec)
		check   func(*testing.T, decide.Spec)
		wantErr string
	}{
		{
			name: "defaults match the CRD's",
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, int32(1), s.MinReplicas)
				require.Equal(t, 200*time.Millisecond, s.Target)
				require.Equal(t, 95.0, s.Percentile)
				require.Equal(t, 1, s.Concurrency)
				require.Equal(t, decide.ModelPerPod, s.Model)
				require.Equal(t, decide.RoutingRandom, s.Routing)
				require.Equal(t, decide.ServiceMMc, s.ServiceModel)
				require.Nil(t, s.Behavior.ScaleUp)
			},
		},
		{
			name: "mean target without percentile",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) {
				s.Target.Percentile = nil
			},
			check: func(t *testing.T, s decide.Spec) { require.Zero(t, s.Percentile) },
		},
		{
			name: "levers",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) {
				s.Vertical = &v1alpha1.VerticalSpec{Enabled: true, MinCPU: ptr(resource.MustParse("250m")), MaxCPU: ptr(resource.MustParse("2"))}
				s.Migration = &v1alpha1.MigrationSpec{Enabled: true}
				s.Predictive = &v1alpha1.PredictiveSpec{Enabled: true, LeadOverride: "45s"}
			},
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, int64(250), s.Vertical.MinCPU)
				require.Equal(t, int64(2000), s.Vertical.MaxCPU)
				require.Equal(t, 0.85, s.Migration.NodeThreshold)
				require.Equal(t, decide.MoverOwn, s.Migration.Mover)
				require.Equal(t, 5*time.Minute, s.Migration.Cooldown)
				require.Equal(t, 45*time.Second, s.Predictive.LeadOverride)
			},
		},
		{
			name: "behaviour overlays the HPA defaults",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) {
				s.Behavior = &v1alpha1.Behavior{ScaleDown: &v1alpha1.ScalingRules{StabilizationWindowSeconds: ptr(int32(60))}}
			},
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, time.Minute, s.Behavior.ScaleDown.StabilizationWindow)
				require.Equal(t, decide.DefaultScaleDown().Policies, s.Behavior.ScaleDown.Policies)
				require.Nil(t, s.Behavior.ScaleUp)
			},
		},
		{name: "bad latency", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Target.Latency = "fast" }, wantErr: `spec.target.latency: "fast" is not a duration`},
		{name: "zero latency", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Target.Latency = "0s" }, wantErr: "must be positive"},
		{
			name: "migration cooldown",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) {
				s.Migration = &v1alpha1.MigrationSpec{Enabled: true, Cooldown: "90s"}
			},
			check: func(t *testing.T, s decide.Spec) { require.Equal(t, 90*time.Second, s.Migration.Cooldown) },
		},
		{
			name:   "max data age",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.MaxDataAge = "30s" },
			check:  func(t *testing.T, s decide.Spec) { require.Equal(t, 30*time.Second, s.MaxDataAge) },
		},
		{name: "bad max data age", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.MaxDataAge = "old" }, wantErr: `spec.maxDataAge: "old" is not a duration`},
		{
			name:   "least-request routing defaults to the pooled layout",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Routing = "leastRequest" },
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, decide.RoutingLeastRequest, s.Routing)
				require.Equal(t, decide.ModelPooled, s.Model)
			},
		},
		{
			name:   "an explicit model wins over the routing's default",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Routing = "pooled"; s.Model = "per-pod" },
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, decide.RoutingPooled, s.Routing)
				require.Equal(t, decide.ModelPerPod, s.Model)
			},
		},
		{
			name:    "unknown routing",
			mutate:  func(s *v1alpha1.QueueAutoscalerSpec) { s.Routing = "roundRobin" },
			wantErr: "spec.routing",
		},
		{name: "bad cooldown", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Migration = &v1alpha1.MigrationSpec{Cooldown: "a while"} }, wantErr: `spec.migration.cooldown: "a while" is not a duration`},
		{
			name:   "a declared rise",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Burst = &v1alpha1.BurstSpec{Rise: 5, Every: "30m"} },
			check: func(t *testing.T, s decide.Spec) {
				require.Equal(t, decide.Burst{Rise: 5, Every: 30 * time.Minute}, s.Burst)
			},
		},
		{
			name:   "a declared rise's default period is the engine's",
			mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Burst = &v1alpha1.BurstSpec{Rise: 3} },
			check:  func(t *testing.T, s decide.Spec) { require.Equal(t, decide.Burst{Rise: 3}, s.Burst) },
		},
		{name: "bad burst period", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Burst = &v1alpha1.BurstSpec{Rise: 3, Every: "often"} }, wantErr: `spec.burst.every: "often" is not a duration`},
		{name: "no rise", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Burst = &v1alpha1.BurstSpec{Rise: 1, Every: "1h"} }, wantErr: "spec.burst.rise"},
		{name: "a rise with a mean target", mutate: func(s *v1alpha1.QueueAutoscalerSpec) {
			s.Target.Percentile = nil
			s.Burst = &v1alpha1.BurstSpec{Rise: 3}
		}, wantErr: "spec.burst: needs a percentile target"},
		{name: "bad lead", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.Predictive = &v1alpha1.PredictiveSpec{LeadOverride: "soon"} }, wantErr: "spec.predictive.leadOverride"},
		{name: "min above max", mutate: func(s *v1alpha1.QueueAutoscalerSpec) { s.MinReplicas = 11 }, wantErr: "invalid QueueAutoscaler spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := baseSpec()
			if tt.mutate != nil {
				tt.mutate(&s)
			}
			got, err := Spec(s)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, got)
		})
	}
}
