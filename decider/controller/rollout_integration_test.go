package controller_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// proxiedDeployment creates a Deployment of kwok pods that have the qas-proxy
// sidecar, as the webhook leaves them; pooledFor, when set, is the webhook's pooling
// annotation on them (pods created while their workload pools). It waits for the
// replicas to be Ready.
// pooledProxied is a Deployment of replicas pods with the sidecar (pooling for
// pooledFor, "" for none), under a QueueAutoscaler with routing pooled, a front
// configured and metrics measured: a routing switch to pooled, not yet reconciled.
func (e *env) pooledProxied(t *testing.T, name string, replicas int32, pooledFor string) {
	t.Helper()
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	e.proxiedDeployment(t, name, replicas, pooledFor)
	e.queueAutoscalerWith(t, name, name, false, map[string]any{"routing": "pooled"})
	e.metrics.set(10, 0.05, e.clock.Now())
}

func (e *env) proxiedDeployment(t *testing.T, name string, replicas int32, pooledFor string) {
	t.Helper()
	labels := map[string]string{"app": name, sidecar.InjectLabel: sidecar.InjectValue}
	annotations := map[string]string{sidecar.InjectedAnnotation: "true"}
	if pooledFor != "" {
		annotations[controller.PodPoolingAnnotation] = pooledFor
	}
	one := intstr.FromInt32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one, MaxSurge: &one}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{kubetest.Toleration()},
					Containers: []corev1.Container{
						appContainer("app", "100m", ""),
						{Name: sidecar.ContainerName, Image: "example/qas-proxy:1"},
					},
				},
			},
		},
	}
	_, err := e.c.Clientset().AppsV1().Deployments(e.ns).Create(context.Background(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitReplicas(t, name, replicas)
}

func (e *env) getDeployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d, err := e.c.Clientset().AppsV1().Deployments(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

// frontReady waits for workload's front to have a ready replica.
func (e *env) frontReady(t *testing.T, workload string) {
	t.Helper()
	e.eventually(t, "the front has a ready replica", func() bool {
		d, err := e.c.Clientset().AppsV1().Deployments(e.ns).Get(context.Background(), sidecar.FrontName(workload), metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas > 0
	})
}

// switchID is what the controller records for qa's current routing.
func (e *env) switchID(t *testing.T, name string) string {
	t.Helper()
	qa := e.get(t, name)
	return qa.Annotations[controller.RoutingSwitchAnnotation]
}

// TestPooledSwitchRollsTheDeploymentOnce: pods created before routing became pooled
// are replaced through one roll of their Deployment, made once the front is ready
// (never before), never again for the same switch: not on the next cycle, not by a new
// controller instance, not when the replacement pods still do not pool (here there is
// no webhook to pool them, which the condition says).
func TestPooledSwitchRollsTheDeploymentOnce(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.pooledProxied(t, "shop", 2, "")
	before := e.getDeployment(t, "shop")

	// The front was just created, not ready: no roll yet.
	_, err := e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	require.Equal(t, "pooled/1", e.switchID(t, "shop"))
	c := condition(e.get(t, "shop"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonWaitingToRoll, c.Reason, c.Message)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Contains(t, c.Message, "2 of 2 pods with the qas-proxy sidecar do not pool")
	require.Equal(t, before.Generation, e.getDeployment(t, "shop").Generation, "not rolled before the front is ready")

	e.frontReady(t, "shop")
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	rolled := e.getDeployment(t, "shop")
	require.Equal(t, before.Generation+1, rolled.Generation, "rolled once")
	require.Equal(t, "pooled/1", rolled.Spec.Template.Annotations[controller.RoutingRolloutAnnotation])
	require.NotEmpty(t, rolled.Spec.Template.Annotations[controller.RoutingRestartedAtAnnotation])
	require.Equal(t, before.Spec.Template.Spec, rolled.Spec.Template.Spec, "only the template's annotations change")
	require.Equal(t, before.Spec.Strategy, rolled.Spec.Strategy, "the Deployment's own strategy replaces the pods")
	c = condition(e.get(t, "shop"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonRolled, c.Reason, c.Message)
	require.Contains(t, c.Message, "rolled Deployment shop at ")
	require.Contains(t, c.Message, "for routing switch pooled/1")
	events := e.events(t, "RolledForRouting")
	require.Len(t, events, 1)
	require.Contains(t, events[0].Message, "because routing is now pooled and 2 of 2 pods with the qas-proxy sidecar do not pool")
	require.Equal(t, int32(1), events[0].Count)

	// The Deployment controller replaces the pods (a new ReplicaSet).
	e.eventually(t, "the rollout finishes", func() bool {
		d, err := cs.AppsV1().Deployments(e.ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 2 &&
			d.Status.Replicas == 2 && d.Status.ReadyReplicas == 2
	})
	sets, err := cs.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=shop"})
	require.NoError(t, err)
	require.Len(t, sets.Items, 2, "the old ReplicaSet and the rolled one")

	// Without a webhook the new pods do not pool either: no second roll, by this
	// controller or by a new one (a restart, a new leader); the condition says why.
	for i, ctrl := range []*controller.Controller{e.ctrl, e.ctrl, e.newController(t)} {
		_, err = e.reconcile(t, ctrl, "shop")
		require.NoError(t, err)
		require.Equal(t, rolled.Generation, e.getDeployment(t, "shop").Generation, "cycle %d rolled again", i)
	}
	c = condition(e.get(t, "shop"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonRolled, c.Reason, c.Message)
	require.Contains(t, c.Message, "2 of 2 pods with the qas-proxy sidecar still do not pool")
	require.Contains(t, c.Message, "2 of them were created since the roll, so the webhook did not give them the routing")
	require.Len(t, e.events(t, "RolledForRouting"), 1)
	require.Equal(t, int32(1), e.events(t, "RolledForRouting")[0].Count)

	// Once every pod pools (here annotated as the webhook would have), the condition
	// is True and still says the controller rolled, for which switch.
	pods, err := cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=shop"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		patch := []byte(`{"metadata":{"annotations":{"` + controller.PodPoolingAnnotation + `":"shop"}}}`)
		_, err := cs.CoreV1().Pods(e.ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	c = condition(e.get(t, "shop"), controller.PodsFollowRoutingCondition)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Equal(t, controller.ReasonRolled, c.Reason)
	require.Contains(t, c.Message, "for routing switch pooled/1")
	require.Contains(t, c.Message, "now: all 2 pods with the qas-proxy sidecar pool")
	require.Equal(t, rolled.Generation, e.getDeployment(t, "shop").Generation)
}

// TestRandomSwitchRollsPodsThatStillPool: pods that all pool already (created after
// the switch) are not rolled; going back to random removes the pooling objects and
// rolls the Deployment once, so that no pod keeps flags naming the deleted Secret.
func TestRandomSwitchRollsPodsThatStillPool(t *testing.T) {
	e := setup(t)
	e.pooledProxied(t, "cart", 2, "cart")
	gen := e.getDeployment(t, "cart").Generation

	_, err := e.reconcile(t, e.ctrl, "cart")
	require.NoError(t, err)
	e.frontReady(t, "cart")
	_, err = e.reconcile(t, e.ctrl, "cart")
	require.NoError(t, err)
	require.Equal(t, gen, e.getDeployment(t, "cart").Generation, "every pod pools already: no roll")
	c := condition(e.get(t, "cart"), controller.PodsFollowRoutingCondition)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Equal(t, controller.ReasonPodsMatch, c.Reason)
	require.Contains(t, c.Message, "all 2 pods with the qas-proxy sidecar pool")

	e.setRouting(t, "cart", "random")
	_, err = e.reconcile(t, e.ctrl, "cart")
	require.NoError(t, err)
	require.Empty(t, e.poolingVersions(t, "cart"), "the pooling objects are removed")
	randomID := e.switchID(t, "cart")
	require.True(t, strings.HasPrefix(randomID, "random/"), randomID)
	rolled := e.getDeployment(t, "cart")
	require.Equal(t, gen+1, rolled.Generation, "rolled once")
	require.Equal(t, randomID, rolled.Spec.Template.Annotations[controller.RoutingRolloutAnnotation])
	c = condition(e.get(t, "cart"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonRolled, c.Reason, c.Message)
	require.Contains(t, c.Message, "for routing switch "+randomID)
	require.Contains(t, c.Message, "pods with the qas-proxy sidecar still pool")
	require.Len(t, e.events(t, "RolledForRouting"), 1)

	// The replacement pods still carry the annotation (the test's template has it):
	// no second roll.
	_, err = e.reconcile(t, e.newController(t), "cart")
	require.NoError(t, err)
	require.Equal(t, rolled.Generation, e.getDeployment(t, "cart").Generation)
}

// TestManualRolloutOptOut: with qas.dev/pooling-rollout: manual the controller rolls
// nothing and tells the user, once, to restart the pods themselves.
func TestManualRolloutOptOut(t *testing.T) {
	e := setup(t)
	e.pooledProxied(t, "api", 2, "")
	e.annotate(t, "api", controller.PoolingRolloutAnnotation, controller.PoolingRolloutManual)
	gen := e.getDeployment(t, "api").Generation

	_, err := e.reconcile(t, e.ctrl, "api")
	require.NoError(t, err)
	e.frontReady(t, "api")
	for range 2 {
		_, err = e.reconcile(t, e.ctrl, "api")
		require.NoError(t, err)
	}
	d := e.getDeployment(t, "api")
	require.Equal(t, gen, d.Generation, "not rolled")
	require.Empty(t, d.Spec.Template.Annotations[controller.RoutingRolloutAnnotation])
	c := condition(e.get(t, "api"), controller.PodsFollowRoutingCondition)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, controller.ReasonManualRollout, c.Reason)
	require.Contains(t, c.Message, "kubectl rollout restart deployment/api -n "+e.ns)
	events := e.events(t, controller.ReasonManualRollout)
	require.Len(t, events, 1)
	require.Equal(t, int32(1), events[0].Count, "announced once, not every cycle")
	require.Empty(t, e.eventsNow(t, "RolledForRouting"))
}

// TestRollRetriesOnConflict: a write that meets another writer's (here a user's label,
// between the controller's read and its write) is tried again on a fresh read, and
// keeps the other writer's change.
func TestRollRetriesOnConflict(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.pooledProxied(t, "web", 1, "")
	_, err := e.reconcile(t, e.ctrl, "web")
	require.NoError(t, err)
	e.frontReady(t, "web")

	var writes atomic.Int32
	controller.SetRollHook(e.ctrl, func() {
		if writes.Add(1) > 1 {
			return
		}
		// The Deployment controller writes the object too: this writer retries as well.
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := cs.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Labels = map[string]string{"team": "payments"}
			_, err = cs.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		}))
	})
	_, err = e.reconcile(t, e.ctrl, "web")
	require.NoError(t, err)
	// At least twice: the Deployment controller, writing its status, may meet the
	// retry too.
	require.GreaterOrEqual(t, writes.Load(), int32(2), "the conflicting write was tried again")
	d := e.getDeployment(t, "web")
	require.Equal(t, "payments", d.Labels["team"], "the other writer's change is kept")
	require.Equal(t, e.switchID(t, "web"), d.Spec.Template.Annotations[controller.RoutingRolloutAnnotation])
	c := condition(e.get(t, "web"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonRolled, c.Reason, c.Message)
}

// eventsNow lists the Events with reason at once (events waits for one to appear).
func (e *env) eventsNow(t *testing.T, reason string) []corev1.Event {
	t.Helper()
	list, err := e.c.Clientset().CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}

// TestNoRollForAStatefulSet: the controller rolls only Deployments; for another
// target it says which pods keep the old routing and how to restart them.
func TestNoRollForAStatefulSet(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	labels := map[string]string{"app": "db", sidecar.InjectLabel: sidecar.InjectValue}
	replicas := int32(2)
	_, err := cs.AppsV1().StatefulSets(e.ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Tolerations: []corev1.Toleration{kubetest.Toleration()},
				Containers:  []corev1.Container{appContainer("app", "100m", ""), {Name: sidecar.ContainerName, Image: "example/qas-proxy:1"}},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "the StatefulSet's pods are Ready", func() bool { return len(e.readyPods(t, "db")) == 2 })
	e.queueAutoscalerWith(t, "db", "db", false, map[string]any{
		"routing":        "pooled",
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
	})
	e.metrics.set(10, 0.05, e.clock.Now())
	_, err = e.reconcile(t, e.ctrl, "db")
	require.NoError(t, err)
	e.frontReady(t, "db")
	_, err = e.reconcile(t, e.ctrl, "db")
	require.NoError(t, err)

	sts, err := cs.AppsV1().StatefulSets(e.ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), sts.Generation, "not rolled")
	c := condition(e.get(t, "db"), controller.PodsFollowRoutingCondition)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, controller.ReasonNotADeployment, c.Reason, c.Message)
	require.Contains(t, c.Message, "2 of 2 pods with the qas-proxy sidecar do not pool")
	require.Contains(t, c.Message, "kubectl rollout restart statefulset/db -n "+e.ns)
	events := e.events(t, controller.ReasonNotADeployment)
	require.Len(t, events, 1)
}
