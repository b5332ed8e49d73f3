package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
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

// rollFixture is a pooled QueueAutoscaler whose switch is recorded, its Deployment
// (one pod with the sidecar that does not pool), on a fake clientset.
func rollFixture(t *testing.T) (*Controller, *kubefake.Clientset, *record.FakeRecorder, *v1alpha1.QueueAutoscaler, []*corev1.Pod) {
	t.Helper()
	qa := &v1alpha1.QueueAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "qa-uid", Generation: 3,
			Annotations: map[string]string{RoutingSwitchAnnotation: "pooled/3"}},
		Spec: v1alpha1.QueueAutoscalerSpec{Routing: "pooled",
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
	kube := kubefake.NewClientset(dep)
	rec := record.NewFakeRecorder(10)
	c := &Controller{Kube: kube, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC))}
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: sidecar.ContainerName}}}}}
	return c, kube, rec, qa, pods
}

var deploymentTarget = target{resource: appsv1.SchemeGroupVersion.WithResource("deployments")}

// TestRollReportsAConflictThatPersists: a roll whose every write meets another
// writer's fails after client-go's retries, as a FailedRollout condition and a
// Warning Event, and the next cycle tries again.
func TestRollReportsAConflictThatPersists(t *testing.T) {
	c, kube, rec, qa, pods := rollFixture(t)
	updates := 0
	kube.PrependReactor("update", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		updates++
		return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "web", errors.New("the object has been modified"))
	})
	out := c.reconcileRollout(t.Context(), qa, deploymentTarget, pods, poolingOutcome{active: true, ready: 1, replicas: 2}, false)
	require.Equal(t, retry.DefaultRetry.Steps, updates, "client-go's retries, then the error")
	require.Equal(t, ReasonFailedRollout, out.reason)
	require.Equal(t, metav1.ConditionFalse, out.status)
	require.Contains(t, out.message, "rolling Deployment shop/web failed (retried next cycle)")
	require.Contains(t, out.message, "the object has been modified")
	require.Contains(t, <-rec.Events, "Warning FailedRollout")
}

// TestRollWrittenByAnotherDecider: when the fresh read of a retry finds the template
// already rolled for the switch (another decider did it), nothing more is written and
// no second RolledForRouting Event is made.
func TestRollWrittenByAnotherDecider(t *testing.T) {
	c, kube, rec, qa, pods := rollFixture(t)
	updates := 0
	kube.PrependReactor("update", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		updates++
		stamped := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}}
		stamped.Spec.Template.Annotations = map[string]string{RoutingRolloutAnnotation: "pooled/3", RoutingRestartedAtAnnotation: "2026-11-26T03:59:59Z"}
		require.NoError(t, kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), stamped, "shop"))
		return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "web", errors.New("the object has been modified"))
	})
	out := c.reconcileRollout(t.Context(), qa, deploymentTarget, pods, poolingOutcome{active: true, ready: 1, replicas: 2}, false)
	require.Equal(t, 1, updates)
	require.Equal(t, ReasonRolled, out.reason, out.message)
	select {
	case ev := <-rec.Events:
		t.Fatalf("unexpected Event %q", ev)
	default:
	}
}
