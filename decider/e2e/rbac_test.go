package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/cpu"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// unexercised are the rules of config/rbac that TestDeciderCallsMatchRoles's run need
// not use, with the code path that does. Every other rule must be used by the run.
var unexercised = map[string]string{
	// client-go's event recorder creates an Event and patches its count when the same
	// event repeats within ten minutes; whether one repeats in the run is up to timing.
	"patch /events": "client-go's EventCorrelator (decider/controller's recorder) aggregating a repeated Event",
	// The controller's informers (decider/controller's caches) start with a streaming
	// watch-list where the apiserver serves it, as this one does; against one that
	// does not, client-go's reflector lists first.
	"list /nodes":                  watchListFallback,
	"list /persistentvolumeclaims": watchListFallback,
	"list /persistentvolumes":      watchListFallback,
	"list apps/deployments":        watchListFallback,
	// The run's targets are Deployments; the target informer (decider/controller
	// watch.go, watchTargets) watches StatefulSets and ReplicaSets that are targets.
	"list apps/statefulsets":  targetInformer,
	"watch apps/statefulsets": targetInformer,
	"list apps/replicasets":   targetInformer,
	"watch apps/replicasets":  targetInformer,
	// The pooled data plane (decider/controller pooling.go): the run creates, rotates
	// and removes a workload's pooling objects; the others are updated only when the
	// decider's front configuration or the workload's ServiceAccount changes
	// (decider/controller's TestPoolingFollowsRouting and TestRBACIsEnoughAndNoMore run
	// those).
	"update apps/deployments":                       poolingUpdate,
	"update /services":                              poolingUpdate,
	"update rbac.authorization.k8s.io/roles":        poolingUpdate,
	"update rbac.authorization.k8s.io/rolebindings": poolingUpdate,
	// The decider never reads EndpointSlices: it holds these verbs because Kubernetes
	// lets it create the sidecars' Role only with the permissions that Role grants.
	"get discovery.k8s.io/endpointslices":   poolingEscalation,
	"list discovery.k8s.io/endpointslices":  poolingEscalation,
	"watch discovery.k8s.io/endpointslices": poolingEscalation,
}

const (
	poolingUpdate     = "decider/controller ensureFront, ensureFrontService and ensurePoolingRBAC rewriting a pooling object whose desired content changed, or rollDeployment rolling a workload whose pods predate a routing switch"
	poolingEscalation = "the RBAC escalation check on creating the pooling Role (decider/controller ensurePoolingRBAC), which grants get, list and watch on endpointslices"
	watchListFallback = "client-go's reflector listing before it watches, on an apiserver without streaming watch-list"
	targetInformer    = "the target informer (decider/controller watchTargets) for StatefulSet and ReplicaSet targets"
)

// workloadFeed is what the synthetic measurements say about one workload: its λ and
// E[S], and each pod's service time and CPU use given the node that is hot.
type workloadFeed struct {
	name       string
	lambda, es float64
	pod        func(p corev1.Pod, hot string) (service, cpuCores float64)
}

// feed writes, every half second, the collector's measurements (with its own point
// builders) for the pods that exist: each workload's and pod's, and both kwok nodes'
// CPU, the hot node at 97 %. What the collector would measure from proxies and
// metrics.k8s.io is chosen here, so that the run reaches every decision kind.
type feed struct {
	kube      kubernetes.Interface
	ns        string
	db        *influxtest.Server
	hot       atomic.Value // node name
	mu        sync.Mutex
	workloads []workloadFeed
}

func (f *feed) add(w workloadFeed) { f.mu.Lock(); f.workloads = append(f.workloads, w); f.mu.Unlock() }

func (f *feed) run(ctx context.Context) {
	client := influxdb2.NewClient(f.db.URL, "")
	defer client.Close()
	w := client.WriteAPIBlocking("", influxtest.Bucket)
	for ctx.Err() == nil {
		now := time.Now()
		hot, _ := f.hot.Load().(string)
		var points []*write.Point
		for _, n := range []string{"kwok-node-1", "kwok-node-2"} {
			used := 1.0
			if n == hot {
				used = 15.5
			}
			points = append(points, cpu.NodePoint(cpu.NodeCPU{Name: n, Time: now, Usage: used, Allocatable: 16}))
		}
		f.mu.Lock()
		workloads := append([]workloadFeed(nil), f.workloads...)
		f.mu.Unlock()
		for _, wl := range workloads {
			pods, err := f.kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + wl.name})
			if err != nil {
				continue
			}
			var running []corev1.Pod
			for _, p := range pods.Items {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					running = append(running, p)
				}
			}
			n := len(running)
			for _, p := range running {
				service, cores := wl.pod(p, hot)
				req, lim := discoveryCPU(p)
				pt := pipeline.PodPoint(scrape.Target{Namespace: f.ns, Workload: wl.name, Pod: p.Name, Node: p.Spec.NodeName},
					aggregate.Metrics{Time: now, ArrivalRate: wl.lambda / float64(n), ServiceMean: service, ServiceSCV: 1})
				pt.AddField("cpu_usage_cores", cores)
				pt.AddField("cpu_request_cores", req)
				pt.AddField("cpu_limit_cores", lim)
				points = append(points, pt)
			}
			if n > 0 {
				points = append(points, pipeline.WorkloadPoint(f.ns, wl.name,
					aggregate.Metrics{Time: now, ArrivalRate: wl.lambda, ServiceMean: wl.es, ServiceSCV: 1, LatencyP95: 3 * wl.es, Pods: n}))
			}
		}
		_ = w.WritePoint(ctx, points...)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func discoveryCPU(p corev1.Pod) (request, limit float64) {
	for _, c := range p.Spec.Containers {
		request += float64(c.Resources.Requests.Cpu().MilliValue()) / 1000
		limit += float64(c.Resources.Limits.Cpu().MilliValue()) / 1000
	}
	return request, limit
}

// createDeployment creates a Deployment of kwok pods labelled app=name with one
// container of the given CPU, spread over the nodes: strictly (one per node for two
// replicas) when oneEach, else as the scheduler prefers.
func createDeployment(t *testing.T, kube kubernetes.Interface, ns, name string, replicas int32, cpuReq string, oneEach bool) {
	spread := corev1.ScheduleAnyway
	if oneEach {
		spread = corev1.DoNotSchedule
	}
	_, err := kube.AppsV1().Deployments(ns).Create(context.Background(), kubetest.Deployment(ns, name, replicas, corev1.PodSpec{
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: spread,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		}},
		Containers: []corev1.Container{{Name: "app", Image: "example/app:1", Resources: kubetest.CPU(cpuReq, cpuReq)}},
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, name+" Ready", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == replicas, err
	})
}

func runningPods(t *testing.T, kube kubernetes.Interface, ns, app string) []corev1.Pod {
	list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out
}

func createQA(t *testing.T, dyn dynamic.Interface, ns, name string, extra map[string]any) {
	spec := map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
		"minReplicas":    int64(1), "maxReplicas": int64(20),
		"target": map[string]any{"latency": "200ms", "percentile": 95.0},
	}
	for k, v := range extra {
		spec[k] = v
	}
	_, err := dyn.Resource(qaGVR).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func hasEvent(ctx context.Context, kube kubernetes.Interface, ns, object, reason string) bool {
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	return err == nil && len(list.Items) > 0
}

// TestDeciderCallsMatchRoles runs two leader-elected deciders as their ServiceAccount
// under config/rbac's roles, recording every request they make, through horizontal
// scaling, an in-place resize, a migration of the workload's own pod (surge, deletion
// cost, scale back, node taint) and of a neighbour (eviction), status and Events, and a
// failover. Then every recorded request must be allowed by the roles (and none was
// refused), and every rule of the roles must have been used, or be listed in
// unexercised with the code path that uses it.
func TestDeciderCallsMatchRoles(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	installCRD(t, c)
	kube := c.Clientset()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	db := influxtest.Start(t)
	c.RemoveTaintAfter(t, controller.HotTaint) // no test leaves a node tainted for the next

	f := &feed{kube: kube, ns: ns, db: db}
	f.hot.Store("")
	bg, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); f.run(bg) }()
	t.Cleanup(func() { stopFeed(); <-feedDone })

	// Scale: 60 req/s of 50 ms on pods that serve one at a time is 3 Erlangs.
	createDeployment(t, kube, ns, "scale", 2, "500m", false)
	f.add(workloadFeed{name: "scale", lambda: 60, es: 0.05, pod: func(corev1.Pod, string) (float64, float64) { return 0.05, 0.2 }})
	createQA(t, dyn, ns, "scale", nil)
	// Resize: busy CPU-bound pods, for which bigger pods are the cheapest fix.
	createDeployment(t, kube, ns, "cpu", 2, "500m", false)
	f.add(workloadFeed{name: "cpu", lambda: 12, es: 0.2, pod: func(corev1.Pod, string) (float64, float64) { return 0.2, 0.5 }})
	createQA(t, dyn, ns, "cpu", map[string]any{
		"vertical": map[string]any{"enabled": true, "minCPU": "250m", "maxCPU": "2", "podOverheadCPU": "500m"},
		"target":   map[string]any{"latency": "300ms"},
	})
	// Migration of the workload's own pod: the one on the hot node is slowed (its
	// service time well above 1.5 × the median of the two).
	slowOnHot := func(p corev1.Pod, hot string) (float64, float64) {
		if p.Spec.NodeName == hot {
			return 0.5, 0.5
		}
		return 0.05, 0.3
	}
	createDeployment(t, kube, ns, "mig", 2, "500m", true)
	migPods := runningPods(t, kube, ns, "mig")
	require.Len(t, migPods, 2)
	require.NotEqual(t, migPods[0].Spec.NodeName, migPods[1].Spec.NodeName, "one pod per node")
	f.add(workloadFeed{name: "mig", lambda: 10, es: 0.05, pod: slowOnHot})
	createQA(t, dyn, ns, "mig", map[string]any{
		"migration": map[string]any{"enabled": true, "nodeThreshold": 0.85}, "tolerance": 0.5,
	})
	f.hot.Store(migPods[0].Spec.NodeName)

	rec := newRecorder()
	cfg := deciderConfig(t, c, ns, rec)
	deciders := map[string]*deciderProc{}
	for _, id := range []string{"decider-a", "decider-b"} {
		deciders[id] = startDecider(t, cfg, ns, db, id)
	}

	eventually(t, 3*time.Minute, "scaled, resized and migrated", func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "scale", metav1.GetOptions{})
		if err != nil || *d.Spec.Replicas <= 2 {
			return false, nil
		}
		resized := false // (the decider may also add pods, which start at the template's CPU)
		for _, p := range runningPods(t, kube, ns, "cpu") {
			cs := p.Status.ContainerStatuses
			resized = resized || len(cs) > 0 && cs[0].Resources != nil && cs[0].Resources.Requests.Cpu().MilliValue() > 500
		}
		return resized && hasEvent(ctx, kube, ns, "mig", "Migrated"), nil
	})

	// Migration of a neighbour: a big pod of another workload shares the hot node with
	// a slowed pod of "nb"; the decider evicts it and its owner recreates it elsewhere.
	createDeployment(t, kube, ns, "noisy", 1, "3", false)
	hot := runningPods(t, kube, ns, "noisy")[0].Spec.NodeName
	createDeployment(t, kube, ns, "nb", 2, "500m", true)
	nbPods := runningPods(t, kube, ns, "nb")
	require.Len(t, nbPods, 2)
	require.NotEqual(t, nbPods[0].Spec.NodeName, nbPods[1].Spec.NodeName, "one pod per node, so one shares the hot node")
	f.add(workloadFeed{name: "nb", lambda: 10, es: 0.05, pod: slowOnHot})
	f.hot.Store(hot)
	createQA(t, dyn, ns, "nb", map[string]any{
		"migration": map[string]any{"enabled": true, "nodeThreshold": 0.85, "mover": "neighbour"}, "tolerance": 0.5,
	})
	eventually(t, 3*time.Minute, "the neighbour evicted", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, kube, ns, "nb", "Migrated"), nil
	})

	// The pooled data plane: the decider creates the workload's front, key and Role,
	// rotates the key when asked, and removes it all when routing goes back to random.
	createDeployment(t, kube, ns, "pooled", 1, "100m", false)
	f.add(workloadFeed{name: "pooled", lambda: 5, es: 0.05, pod: func(corev1.Pod, string) (float64, float64) { return 0.05, 0.05 }})
	createQA(t, dyn, ns, "pooled", map[string]any{"routing": "pooled"})
	eventually(t, time.Minute, "the pooling objects created", func(ctx context.Context) (bool, error) {
		_, err1 := kube.CoreV1().Secrets(ns).Get(ctx, "qas-pooling-pooled", metav1.GetOptions{})
		_, err2 := kube.RbacV1().RoleBindings(ns).Get(ctx, "qas-pooling-pooled", metav1.GetOptions{})
		_, err3 := kube.AppsV1().Deployments(ns).Get(ctx, "qas-front-pooled", metav1.GetOptions{})
		_, err4 := kube.CoreV1().Services(ns).Get(ctx, "qas-front-pooled", metav1.GetOptions{})
		return err1 == nil && err2 == nil && err3 == nil && err4 == nil, nil
	})
	_, err = dyn.Resource(qaGVR).Namespace(ns).Patch(ctx, "pooled", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"qas.dev/rotate-pooling-key":"1"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the pooling key rotated", func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, "qas-pooling-pooled", metav1.GetOptions{})
		return err == nil && len(s.Data["previous"]) == 32, nil
	})
	_, err = dyn.Resource(qaGVR).Namespace(ns).Patch(ctx, "pooled", types.MergePatchType, []byte(`{"spec":{"routing":"random"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, "the pooling objects removed", func(ctx context.Context) (bool, error) {
		_, err1 := kube.CoreV1().Secrets(ns).Get(ctx, "qas-pooling-pooled", metav1.GetOptions{})
		_, err2 := kube.RbacV1().Roles(ns).Get(ctx, "qas-pooling-pooled", metav1.GetOptions{})
		_, err3 := kube.CoreV1().Services(ns).Get(ctx, "qas-front-pooled", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) && apierrors.IsNotFound(err3), nil
	})

	// Failover: the standby takes the Lease and decides.
	leaderID := leader(ctx, kube, ns)
	require.Contains(t, deciders, leaderID)
	deciders[leaderID].stop()
	failover := metav1.Now()
	eventually(t, time.Minute, "the standby leads and decides", func(ctx context.Context) (bool, error) {
		if id := leader(ctx, kube, ns); id == "" || id == leaderID {
			return false, nil
		}
		obj, err := dyn.Resource(qaGVR).Namespace(ns).Get(ctx, "scale", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ts, _, _ := unstructured.NestedString(obj.Object, "status", "lastDecision", "time")
		at, err := time.Parse(time.RFC3339, ts)
		return err == nil && at.After(failover.Add(time.Second)), nil
	})
	for _, d := range deciders {
		d.stop()
	}

	calls, refused := rec.snapshot()
	require.Empty(t, refused, "requests the apiserver refused the decider")
	clusterRole, role := deciderRoles(t)
	denied, unused := compareWithRoles(calls, clusterRole, role, ns, unexercised)
	require.Empty(t, denied, "requests the shipped roles do not allow")
	require.Empty(t, unused, "rules the run never used: drop them, or name the code path that uses them in unexercised")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, cl := range calls {
		t.Logf("%5d  %s", rec.calls[cl], cl)
	}
}

// compareWithRoles returns the resource requests that neither the ClusterRole nor (in
// ns, where it is bound) the Role allows, and the rules, broken down to one verb,
// resource and name each, that no request used and justified does not list ("verb
// group/resource"). Non-resource requests (discovery) are left out: every
// authenticated user may make them.
func compareWithRoles(calls []call, clusterRole rbacv1.ClusterRole, role rbacv1.Role, ns string, justified map[string]string) (denied, unused []string) {
	used := map[string]bool{}
	covers := func(rules []rbacv1.PolicyRule, need rbacv1.PolicyRule) bool {
		allowed := false
		for _, r := range rules {
			for _, atom := range validation.BreakdownRule(r) {
				if ok, _ := validation.Covers([]rbacv1.PolicyRule{atom}, []rbacv1.PolicyRule{need}); ok {
					allowed = true
					used[ruleKey(atom)] = true
				}
			}
		}
		return allowed
	}
	for _, cl := range calls {
		if cl.Path != "" {
			continue
		}
		need := asRule(cl)
		allowed := covers(clusterRole.Rules, need)
		if cl.Namespace == ns && covers(role.Rules, need) {
			allowed = true
		}
		if !allowed {
			denied = append(denied, cl.String())
		}
	}
	for _, r := range append(append([]rbacv1.PolicyRule(nil), clusterRole.Rules...), role.Rules...) {
		for _, atom := range validation.BreakdownRule(r) {
			if k := ruleKey(atom); !used[k] && justified[verbResource(atom)] == "" {
				unused = append(unused, k)
			}
		}
	}
	return denied, unused
}

// asRule is the one-verb rule a request needs.
func asRule(c call) rbacv1.PolicyRule {
	res := c.Resource
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	r := rbacv1.PolicyRule{APIGroups: []string{c.Group}, Resources: []string{res}, Verbs: []string{c.Verb}}
	if c.Name != "" {
		r.ResourceNames = []string{c.Name}
	}
	return r
}

// ruleKey names a rule of one verb, group, resource and at most one name:
// "verb group/resource" (the core group is empty), then " name" when it has one.
func ruleKey(r rbacv1.PolicyRule) string {
	k := verbResource(r)
	if len(r.ResourceNames) > 0 {
		k += " " + r.ResourceNames[0]
	}
	return k
}

// verbResource keys unexercised: "verb group/resource".
func verbResource(r rbacv1.PolicyRule) string {
	return fmt.Sprintf("%s %s/%s", r.Verbs[0], r.APIGroups[0], r.Resources[0])
}

// TestCompareWithRoles checks the checker on made-up calls and rules.
func TestCompareWithRoles(t *testing.T) {
	cr := rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"*"}, Resources: []string{"*/scale"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"patch"}},
	}}
	role := rbacv1.Role{Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"mine"}, Verbs: []string{"update"}},
	}}
	lease := func(ns, name string) call {
		return call{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		name           string
		calls          []call
		justified      map[string]string
		denied, unused []string
	}{
		{
			name: "everything used and allowed",
			calls: []call{
				{Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}, {Verb: "list", Resource: "pods"},
				{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "a", Name: "d"},
				{Verb: "patch", Resource: "events", Namespace: "a", Name: "e"}, lease("ns", "mine"), {Verb: "get", Path: "/api"},
			},
		},
		{
			name: "refused: a verb, a resource, another Lease, the Lease elsewhere",
			calls: []call{
				{Verb: "delete", Resource: "pods", Namespace: "a", Name: "p"}, {Verb: "list", Resource: "nodes"},
				lease("ns", "kube-scheduler"), lease("kube-system", "mine"),
				{Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}, {Verb: "list", Resource: "pods"},
				{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "a", Name: "d"},
				{Verb: "patch", Resource: "events", Namespace: "a", Name: "e"}, lease("ns", "mine"),
			},
			denied: []string{"delete pods a/p", "list nodes ", "update leases.coordination.k8s.io ns/kube-scheduler", "update leases.coordination.k8s.io kube-system/mine"},
		},
		{
			name:      "unused, one of them justified",
			calls:     []call{{Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}},
			justified: map[string]string{"patch /events": "why"},
			unused:    []string{"list /pods", "update */*/scale", "update coordination.k8s.io/leases mine"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			denied, unused := compareWithRoles(tc.calls, cr, role, "ns", tc.justified)
			require.Equal(t, tc.denied, denied)
			require.Equal(t, tc.unused, unused)
		})
	}
}

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		method, url string
		want        call
	}{
		{"GET", "/api/v1/namespaces/a/pods?labelSelector=x", call{Verb: "list", Resource: "pods", Namespace: "a"}},
		{"GET", "/api/v1/pods", call{Verb: "list", Resource: "pods"}},
		{"GET", "/api/v1/nodes?watch=true&resourceVersion=1", call{Verb: "watch", Resource: "nodes"}},
		{"GET", "/api/v1/namespaces/a", call{Verb: "get", Resource: "namespaces", Name: "a"}},
		{"PATCH", "/api/v1/namespaces/a/pods/p/resize", call{Verb: "patch", Resource: "pods", Subresource: "resize", Namespace: "a", Name: "p"}},
		{"POST", "/api/v1/namespaces/a/pods/p/eviction", call{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "a", Name: "p"}},
		{"PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", call{Verb: "update", Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "a", Name: "d"}},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/a/leases", call{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: "a"}},
		{"DELETE", "/api/v1/namespaces/a/pods", call{Verb: "deletecollection", Resource: "pods", Namespace: "a"}},
		{"GET", "/apis/apps/v1", call{Verb: "get", Path: "/apis/apps/v1"}},
		{"GET", "/api", call{Verb: "get", Path: "/api"}},
	} {
		u, err := url.Parse(tc.url)
		require.NoError(t, err)
		require.Equal(t, tc.want, parseRequest(tc.method, u), "%s %s", tc.method, tc.url)
	}
}

func TestAuthorizationDenied(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"kind":"Status","status":"Failure","message":"events is forbidden: User \"system:serviceaccount:qas:decider\" cannot create resource \"events\" in API group \"\" in the namespace \"x\"","reason":"Forbidden","code":403}`, true},
		{`{"kind":"Status","status":"Failure","message":"events \"e\" is forbidden: unable to create new content in namespace x because it is being terminated","reason":"Forbidden","code":403}`, false},
	} {
		resp := &http.Response{StatusCode: http.StatusForbidden, Body: io.NopCloser(strings.NewReader(tc.body))}
		require.Equal(t, tc.want, authorizationDenied(resp), tc.body)
		back, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, tc.body, string(back), "the client still reads the body")
	}
}
