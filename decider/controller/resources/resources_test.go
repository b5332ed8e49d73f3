package resources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/proxy/sidecar"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func podAt(name string, created time.Time, ready *time.Time) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
	if ready != nil {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(*ready)}}
	}
	return p
}

func at(d time.Duration) *time.Time { x := t0.Add(d); return &x }

func TestInitTimes(t *testing.T) {
	tr := NewReadyTracker()
	pods := []*corev1.Pod{
		ptr(podAt("old", t0, at(30*time.Second))),
		ptr(podAt("new", t0.Add(time.Minute), at(time.Minute+10*time.Second))),
		ptr(podAt("never-ready", t0.Add(2*time.Minute), nil)),
		ptr(podAt("skewed", t0.Add(3*time.Minute), at(2*time.Minute))),
	}
	for _, p := range pods {
		p.UID = types.UID(p.Name)
		tr.Observe(p, false)
	}
	tests := []struct {
		name  string
		limit int
		want  []time.Duration
	}{
		{name: "all samples newest first", limit: 0, want: []time.Duration{10 * time.Second, 30 * time.Second}},
		{name: "limit keeps the most recent", limit: 1, want: []time.Duration{10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, InitTimes(pods, tr, tt.limit))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// readyAt sets the pod's Ready condition (and its transition time).
func readyAt(p *corev1.Pod, ready bool, at time.Time) *corev1.Pod {
	q := p.DeepCopy()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	q.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)}}
	return q
}

func withRestarts(p *corev1.Pod, n int32) *corev1.Pod {
	q := p.DeepCopy()
	q.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: n}}
	return q
}

// TestReadyTrackerKeepsTheFirstReady: the start-up time ends at the first Ready
// transition; a later flap must not stretch it, and a pod whose first Ready was not
// seen gives a sample only when nothing suggests its Ready is a later one.
func TestReadyTrackerKeepsTheFirstReady(t *testing.T) {
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", CreationTimestamp: metav1.NewTime(t0)}}
	type step struct {
		pod     *corev1.Pod
		created bool
	}
	tests := []struct {
		name  string
		steps []step
		want  time.Duration // 0: no sample
	}{
		{"watched from creation, flaps later", []step{
			{readyAt(base, false, t0), true},
			{readyAt(base, true, t0.Add(8*time.Second)), false},
			{readyAt(base, false, t0.Add(time.Minute)), false},
			{readyAt(base, true, t0.Add(2*time.Minute)), false},
		}, 8 * time.Second},
		{"watched from creation, restarts before its first Ready count as start-up", []step{
			{readyAt(base, false, t0), true},
			{withRestarts(readyAt(base, true, t0.Add(40*time.Second)), 2), false},
		}, 40 * time.Second},
		{"first seen Ready, no restart: trusted", []step{
			{readyAt(base, true, t0.Add(5*time.Second)), false},
		}, 5 * time.Second},
		{"first seen Ready after a restart: may be a flap, ignored", []step{
			{withRestarts(readyAt(base, true, t0.Add(10*time.Minute)), 1), false},
		}, 0},
		{"first seen not Ready in the initial list, Ready after a restart: ignored", []step{
			{withRestarts(readyAt(base, false, t0.Add(9*time.Minute)), 1), false},
			{withRestarts(readyAt(base, true, t0.Add(10*time.Minute)), 1), false},
		}, 0},
		{"never Ready", []step{{readyAt(base, false, t0), true}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewReadyTracker()
			var last *corev1.Pod
			for _, s := range tt.steps {
				tr.Observe(s.pod, s.created)
				last = s.pod
			}
			got := InitTimes([]*corev1.Pod{last}, tr, 0)
			if tt.want == 0 {
				require.Empty(t, got)
				return
			}
			require.Equal(t, []time.Duration{tt.want}, got)
			tr.Forget(last.UID)
			require.Empty(t, InitTimes([]*corev1.Pod{last}, tr, 0), "a deleted pod is forgotten")
		})
	}
}

func container(req, lim string) corev1.Container {
	c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
	if req != "" {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(req)
	}
	if lim != "" {
		c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(lim)
	}
	return c
}

func TestDecidePodsAndNodes(t *testing.T) {
	mine := podAt("web-1", t0, at(time.Second))
	mine.Spec.NodeName = "n1"
	mine.Spec.Containers = []corev1.Container{container("250m", "500m"), container("50m", "100m")}
	pending := podAt("web-2", t0, nil) // not scheduled: not serving, not placed
	other := podAt("db-1", t0, at(time.Second))
	other.Spec.NodeName = "n1"
	other.Spec.Containers = []corev1.Container{container("1", "")}
	done := podAt("job", t0, nil)
	done.Spec.NodeName = "n1"
	done.Status.Phase = corev1.PodSucceeded
	done.Spec.Containers = []corev1.Container{container("4", "")}

	mine.OwnerReferences = []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-5d8f")}
	ref := v1alpha1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	pods := DecidePods([]*corev1.Pod{&mine, &pending}, ref, measurement.Workload{Pods: []measurement.Pod{{Name: "web-1", CPUUsage: 0.2, ThrottledFraction: 0.3, ServiceTime: 0.05,
		InService: 1, Queued: 9, InFlightMean: 3, MeasuredLatency: 0.4}}}, Storage{})
	require.Len(t, pods, 1)
	require.Equal(t, decide.MoveSurge, pods[0].Move)
	require.Equal(t, int64(300), pods[0].CPURequest)
	require.Equal(t, int64(600), pods[0].CPULimit)
	require.True(t, pods[0].Ready)
	require.False(t, pods[0].Terminating)
	require.Equal(t, 0.2, pods[0].CPUUsage)
	require.Equal(t, 0.3, pods[0].ThrottledFraction)
	require.Equal(t, 0.05, pods[0].ServiceTime)
	require.Equal(t, []float64{1, 9, 3, 0.4}, []float64{pods[0].InService, pods[0].Queued, pods[0].InFlightMean, pods[0].MeasuredLatency},
		"the pod's queue reaches the engine")
	leaving := mine.DeepCopy()
	leaving.DeletionTimestamp = &metav1.Time{Time: t0}
	pods = DecidePods([]*corev1.Pod{leaving}, ref, measurement.Workload{}, Storage{})
	require.Len(t, pods, 1, "a pod being deleted still runs where it runs")
	require.True(t, pods[0].Terminating, "but the engine neither moves nor counts it")
	require.False(t, pods[0].Ready)

	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	other.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("3Gi")
	done.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("5Gi")
	// The neighbour's usage is found by namespace and name: a pod of the workload
	// (or another namespace) with the same name does not stand in for it.
	nodes := DecideNodes([]*corev1.Node{&node}, []*corev1.Pod{&mine, &other, &done}, map[string]bool{"ns/web-1": true},
		measurement.Workload{
			Pods:       []measurement.Pod{{Name: "db-1", CPUUsage: 0.1}},
			Nodes:      []measurement.Node{{Name: "n1", UsedCPU: 3.5}},
			Neighbours: []measurement.Pod{{Name: "other/db-1", CPUUsage: 2}, {Name: "ns/db-1", Node: "n1", CPUUsage: 0.9}},
		}, Storage{})
	require.Len(t, nodes, 1)
	require.Equal(t, int64(4000), nodes[0].AllocatableCPU)
	require.Equal(t, int64(1300), nodes[0].RequestedCPU, "requests of running pods, finished ones excluded")
	require.Equal(t, 3.5, nodes[0].UsedCPU)
	require.Len(t, nodes[0].Pods, 1)
	require.Equal(t, "ns/db-1", nodes[0].Pods[0].Name)
	require.Equal(t, 0.9, nodes[0].Pods[0].CPUUsage, "the neighbour's own measured usage")
	require.Equal(t, int64(0), nodes[0].Pods[0].CPULimit, "no limit stays no limit")
	require.Equal(t, decide.MoveNone, nodes[0].Pods[0].Move, "a neighbour without a controller is not evicted")
	require.Contains(t, nodes[0].Pods[0].NoMove, "no controller")
	require.Equal(t, int64(7<<30), nodes[0].FreeLocalStorageBytes, "allocatable ephemeral storage minus the requests of running pods")
	require.False(t, nodes[0].Pods[0].Terminating)
	other.DeletionTimestamp = &metav1.Time{Time: t0}
	nodes = DecideNodes([]*corev1.Node{&node}, []*corev1.Pod{&other}, nil, measurement.Workload{}, Storage{})
	require.True(t, nodes[0].Pods[0].Terminating, "a neighbour being deleted is marked, and never evicted")

	bare := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	nodes = DecideNodes([]*corev1.Node{&bare}, nil, nil, measurement.Workload{}, Storage{})
	require.Zero(t, nodes[0].FreeLocalStorageBytes, "a node reporting no ephemeral storage has no room")
}

// storageFixture is a cluster of three nodes in one zone, with PersistentVolumes of
// each kind bound to claims in namespace ns.
func storageFixture(t *testing.T) Storage {
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var nodes []*corev1.Node
	for _, n := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{
			"kubernetes.io/hostname": n, "topology.kubernetes.io/zone": "z1", "disk-" + n: "true"}}})
	}
	affinity := func(key, value string) *corev1.VolumeNodeAffinity {
		return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}}}
	}
	pvs := []*corev1.PersistentVolume{
		{ObjectMeta: metav1.ObjectMeta{Name: "pv-local"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}},
			NodeAffinity:           affinity("kubernetes.io/hostname", "n1")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pv-csi-pinned"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "lvm", VolumeHandle: "v1"}},
			NodeAffinity:           affinity("disk-n1", "true")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pv-zonal"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs", VolumeHandle: "v2"}},
			NodeAffinity:           affinity("topology.kubernetes.io/zone", "z1")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pv-nfs"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}},
	}
	for _, pv := range pvs {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		require.NoError(t, volumes.Add(pv))
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-" + pv.Name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name}}
		require.NoError(t, claims.Add(claim))
	}
	require.NoError(t, claims.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-eph"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-local"}}))
	require.NoError(t, claims.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"}}))
	return Storage{Claims: corelisters.NewPersistentVolumeClaimLister(claims), Volumes: corelisters.NewPersistentVolumeLister(volumes), Nodes: nodes}
}

func TestLocalVolumes(t *testing.T) {
	limit := resource.MustParse("1Gi")
	claim := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmpfs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "local", VolumeSource: claim("c-pv-local")},
		{Name: "lvm", VolumeSource: claim("c-pv-csi-pinned")},
		{Name: "zonal", VolumeSource: claim("c-pv-zonal")},
		{Name: "nfs", VolumeSource: claim("c-pv-nfs")},
		{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "unknown", VolumeSource: claim("missing")},
		{Name: "unbound", VolumeSource: claim("pending")},
	}}}
	got := storageFixture(t).LocalVolumes(&p)
	gib := int64(1 << 30)
	require.Equal(t, []decide.Volume{
		{Name: "scratch", Node: "n1", SizeBytes: gib},
		{Name: "cache", Node: "n1"},
		{Name: "host", Node: "n1", Pinned: true},
		{Name: "local", Node: "n1", SizeBytes: 10 * gib, Pinned: true},
		{Name: "lvm", Node: "n1", SizeBytes: 10 * gib, Pinned: true},
		{Name: "eph", Node: "n1", SizeBytes: 10 * gib, Pinned: true},
		{Name: "unknown", Node: "n1", Pinned: true},
		{Name: "unbound", Node: "n1", Pinned: true},
	}, got, "memory-backed emptyDir, ConfigMaps, zonal and network volumes hold no node-local data; unknown claims count as pinned")
}

func TestResizePlan(t *testing.T) {
	ctr := func(name, req, lim string) corev1.Container {
		c := container(req, lim)
		c.Name = name
		return c
	}
	pod := func(cs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: cs}}
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		cpu     int64
		want    []ContainerCPU
		wantErr string
	}{
		{"injected pod: the app takes what the sidecar leaves", pod(ctr("app", "400m", "800m"), ctr(sidecar.ContainerName, "100m", "200m")), 900,
			[]ContainerCPU{{Name: "app", Request: 800, Limit: 1600}}, ""},
		{"sidecar listed first", pod(ctr(sidecar.ContainerName, "100m", "100m"), ctr("app", "400m", "400m")), 300,
			[]ContainerCPU{{Name: "app", Request: 200, Limit: 200}}, ""},
		{"already at the decision", pod(ctr("app", "400m", ""), ctr(sidecar.ContainerName, "100m", "")), 500, nil, ""},
		{"no limit stays no limit", pod(ctr("app", "400m", ""), ctr(sidecar.ContainerName, "100m", "")), 1100,
			[]ContainerCPU{{Name: "app", Request: 1000}}, ""},
		{"several apps share in proportion", pod(ctr("web", "300m", "600m"), ctr("worker", "100m", "100m"), ctr(sidecar.ContainerName, "100m", "")), 900,
			[]ContainerCPU{{Name: "web", Request: 600, Limit: 1200}, {Name: "worker", Request: 200, Limit: 200}}, ""},
		{"rounding goes to the biggest", pod(ctr("a", "200m", ""), ctr("b", "100m", "")), 1000,
			[]ContainerCPU{{Name: "a", Request: 667}, {Name: "b", Request: 333}}, ""},
		{"no requests: equal shares", pod(ctr("a", "", ""), ctr("b", "", "")), 500,
			[]ContainerCPU{{Name: "a", Request: 250}, {Name: "b", Request: 250}}, ""},
		{"without a sidecar the app gets it all", pod(ctr("app", "500m", "1")), 750,
			[]ContainerCPU{{Name: "app", Request: 750, Limit: 1500}}, ""},
		{"nothing left for the app", pod(ctr("app", "400m", ""), ctr(sidecar.ContainerName, "200m", "")), 200, nil, "leaves no CPU for the app"},
		{"only the sidecar", pod(ctr(sidecar.ContainerName, "100m", "")), 500, nil, "no container besides qas-proxy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResizePlan(tt.pod, tt.cpu)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			// The pod's total request is the decision.
			total := int64(0)
			planned := map[string]int64{}
			for _, c := range got {
				planned[c.Name] = c.Request
			}
			for _, c := range tt.pod.Spec.Containers {
				if r, ok := planned[c.Name]; ok {
					total += r
				} else {
					total += c.Resources.Requests.Cpu().MilliValue()
				}
			}
			require.Equal(t, tt.cpu, total)
		})
	}
}

func TestUnreachable(t *testing.T) {
	meets := decide.Candidate{Kind: decide.CandidateHorizontal, Replicas: 4, ModelledLatency: 0.15, MeetsTarget: true, Feasible: true}
	short := decide.Candidate{Kind: decide.CandidateHorizontal, Replicas: 9, ModelledLatency: 0.055, Feasible: true}
	resized := decide.Candidate{Kind: decide.CandidateVertical, Replicas: 2, ModelledLatency: 0.02, MeetsTarget: true, Feasible: false}
	for _, tc := range []struct {
		name string
		x    decide.Explanation
		want []string // substrings; none means ""
	}{
		{"a candidate meets the target", decide.Explanation{Target: 0.2, Candidates: []decide.Candidate{short, meets}}, nil},
		{"nothing weighed (within the tolerance band)", decide.Explanation{Target: 0.2}, nil},
		{"held for data", decide.Explanation{Target: 0.001, HeldBecause: "no arrival-rate data", Candidates: []decide.Candidate{short}}, nil},
		{"only a hold candidate", decide.Explanation{Target: 0.001, Candidates: []decide.Candidate{{Kind: decide.CandidateHold}}}, nil},
		{"none meets", decide.Explanation{Target: 0.001, Percentile: 99.999, ServiceTime: 0.05, Candidates: []decide.Candidate{short}},
			[]string{"p99.999 latency of 1ms is unreachable", "(9 pods) models 55ms", "E[S] = 50ms"}},
		{"meeting it only with an infeasible resize", decide.Explanation{Target: 0.01, ServiceTime: 0.05, Candidates: []decide.Candidate{short, resized}},
			[]string{"mean latency of 10ms is unreachable", "(9 pods) models 55ms"}},
		{"nothing feasible", decide.Explanation{Target: 0.01, ServiceTime: 0.05, Candidates: []decide.Candidate{resized}},
			[]string{"(2 pods) models 20ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Unreachable(tc.x)
			if tc.want == nil {
				require.Empty(t, got)
				return
			}
			for _, w := range tc.want {
				require.Contains(t, got, w)
			}
		})
	}
}

func TestResizeProblem(t *testing.T) {
	cond := func(reason string, since time.Duration) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason,
			Message: "Node didn't have enough capacity", LastTransitionTime: metav1.NewTime(t0.Add(-since))}}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"infeasible at once", cond(corev1.PodReasonInfeasible, 0), "infeasible on node n1"},
		{"deferred briefly", cond(corev1.PodReasonDeferred, 30*time.Second), ""},
		{"deferred too long", cond(corev1.PodReasonDeferred, 3*time.Minute), "deferred for 3m0s"},
		{"no condition", corev1.Pod{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ResizeProblem(&tc.pod, t0, 2*time.Minute)
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
}

func controllerRef(apiVersion, kind, name string) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name), Controller: &yes}
}

// TestMoveMethodByOwner: the way a pod moves follows its controller.
func TestMoveMethodByOwner(t *testing.T) {
	widget := v1alpha1.CrossVersionObjectReference{APIVersion: "example.qas.dev/v1", Kind: "Widget", Name: "gadget"}
	notController := controllerRef("apps/v1", "ReplicaSet", "web-5d8f")
	notController.Controller = nil
	tests := []struct {
		name      string
		owners    []metav1.OwnerReference
		target    v1alpha1.CrossVersionObjectReference
		own       decide.MoveMethod
		neighbour decide.MoveMethod
		why       string
	}{
		{"Deployment's ReplicaSet", []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-5d8f")}, widget, decide.MoveSurge, decide.MoveEvict, ""},
		{"ReplicationController", []metav1.OwnerReference{controllerRef("v1", "ReplicationController", "rc")}, widget, decide.MoveSurge, decide.MoveEvict, ""},
		{"StatefulSet", []metav1.OwnerReference{controllerRef("apps/v1", "StatefulSet", "db")}, widget, decide.MoveEvict, decide.MoveEvict, ""},
		{"the scale target itself", []metav1.OwnerReference{controllerRef("example.qas.dev/v1", "Widget", "gadget")}, widget, decide.MoveEvict, decide.MoveNone, "Widget gadget"},
		{"the target's kind under another version", []metav1.OwnerReference{controllerRef("example.qas.dev/v2", "Widget", "gadget")}, widget, decide.MoveEvict, decide.MoveNone, "Widget gadget"},
		{"another Widget", []metav1.OwnerReference{controllerRef("example.qas.dev/v1", "Widget", "other")}, widget, decide.MoveNone, decide.MoveNone, "Widget other"},
		{"a ReplicaSet of another group", []metav1.OwnerReference{controllerRef("example.qas.dev/v1", "ReplicaSet", "rs")}, widget, decide.MoveNone, decide.MoveNone, "ReplicaSet rs"},
		{"DaemonSet", []metav1.OwnerReference{controllerRef("apps/v1", "DaemonSet", "agent")}, widget, decide.MoveNone, decide.MoveNone, "DaemonSet agent"},
		{"Job", []metav1.OwnerReference{controllerRef("batch/v1", "Job", "once")}, widget, decide.MoveNone, decide.MoveNone, "Job once"},
		{"no controller", nil, widget, decide.MoveNone, decide.MoveNone, "no controller"},
		{"an owner that is not the controller", []metav1.OwnerReference{notController}, widget, decide.MoveNone, decide.MoveNone, "no controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tt.owners}}
			own, why := OwnMove(p, tt.target)
			require.Equal(t, tt.own, own)
			nb, nbWhy := NeighbourMove(p)
			require.Equal(t, tt.neighbour, nb)
			if own == decide.MoveNone {
				require.Contains(t, why, tt.why)
			} else {
				require.Empty(t, why)
			}
			if nb == decide.MoveNone {
				require.Contains(t, nbWhy, tt.why)
			} else {
				require.Empty(t, nbWhy)
			}
		})
	}
}
