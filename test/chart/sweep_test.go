package chart

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// objectRef names one object of the API: "apps/v1/deployments ns/name".
type objectRef struct {
	Resource  string // group/version/resource ("v1/secrets" for the core group)
	Namespace string
	Name      string
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return r.Resource + " " + r.Name
	}
	return r.Resource + " " + r.Namespace + "/" + r.Name
}

// sweep finds what a Helm release leaves behind without knowing what it creates: it
// lists every resource the API server serves (discovery) in the release's namespace,
// every cluster-scoped resource, and every object labelled
// app.kubernetes.io/instance=<release> in any namespace, and compares a snapshot taken
// before the install with one taken after the uninstall.
type sweep struct {
	c       *kubetest.Cluster
	release string
	ns      string
}

// ephemeral are resources whose objects the API server expires by itself: Events (one
// set of objects served by two groups), kept for an hour as a record of what happened.
var ephemeral = map[string]bool{"v1/events": true, "events.k8s.io/v1/events": true}

// newSweep waits until the namespace holds what every namespace gets (the default
// ServiceAccount and the root CA ConfigMap, which controllers add just after it is
// created), so that a later snapshot does not mistake them for leftovers.
func newSweep(ctx context.Context, t *testing.T, c *kubetest.Cluster, release, ns string) *sweep {
	t.Helper()
	cs := c.Clientset()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, saErr := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		_, cmErr := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return saErr == nil && cmErr == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s never got its default ServiceAccount and root CA: %v", ns, err)
	}
	return &sweep{c: c, release: release, ns: ns}
}

// snapshot lists everything the sweep covers. A resource that cannot be listed is an
// error: a sweep that skipped it could not vouch for it.
func (s *sweep) snapshot(ctx context.Context) (map[objectRef]bool, error) {
	cfg := rest.CopyConfig(s.c.Config)
	cfg.WarningHandler = rest.NoWarnings{} // listing deprecated resources (v1 Endpoints) warns
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	out := map[objectRef]bool{}
	listed := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue // subresources; resources that cannot be listed hold nothing
			}
			gvr := gv.WithResource(r.Name)
			resource := gv.String() + "/" + r.Name
			if ephemeral[resource] {
				continue
			}
			type query struct {
				ns   string
				opts metav1.ListOptions
			}
			queries := []query{{"", metav1.ListOptions{}}}
			if r.Namespaced {
				queries = []query{{s.ns, metav1.ListOptions{}},
					{"", metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + s.release}}}
			}
			for _, q := range queries {
				got, err := md.Resource(gvr).Namespace(q.ns).List(ctx, q.opts)
				if err != nil {
					return nil, fmt.Errorf("list %s: %w", resource, err)
				}
				for _, o := range got.Items {
					out[objectRef{Resource: resource, Namespace: o.Namespace, Name: o.Name}] = true
				}
			}
			listed++
		}
	}
	if listed < 30 {
		return nil, fmt.Errorf("discovery found only %d list-able resources", listed)
	}
	return out, nil
}

// leftovers waits (controllers delete dependents asynchronously: pods, ReplicaSets,
// EndpointSlices, Services' IPAddresses) until nothing is in after that was not in
// before, except what keep allows, and fails naming whatever remains.
func (s *sweep) leftovers(ctx context.Context, t *testing.T, before map[objectRef]bool, keep func(objectRef) bool) {
	t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		after, err := s.snapshot(ctx)
		if err != nil {
			return false, err
		}
		left = left[:0]
		for ref := range after {
			if !before[ref] && !keep(ref) {
				left = append(left, ref.String())
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		sort.Strings(left)
		t.Fatalf("left behind after helm uninstall (%v):\n  %s", err, strings.Join(left, "\n  "))
	}
}

// keptCRD allows what stays with the QueueAutoscaler CRD, which Helm never deletes
// (crds/): the CRD and the APIService the API server registers for its group version.
func keptCRD(ref objectRef) bool {
	return ref == objectRef{Resource: "apiextensions.k8s.io/v1/customresourcedefinitions", Name: "queueautoscalers.qas.dev"} ||
		ref == objectRef{Resource: "apiregistration.k8s.io/v1/apiservices", Name: "v1alpha1.qas.dev"}
}

// noHotTaint checks that no node carries the decider's migration taint, nor the
// annotation that lists the migrations holding it.
func noHotTaint(ctx context.Context, t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	nodes, err := c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no nodes to check")
	}
	for _, n := range nodes.Items {
		if slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == controller.HotTaint }) {
			t.Errorf("node %s still carries the %s taint after helm uninstall: %v", n.Name, controller.HotTaint, n.Spec.Taints)
		}
		if holders, ok := n.Annotations[controller.HotTaintHolders]; ok {
			t.Errorf("node %s still carries the %s annotation after helm uninstall: %q", n.Name, controller.HotTaintHolders, holders)
		}
	}
}

var schedulingPriorityClass = schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "sweep-test"}, Value: 7}

// TestSweepFindsLeftovers shows the sweep catches what it must: an object in the
// release namespace, a cluster-scoped object, and an object labelled with the release
// in another namespace, none of which it was told about.
func TestSweepFindsLeftovers(t *testing.T) {
	c := kubetest.Shared(t)
	ns, other := c.Namespace(t), c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newSweep(ctx, t, c, "sweep-rel", ns)
	before, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs := c.Clientset()
	mustCreate := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stray"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "labelled",
		Labels: map[string]string{"app.kubernetes.io/instance": "sweep-rel"}}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingPriorityClass, metav1.CreateOptions{})
	mustCreate(err)
	t.Cleanup(func() {
		_ = cs.SchedulingV1().PriorityClasses().Delete(context.Background(), schedulingPriorityClass.Name, metav1.DeleteOptions{})
	})
	after, err := s.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for ref := range after {
		if !before[ref] {
			found = append(found, ref.String())
		}
	}
	sort.Strings(found)
	want := []string{
		"scheduling.k8s.io/v1/priorityclasses sweep-test",
		"v1/configmaps " + ns + "/stray",
		"v1/secrets " + other + "/labelled",
	}
	if !slices.Equal(found, want) {
		t.Fatalf("new objects %v, want %v", found, want)
	}
}
