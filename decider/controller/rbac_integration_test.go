package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
)

// TestRBACIsEnoughAndNoMore runs the controller as a ServiceAccount bound to the shipped
// ClusterRole (it must be able to do its job), then asks the apiserver what that account
// may do beyond it (it must be refused).
func TestRBACIsEnoughAndNoMore(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	cs := e.c.Clientset()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "config", "rbac", "decider-clusterrole.yaml"))
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal(data, &role))
	role.Name = "qas-decider-" + e.ns
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "qas-decider"}},
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})

	saCfg, err := e.c.ServiceAccountConfig(ctx, e.ns, "qas-decider")
	require.NoError(t, err)
	ctrl := e.startController(t, saCfg, nil)

	e.deployment(t, "rbac", 2)
	e.queueAutoscaler(t, "rbac", "rbac", false)
	e.metrics.set(60, 0.05, e.clock.Now())
	d, err := e.reconcile(t, ctrl, "rbac")
	require.NoError(t, err, "the shipped role must allow a full cycle")
	require.True(t, d.Action.Has(decide.ActionHorizontal))
	e.waitReplicas(t, "rbac", d.DesiredReplicas)

	// The pooled data plane: the shipped role must let the decider create, update and
	// remove a workload's pooling objects (the Role among them: Kubernetes refuses a
	// Role that grants what its creator may not do).
	ctrl.Front = frontConfig("example/qas-proxy:1")
	e.proxiedDeployment(t, "pooled", 1, "")
	e.queueAutoscalerWith(t, "pooled", "pooled", false, map[string]any{"routing": "pooled"})
	_, err = e.reconcile(t, ctrl, "pooled")
	require.NoError(t, err)
	c := condition(e.get(t, "pooled"), controller.PoolingReadyCondition)
	require.NotEqual(t, "FailedPooling", c.Reason, c.Message)
	require.Len(t, e.poolingVersions(t, "pooled"), 5)
	// Once the front is ready, the workload's Deployment is rolled (its pod predates
	// the switch): the role lets the decider read the QueueAutoscaler's annotations
	// and update the Deployment.
	e.frontReady(t, "pooled")
	_, err = e.reconcile(t, ctrl, "pooled")
	require.NoError(t, err)
	c = condition(e.get(t, "pooled"), controller.PodsFollowRoutingCondition)
	require.Equal(t, controller.ReasonRolled, c.Reason, c.Message)
	require.Equal(t, e.switchID(t, "pooled"), e.getDeployment(t, "pooled").Spec.Template.Annotations[controller.RoutingRolloutAnnotation])
	e.annotate(t, "pooled", controller.RotatePoolingKeyAnnotation, "1")
	ctrl.Front = frontConfig("example/qas-proxy:2")
	_, err = e.reconcile(t, ctrl, "pooled")
	require.NoError(t, err)
	c = condition(e.get(t, "pooled"), controller.PoolingReadyCondition)
	require.NotEqual(t, "FailedPooling", c.Reason, c.Message)
	e.setRouting(t, "pooled", "random")
	_, err = e.reconcile(t, ctrl, "pooled")
	require.NoError(t, err)
	require.Empty(t, e.poolingVersions(t, "pooled"))
	require.Empty(t, condition(e.get(t, "pooled"), controller.PoolingReadyCondition).Type)

	user := "system:serviceaccount:" + e.ns + ":qas-decider"
	for _, tt := range []struct {
		attrs authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Subresource: "scale", Verb: "update", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "resize", Verb: "patch", Namespace: e.ns}, true},
		// Leases are granted by the namespaced leader-election Role only (decider/e2e).
		{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "kube-system", Name: "kube-scheduler"}, false},
		{authorizationv1.ResourceAttributes{Group: "events.k8s.io", Resource: "events", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "qas.dev", Resource: "queueautoscalers", Subresource: "status", Verb: "patch", Namespace: e.ns}, false},
		// Pooling: the key Secret is read by name; nothing lists Secrets.
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "patch", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "escalate", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "roles", Verb: "bind", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Verb: "create"}, false},
		{authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "services", Verb: "list", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "get", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "serviceaccounts", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "delete", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "patch", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Subresource: "eviction", Verb: "create", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "policy", Resource: "poddisruptionbudgets", Verb: "list", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "policy", Resource: "poddisruptionbudgets", Verb: "update", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "delete"}, false},
		// Deployments: the fronts; patch (kubectl's way to edit a user's) stays refused.
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "update", Namespace: e.ns}, true},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "patch", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "create", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "qas.dev", Resource: "queueautoscalers", Verb: "delete", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "update"}, true},
		{authorizationv1.ResourceAttributes{Resource: "persistentvolumes", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "list"}, true},
		{authorizationv1.ResourceAttributes{Resource: "persistentvolumes", Verb: "update"}, false},
		{authorizationv1.ResourceAttributes{Resource: "persistentvolumeclaims", Verb: "delete", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "statefulsets", Verb: "patch", Namespace: e.ns}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "create"}, false},
	} {
		attrs := tt.attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, tt.allow, got.Status.Allowed, "%s %s/%s %s: allowed=%v (%s)",
			attrs.Verb, attrs.Group, attrs.Resource, attrs.Subresource, got.Status.Allowed, got.Status.Reason)
	}
}
