package endpoints_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/pool/endpoints"
)

// TestWatcherOnARealAPIServer runs the watcher as the sidecars run it: as a
// ServiceAccount whose only permission is the Role the decider creates for a pooled
// workload (get, list and watch on endpointslices in its namespace). It follows the
// front Service's slices, cannot read another namespace's, keeps the last list while
// the API server is down (killed: watches cut) for MaxStale and then uses none, and
// picks the list up again when the API server is back.
func TestWatcherOnARealAPIServer(t *testing.T) {
	c := kubetest.StartT(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, other := c.Namespace(t), c.Namespace(t)
	admin := c.Clientset()
	_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "qas-pooling-web"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "qas-pooling-web"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "qas-pooling-web"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "web-runner"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	saCfg, err := c.ServiceAccountConfig(ctx, ns, "web-runner")
	require.NoError(t, err)
	sa, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)

	pool := []discoveryv1.EndpointPort{tcpPort("qas-admin", 9901), tcpPort(port, 9902)}
	front := slice("qas-front-web-abc", "qas-front-web", discoveryv1.AddressTypeIPv4, pool,
		endpoint{"10.1.0.1", yes, no}, endpoint{"10.1.0.2", yes, no}, endpoint{"10.1.0.3", no, no})
	front.Namespace = ns
	front, err = admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, front, metav1.CreateOptions{})
	require.NoError(t, err)
	app := slice("web-xyz", "web", discoveryv1.AddressTypeIPv4, pool, endpoint{"10.1.0.9", yes, no})
	app.Namespace = ns
	_, err = admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, app, metav1.CreateOptions{})
	require.NoError(t, err)

	clk := clocktesting.NewFakeClock(time.Now())
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := endpoints.New(wctx, sa, ns, "qas-front-web", port, endpoints.Options{MaxStale: time.Minute, Clock: clk})
	require.NoError(t, err)
	require.True(t, w.WaitForSync(ctx))
	want := []string{"10.1.0.1:9902", "10.1.0.2:9902"}
	eventually(t, func() bool { return len(w.Fronts()) == 2 }, "the ready endpoints")
	require.Equal(t, want, w.Fronts())

	// The first front starts terminating (a rollout): it goes at once.
	front.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: no, Terminating: yes}
	_, err = admin.DiscoveryV1().EndpointSlices(ns).Update(ctx, front, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return len(w.Fronts()) == 1 }, "the terminating front leaves the list")
	require.Equal(t, []string{"10.1.0.2:9902"}, w.Fronts())

	// The same account reads nothing in another namespace: that watcher never lists.
	otherCtx, otherStop := context.WithTimeout(ctx, 3*time.Second)
	defer otherStop()
	ow, err := endpoints.New(otherCtx, sa, other, "qas-front-web", port, endpoints.Options{})
	require.NoError(t, err)
	require.False(t, ow.WaitForSync(otherCtx), "RBAC refuses the list in %s", other)
	require.Empty(t, ow.Fronts())

	// The API server dies: the last list is kept for MaxStale, then none is used.
	require.NoError(t, c.KillAPIServer())
	eventually(t, func() bool { return !w.State().Connected }, "the cut watch is noticed")
	require.Equal(t, []string{"10.1.0.2:9902"}, w.Fronts(), "kept while the API server is away")
	clk.Step(time.Minute + time.Second)
	require.Empty(t, w.Fronts(), "past MaxStale: plain local queueing")
	require.True(t, w.State().Stale)

	// Back: the list is current again, with what changed meanwhile.
	require.NoError(t, c.StartAPIServer(ctx))
	front.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: yes, Terminating: no}
	require.Eventually(t, func() bool {
		cur, err := admin.DiscoveryV1().EndpointSlices(ns).Get(ctx, front.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cur.Endpoints[0].Conditions = front.Endpoints[0].Conditions
		_, err = admin.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond)
	require.Eventually(t, func() bool { return len(w.Fronts()) == 2 }, 2*time.Minute, 50*time.Millisecond, "the watcher relists after the restart")
	require.Equal(t, want, w.Fronts())
	require.True(t, w.State().Connected)
}
