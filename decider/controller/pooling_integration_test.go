package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/pool/endpoints"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// frontConfig is the front the pooling tests run: kwok pods (the toleration).
func frontConfig(image string) controller.FrontConfig {
	cfg := controller.DefaultFrontConfig()
	cfg.Image = image
	cfg.Tolerations = []corev1.Toleration{kubetest.Toleration()}
	return cfg
}

// poolingVersions are the resource versions of the five pooling objects of workload.
func (e *env) poolingVersions(t *testing.T, workload string) map[string]string {
	t.Helper()
	ctx := context.Background()
	cs := e.c.Clientset()
	pool, front := sidecar.PoolingName(workload), sidecar.FrontName(workload)
	out := map[string]string{}
	for kind, get := range map[string]func() (metav1.Object, error){
		"Secret": func() (metav1.Object, error) { return cs.CoreV1().Secrets(e.ns).Get(ctx, pool, metav1.GetOptions{}) },
		"Role":   func() (metav1.Object, error) { return cs.RbacV1().Roles(e.ns).Get(ctx, pool, metav1.GetOptions{}) },
		"RoleBinding": func() (metav1.Object, error) {
			return cs.RbacV1().RoleBindings(e.ns).Get(ctx, pool, metav1.GetOptions{})
		},
		"Deployment": func() (metav1.Object, error) {
			return cs.AppsV1().Deployments(e.ns).Get(ctx, front, metav1.GetOptions{})
		},
		"Service": func() (metav1.Object, error) { return cs.CoreV1().Services(e.ns).Get(ctx, front, metav1.GetOptions{}) },
	} {
		obj, err := get()
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err)
		if obj.GetDeletionTimestamp() != nil {
			continue // on its way out (foreground deletion of the Deployment)
		}
		out[kind] = obj.GetResourceVersion()
	}
	return out
}

func (e *env) setRouting(t *testing.T, name, routing string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"routing": routing}})
	_, err := e.ctrl.Dynamic.Resource(controller.GVR).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

func (e *env) annotate(t *testing.T, name, key, value string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	_, err := e.ctrl.Dynamic.Resource(controller.GVR).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

func (e *env) poolingKey(t *testing.T, workload string) map[string][]byte {
	t.Helper()
	s, err := e.c.Clientset().CoreV1().Secrets(e.ns).Get(context.Background(), sidecar.PoolingName(workload), metav1.GetOptions{})
	require.NoError(t, err)
	return s.Data
}

// TestPoolingFollowsRouting: a QueueAutoscaler with routing pooled gets its front
// (Deployment and Service), its key and the Role its pods' sidecars need, owned by it;
// a second cycle changes nothing; the sidecars' ServiceAccount can then find the
// front's ready replicas through the EndpointSlices, and nothing more; the key is
// rewritten only when asked; a new front image rolls the front; routing random
// removes it all.
func TestPoolingFollowsRouting(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	e.deployment(t, "shop", 2)
	e.queueAutoscalerWith(t, "shop", "shop", false, map[string]any{"routing": "pooled"})
	e.metrics.set(10, 0.05, e.clock.Now())
	_, err := e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	qa := e.get(t, "shop")
	owned := func(o metav1.Object) {
		t.Helper()
		ref := metav1.GetControllerOf(o)
		require.NotNil(t, ref, "%s has no controller", o.GetName())
		require.Equal(t, qa.UID, ref.UID)
		require.Equal(t, "QueueAutoscaler", ref.Kind)
	}

	secret, err := cs.CoreV1().Secrets(e.ns).Get(ctx, "qas-pooling-shop", metav1.GetOptions{})
	require.NoError(t, err)
	owned(secret)
	require.Len(t, secret.Data[sidecar.PoolKeyItem], 32)
	require.NotEqual(t, make([]byte, 32), secret.Data[sidecar.PoolKeyItem])
	key := secret.Data[sidecar.PoolKeyItem]

	role, err := cs.RbacV1().Roles(e.ns).Get(ctx, "qas-pooling-shop", metav1.GetOptions{})
	require.NoError(t, err)
	owned(role)
	require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}, role.Rules)
	binding, err := cs.RbacV1().RoleBindings(e.ns).Get(ctx, "qas-pooling-shop", metav1.GetOptions{})
	require.NoError(t, err)
	owned(binding)
	require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "qas-pooling-shop"}, binding.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "default"}}, binding.Subjects, "the workload's pods run as default")

	dep, err := cs.AppsV1().Deployments(e.ns).Get(ctx, "qas-front-shop", metav1.GetOptions{})
	require.NoError(t, err)
	owned(dep)
	require.Equal(t, int32(2), *dep.Spec.Replicas)
	pod := dep.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	ct := pod.Containers[0]
	require.Equal(t, "example/qas-proxy:1", ct.Image)
	require.Equal(t, []string{"--mode=front", "--workload=shop", "--pool-secret-file=/var/run/qas/pool/key", "--listen=:9902", "--admin-listen=:9901"}, ct.Args)
	require.Equal(t, []corev1.VolumeMount{{Name: sidecar.PoolKeyVolume, MountPath: "/var/run/qas/pool", ReadOnly: true}}, ct.VolumeMounts)
	require.Equal(t, "qas-pooling-shop", pod.Volumes[0].Secret.SecretName)
	require.Equal(t, "100m", ct.Resources.Requests.Cpu().String())
	require.Equal(t, "/readyz", ct.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, intstr.FromString("qas-admin"), ct.ReadinessProbe.HTTPGet.Port)
	require.False(t, *pod.AutomountServiceAccountToken, "the front reads nothing from the API server")

	svc, err := cs.CoreV1().Services(e.ns).Get(ctx, "qas-front-shop", metav1.GetOptions{})
	require.NoError(t, err)
	owned(svc)
	require.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	require.Equal(t, dep.Spec.Selector.MatchLabels, svc.Spec.Selector)
	require.Equal(t, "qas-pool", svc.Spec.Ports[0].Name)
	require.Equal(t, int32(9902), svc.Spec.Ports[0].Port)
	require.NotEmpty(t, e.events(t, "FrontCreated"))

	// The front's kwok replicas turn Ready; the next cycle says so, and writes nothing.
	e.eventually(t, "the front's replicas are ready", func() bool {
		d, err := cs.AppsV1().Deployments(e.ns).Get(ctx, "qas-front-shop", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 2
	})
	before := e.poolingVersions(t, "shop")
	require.Len(t, before, 5)
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	require.Equal(t, before, e.poolingVersions(t, "shop"), "a second cycle rewrites nothing")
	c := condition(e.get(t, "shop"), controller.PoolingReadyCondition)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Equal(t, "FrontReady", c.Reason)
	require.Contains(t, c.Message, "2 of 2 replicas ready")

	// The workload's sidecars (ServiceAccount default) find both front replicas on
	// the pool port, through the EndpointSlice controller's slices.
	saCfg, err := e.c.ServiceAccountConfig(ctx, e.ns, "default")
	require.NoError(t, err)
	saClient, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := endpoints.New(wctx, saClient, e.ns, "qas-front-shop", sidecar.PoolPortName, endpoints.Options{})
	require.NoError(t, err)
	require.True(t, w.WaitForSync(wctx))
	var want []string
	e.eventually(t, "the sidecar's watcher lists the front's two replicas", func() bool {
		want = nil
		pods, err := cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: sidecar.FrontOfLabel + "=shop"})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				want = append(want, p.Status.PodIP+":9902")
			}
		}
		slices.Sort(want)
		return len(want) == 2 && slices.Equal(w.Fronts(), want)
	})
	require.True(t, w.State().Connected)

	// What the sidecars' ServiceAccount may do: read EndpointSlices here, nothing else.
	user := "system:serviceaccount:" + e.ns + ":default"
	other := e.c.Namespace(t)
	for _, tt := range []struct {
		attrs authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "list", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "watch", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "get", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "list", Namespace: other}, false},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "list"}, false},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "update", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "delete", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: e.ns, Name: "qas-pooling-shop"}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "list", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "services", Verb: "get", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "endpoints", Verb: "list", Namespace: e.ns}, false},
	} {
		attrs := tt.attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns, "system:authenticated"}, ResourceAttributes: &attrs}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, tt.allow, got.Status.Allowed, "%s %s/%s in %q: allowed=%v (%s)", attrs.Verb, attrs.Group, attrs.Resource, attrs.Namespace, got.Status.Allowed, got.Status.Reason)
	}

	// The key is rewritten only when asked, and the old one kept for the overlap.
	e.annotate(t, "shop", controller.RotatePoolingKeyAnnotation, "2026-11-26")
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	data := e.poolingKey(t, "shop")
	require.Len(t, data[sidecar.PoolKeyItem], 32)
	require.NotEqual(t, key, data[sidecar.PoolKeyItem])
	require.Equal(t, key, data[sidecar.PoolPreviousKeyItem])
	require.NotEmpty(t, e.events(t, "PoolingKeyRotated"))
	rotated := data[sidecar.PoolKeyItem]
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	require.Equal(t, rotated, e.poolingKey(t, "shop")[sidecar.PoolKeyItem], "asked once, rotated once")

	// A new front image is rolled out; nothing else changes.
	before = e.poolingVersions(t, "shop")
	e.ctrl.Front = frontConfig("example/qas-proxy:2")
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	dep, err = cs.AppsV1().Deployments(e.ns).Get(ctx, "qas-front-shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "example/qas-proxy:2", dep.Spec.Template.Spec.Containers[0].Image)
	after := e.poolingVersions(t, "shop")
	require.NotEqual(t, before["Deployment"], after["Deployment"])
	delete(before, "Deployment")
	delete(after, "Deployment")
	require.Equal(t, before, after)

	// Routing back to random removes the front, the key and the Role.
	e.setRouting(t, "shop", "random")
	_, err = e.reconcile(t, e.ctrl, "shop")
	require.NoError(t, err)
	require.Empty(t, e.poolingVersions(t, "shop"))
	require.Empty(t, condition(e.get(t, "shop"), controller.PoolingReadyCondition).Type, "no pooling condition without pooling")
	require.NotEmpty(t, e.events(t, "PoolingRemoved"))
}

// TestPoolingLeavesObjectsItDoesNotOwnAlone: a Service of the front's name that is not
// the QueueAutoscaler's is neither changed nor deleted; the condition and an Event say
// why the front is missing, and the rest of the pooling objects are made.
func TestPoolingLeavesObjectsItDoesNotOwnAlone(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "qas-front-cart", Namespace: e.ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	foreign, err := cs.CoreV1().Services(e.ns).Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	e.deployment(t, "cart", 1)
	e.queueAutoscalerWith(t, "cart", "cart", false, map[string]any{"routing": "pooled"})
	e.metrics.set(5, 0.05, e.clock.Now())
	_, err = e.reconcile(t, e.ctrl, "cart")
	require.NoError(t, err, "a pooling failure does not fail the decision cycle")

	c := condition(e.get(t, "cart"), controller.PoolingReadyCondition)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, "FailedPooling", c.Reason)
	require.Contains(t, c.Message, "Service "+e.ns+"/qas-front-cart exists and is not owned by QueueAutoscaler cart")
	require.NotEmpty(t, e.events(t, "FailedPooling"))
	got, err := cs.CoreV1().Services(e.ns).Get(ctx, "qas-front-cart", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.ResourceVersion, got.ResourceVersion, "not touched")
	versions := e.poolingVersions(t, "cart")
	for _, kind := range []string{"Secret", "Role", "RoleBinding", "Deployment"} {
		require.Contains(t, versions, kind)
	}

	e.setRouting(t, "cart", "random")
	_, err = e.reconcile(t, e.ctrl, "cart")
	require.NoError(t, err)
	got, err = cs.CoreV1().Services(e.ns).Get(ctx, "qas-front-cart", metav1.GetOptions{})
	require.NoError(t, err, "not deleted either")
	require.Equal(t, foreign.ResourceVersion, got.ResourceVersion)
	require.Equal(t, map[string]string{"Service": foreign.ResourceVersion}, e.poolingVersions(t, "cart"), "the owned ones are gone")
}

// TestPoolingBindsTheWorkloadsServiceAccounts: the RoleBinding follows the
// ServiceAccount the workload's pods run as.
func TestPoolingBindsTheWorkloadsServiceAccounts(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	_, err := cs.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "api-runner"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.deploymentOf(t, "api", 2, corev1.PodSpec{ServiceAccountName: "api-runner", Containers: []corev1.Container{appContainer("app", "100m", "")}})
	e.queueAutoscalerWith(t, "api", "api", false, map[string]any{"routing": "pooled"})
	e.metrics.set(5, 0.05, e.clock.Now())
	_, err = e.reconcile(t, e.ctrl, "api")
	require.NoError(t, err)
	binding, err := cs.RbacV1().RoleBindings(e.ns).Get(ctx, "qas-pooling-api", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "api-runner"}}, binding.Subjects)
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:serviceaccount:" + e.ns + ":api-runner",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "watch", Namespace: e.ns}}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, got.Status.Allowed, got.Status.Reason)
}

// pooledAndPlain is a controller with a front, two 2-pod workloads, "burst"
// under a pooled QueueAutoscaler and "plain" under a random-routed one, and
// measurements of λ = 10/s at E[S] = 50 ms.
func pooledAndPlain(t *testing.T) *env {
	t.Helper()
	e := setup(t)
	e.ctrl.Front = frontConfig("example/qas-proxy:1")
	e.deployment(t, "burst", 2)
	e.queueAutoscalerWith(t, "burst", "burst", false, map[string]any{"routing": "pooled"})
	e.deployment(t, "plain", 2)
	e.queueAutoscaler(t, "plain", "plain", false)
	e.metrics.set(10, 0.05, e.clock.Now())
	return e
}

// TestPooledBacklogIncludesTheFrontsQueue: the requests waiting in a pooled
// workload's front are in the backlog the engine sizes for; the same measurements of a
// workload that does not pool (a stale front gauge) count nothing.
func TestPooledBacklogIncludesTheFrontsQueue(t *testing.T) {
	e := pooledAndPlain(t)
	e.metrics.mu.Lock()
	e.metrics.m.FrontQueue = 120
	e.metrics.mu.Unlock()

	d, err := e.reconcile(t, e.ctrl, "burst")
	require.NoError(t, err)
	// Each k = 1 pod clears T/E[S] = 4 requests within the 200 ms target and holds
	// none: 8 of the 120 fit, 112 are backlog.
	require.InDelta(t, 112, d.Explanation.Backlog, 1e-9, "reason: %s", d.Explanation.Reason)
	d, err = e.reconcile(t, e.ctrl, "plain")
	require.NoError(t, err)
	require.Zero(t, d.Explanation.Backlog)
}

// TestPooledExpiriesReachTheEngine: a pooled workload's fronts gave back 1.5
// requests per second unseen (1 served by their senders, 0.5 relayed as the
// front's 503) and refused 2 with their queue full: the engine reads the
// senders' sum as the expiry rate, 1.5/s × the 10 s interval as backlog, and
// shows the refusals; a workload that does not pool reads none of them.
func TestPooledExpiriesReachTheEngine(t *testing.T) {
	e := pooledAndPlain(t)
	e.metrics.mu.Lock()
	e.metrics.m.ExpiredRequeuedRate, e.metrics.m.ExpiredRelayedRate, e.metrics.m.FrontRefusedRate = 1, 0.5, 2
	e.metrics.mu.Unlock()

	d, err := e.reconcile(t, e.ctrl, "burst")
	require.NoError(t, err)
	x := d.Explanation
	require.Equal(t, 1.5, x.FrontExpiredRate)
	require.Equal(t, 2.0, x.FrontRefusedRate)
	require.InDelta(t, 15, x.BacklogExpired, 1e-9, "reason: %s", x.Reason)
	require.InDelta(t, 15, x.Backlog, 1e-9, "the pods hold nothing and the front's queue is empty")
	require.InDelta(t, 0.15, x.ExpiredLateShare, 1e-12, "1.5/s of λ = 10/s")
	d, err = e.reconcile(t, e.ctrl, "plain")
	require.NoError(t, err)
	require.Zero(t, d.Explanation.FrontExpiredRate)
	require.Zero(t, d.Explanation.FrontRefusedRate)
	require.Zero(t, d.Explanation.Backlog)
}
