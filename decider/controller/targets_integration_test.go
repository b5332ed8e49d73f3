package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// widgetCRD is a custom kind with a scale subresource and no controller of its own:
// QAS must scale it through /scale alone.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.qas.dev
spec:
  group: example.qas.dev
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
`

var widgetGVR = schema.GroupVersionResource{Group: "example.qas.dev", Version: "v1", Resource: "widgets"}

// widget installs the Widget kind (once per cluster) and creates a Widget of the
// given replicas whose scale selects app=name, with that many Ready kwok pods.
func (e *env) widget(t *testing.T, name string, replicas int64) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "widget-crd.yaml")
	require.NoError(t, os.WriteFile(path, []byte(widgetCRD), 0o600))
	require.NoError(t, e.c.InstallCRD(ctx, path))
	client := e.ctrl.Dynamic.Resource(widgetGVR).Namespace(e.ns)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.qas.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"replicas": replicas},
	}}
	e.eventually(t, "the Widget kind is served", func() bool {
		var err error
		w, err = client.Create(ctx, w, metav1.CreateOptions{})
		return err == nil
	})
	w.Object["status"] = map[string]any{"replicas": replicas, "selector": "app=" + name}
	_, err := client.UpdateStatus(ctx, w, metav1.UpdateOptions{})
	require.NoError(t, err)
	for i := int64(0); i < replicas; i++ {
		e.barePod(t, name)
	}
}

// widgetReplicas reads a Widget's spec.replicas.
func (e *env) widgetReplicas(t *testing.T, name string) int64 {
	w, err := e.ctrl.Dynamic.Resource(widgetGVR).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	n, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas")
	return n
}

// barePod creates a kwok pod labelled app=app (no controller owns it) and waits until
// it is Ready; it returns its name.
func (e *env) barePod(t *testing.T, app string) string {
	ctx := context.Background()
	p, err := e.c.Clientset().CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: app + "-", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{kubetest.Toleration()},
			Containers:  []corev1.Container{appContainer("app", "500m", "1")},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "pod "+p.Name+" Ready", func() bool {
		got, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && resources.IsReady(got)
	})
	return p.Name
}

func (e *env) queueAutoscalerOn(t *testing.T, name, apiVersion, kind, target string, dryRun bool) {
	e.queueAutoscalerWith(t, name, target, dryRun, map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": apiVersion, "kind": kind, "name": target},
	})
}

// TestScalesAnyScalableKind: the scale subresource is all QAS needs of a target: a
// StatefulSet and a custom resource (whose kind appears after the decider started)
// scale up under load like a Deployment.
func TestScalesAnyScalableKind(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	t.Run("statefulset", func(t *testing.T) {
		replicas := int32(2)
		labels := map[string]string{"app": "db"}
		_, err := e.c.Clientset().AppsV1().StatefulSets(e.ns).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas, ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{kubetest.Toleration()},
					Containers:  []corev1.Container{appContainer("db", "500m", "1")},
				}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		e.eventually(t, "the StatefulSet's pods are Ready", func() bool { return len(e.readyPods(t, "db")) == 2 })
		e.queueAutoscalerOn(t, "db", "apps/v1", "StatefulSet", "db", false)
		e.metrics.set(60, 0.05, e.clock.Now())
		d, err := e.reconcile(t, e.ctrl, "db")
		require.NoError(t, err)
		require.True(t, d.Action.Has(decide.ActionHorizontal), d.Explanation.Reason)
		require.Greater(t, d.DesiredReplicas, int32(3))
		e.eventually(t, "the StatefulSet scaled and its pods Ready", func() bool {
			sts, err := e.c.Clientset().AppsV1().StatefulSets(e.ns).Get(ctx, "db", metav1.GetOptions{})
			return err == nil && *sts.Spec.Replicas == d.DesiredReplicas && sts.Status.ReadyReplicas == d.DesiredReplicas
		})
		require.Equal(t, "StatefulSet/db", e.get(t, "db").Status.Reference)
	})

	t.Run("custom resource", func(t *testing.T) {
		e.widget(t, "gadget", 2)
		e.queueAutoscalerOn(t, "gadget", "example.qas.dev/v1", "Widget", "gadget", false)
		e.metrics.set(60, 0.05, e.clock.Now())
		d, err := e.reconcile(t, e.ctrl, "gadget")
		require.NoError(t, err, "a kind created after the controller started is found")
		require.True(t, d.Action.Has(decide.ActionHorizontal), d.Explanation.Reason)
		require.Greater(t, d.DesiredReplicas, int32(3))
		require.Equal(t, int64(d.DesiredReplicas), e.widgetReplicas(t, "gadget"), "scaled through /scale")
		qa := e.get(t, "gadget")
		require.Equal(t, "Widget/gadget", qa.Status.Reference)
		require.Equal(t, int32(2), qa.Status.CurrentReplicas)
	})
}

func (e *env) readyPods(t *testing.T, app string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range e.pods(t, app) {
		if resources.IsReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

// recordingSink keeps every decision the controller records.
type recordingSink struct {
	mu        sync.Mutex
	decisions []recorded
}

type recorded struct {
	name   string
	d      decide.Decision
	dryRun bool
}

func (s *recordingSink) RecordDecision(_ context.Context, of measurement.DecisionOf, d decide.Decision, dryRun bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, recorded{of.Name, d, dryRun})
	return nil
}

// since returns the decisions for name recorded after the first n.
func (s *recordingSink) since(n int, name string) []decide.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []decide.Decision
	for _, r := range s.decisions[min(n, len(s.decisions)):] {
		if r.name == name {
			out = append(out, r.d)
		}
	}
	return out
}

func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.decisions)
}

// TestWatchesTriggerReconciles: with no cycle tick at all, the controller decides
// again when one of a target's pods becomes Ready or goes away, and when the target
// itself changes (a Widget through /scale, a Deployment scaled by hand): the watches
// queue the QueueAutoscaler.
func TestWatchesTriggerReconciles(t *testing.T) {
	e := setup(t)
	sink := &recordingSink{}
	ctrl := e.startController(t, e.c.Config, sink, func(c *controller.Controller) { c.EventDelay = 50 * time.Millisecond })
	e.widget(t, "watched", 2)
	e.deployment(t, "plain", 2)
	e.queueAutoscalerOn(t, "watched", "example.qas.dev/v1", "Widget", "watched", true)
	e.queueAutoscalerOn(t, "plain", "apps/v1", "Deployment", "plain", true)
	e.metrics.set(10, 0.05, e.clock.Now())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ctrl.Run(ctx, nil, controller.Hooks{}) }() // a nil channel never ticks
	t.Cleanup(func() { cancel(); <-done })

	decided := func(what, name string, from int, ok func(decide.Decision) bool) {
		t.Helper()
		e.eventually(t, what, func() bool {
			for _, d := range sink.since(from, name) {
				if ok(d) {
					return true
				}
			}
			return false
		})
	}
	decided("the first cycle decides", "watched", 0, func(d decide.Decision) bool { return d.Explanation.ReadyReplicas == 2 })
	decided("the first cycle decides", "plain", 0, func(d decide.Decision) bool { return d.Explanation.ReadyReplicas == 2 })

	n := sink.count()
	third := e.barePod(t, "watched")
	decided("a pod turning Ready is decided on", "watched", n, func(d decide.Decision) bool { return d.Explanation.ReadyReplicas == 3 })

	n = sink.count()
	zero := int64(0)
	require.NoError(t, e.c.Clientset().CoreV1().Pods(e.ns).Delete(context.Background(), third, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	decided("a pod going away is decided on", "watched", n, func(d decide.Decision) bool { return d.Explanation.ReadyReplicas == 2 })

	n = sink.count()
	widgets := ctrl.Dynamic.Resource(widgetGVR).Namespace(e.ns)
	_, err := widgets.Patch(context.Background(), "watched", "application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale")
	require.NoError(t, err)
	decided("a Widget scaled by hand is decided on", "watched", n, func(d decide.Decision) bool { return d.Explanation.CurrentReplicas == 5 })

	n = sink.count()
	_, err = e.c.Clientset().AppsV1().Deployments(e.ns).UpdateScale(context.Background(), "plain",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: e.ns, ResourceVersion: e.scaleVersion(t, "plain")}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	decided("a Deployment scaled by hand is decided on", "plain", n, func(d decide.Decision) bool { return d.Explanation.CurrentReplicas == 4 })
}

func (e *env) scaleVersion(t *testing.T, deployment string) string {
	sc, err := e.c.Clientset().AppsV1().Deployments(e.ns).GetScale(context.Background(), deployment, metav1.GetOptions{})
	require.NoError(t, err)
	return sc.ResourceVersion
}
