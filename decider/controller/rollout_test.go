package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func TestDecideRollout(t *testing.T) {
	// ready: a Deployment, some pods do not follow, the routing can work, not yet
	// rolled for this switch.
	ready := rolloutInput{proxied: 3, mismatched: 2, deployment: true, ready: true, switchID: "pooled/4", stamp: "random/2"}
	for _, tt := range []struct {
		name string
		mod  func(*rolloutInput)
		want rolloutStep
	}{
		{"rolls once the routing can work", func(*rolloutInput) {}, stepRoll},
		{"rolls a template never rolled", func(in *rolloutInput) { in.stamp = "" }, stepRoll},
		{"rolls with mode auto", func(in *rolloutInput) { in.mode = PoolingRolloutAuto }, stepRoll},
		{"rolls when one pod of many does not follow", func(in *rolloutInput) { in.proxied, in.mismatched = 40, 1 }, stepRoll},
		{"a stamp of an earlier switch of the same routing is not this one", func(in *rolloutInput) { in.stamp = "pooled/1" }, stepRoll},
		{"every pod follows: nothing", func(in *rolloutInput) { in.mismatched = 0 }, stepNone},
		{"no pod has the sidecar: nothing", func(in *rolloutInput) { in.proxied, in.mismatched = 0, 0 }, stepNone},
		{"every pod follows, even a StatefulSet's", func(in *rolloutInput) { in.mismatched, in.deployment = 0, false }, stepNone},
		{"already rolled for this switch", func(in *rolloutInput) { in.stamp = "pooled/4" }, stepRolled},
		{"already rolled wins over opt-out", func(in *rolloutInput) { in.stamp, in.mode = "pooled/4", PoolingRolloutManual }, stepRolled},
		{"already rolled, while paused", func(in *rolloutInput) { in.stamp, in.paused = "pooled/4", true }, stepRolled},
		{"not ready: wait", func(in *rolloutInput) { in.ready = false }, stepWait},
		{"opted out", func(in *rolloutInput) { in.mode = PoolingRolloutManual }, stepManual},
		{"opted out, not ready yet", func(in *rolloutInput) { in.mode, in.ready = PoolingRolloutManual, false }, stepManual},
		{"unknown mode: no roll", func(in *rolloutInput) { in.mode = "Manual" }, stepInvalidMode},
		{"not a Deployment", func(in *rolloutInput) { in.deployment, in.stamp = false, "" }, stepNotDeployment},
		{"dry run", func(in *rolloutInput) { in.dryRun = true }, stepDryRun},
		{"paused", func(in *rolloutInput) { in.paused = true }, stepPaused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := ready
			tt.mod(&in)
			require.Equal(t, tt.want, decideRollout(in))
		})
	}
}

func TestCountPods(t *testing.T) {
	rolled := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	pod := func(proxy bool, pooling string, created time.Time, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		if proxy {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: sidecar.ContainerName})
		}
		if pooling != "" {
			p.Annotations = map[string]string{PodPoolingAnnotation: pooling}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: rolled}
		}
		return p
	}
	before, after := rolled.Add(-time.Hour), rolled.Add(time.Minute)
	pods := []*corev1.Pod{
		pod(true, "shop", before, false), // pooled
		pod(true, "", before, false),     // not pooled, older than the roll
		pod(true, "", after, false),      // not pooled, created since the roll
		pod(true, "other", after, false), // pools another workload: not shop's routing
		pod(false, "", before, false),    // no sidecar: routing does not concern it
		pod(true, "", before, true),      // terminating: not counted
		pod(true, "shop", rolled, false), // pooled, created at the roll
		pod(true, "", rolled, false),     // created at the roll's second: since the roll
	}
	require.Equal(t, podCensus{all: 7, proxied: 6, mismatched: 4, sinceRoll: 3}, countPods(pods, true, "shop", rolled))
	require.Equal(t, podCensus{all: 7, proxied: 6, mismatched: 3, sinceRoll: 2}, countPods(pods, false, "shop", rolled))
	require.Equal(t, podCensus{all: 7, proxied: 6, mismatched: 4}, countPods(pods, true, "shop", time.Time{}), "roll time unknown")
}

// TestPodPoolingAnnotationIsTheWebhooks: the controller reads the annotation the
// webhook writes.
func TestPodPoolingAnnotationIsTheWebhooks(t *testing.T) {
	require.Equal(t, inject.AnnotationPooling, PodPoolingAnnotation)
}
