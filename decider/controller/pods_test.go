package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	pods := []corev1.Pod{
		podAt("old", t0, at(30*time.Second)),
		podAt("new", t0.Add(time.Minute), at(time.Minute+10*time.Second)),
		podAt("never-ready", t0.Add(2*time.Minute), nil),
		podAt("skewed", t0.Add(3*time.Minute), at(2*time.Minute)),
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
			require.Equal(t, tt.want, InitTimes(pods, tt.limit))
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

	pods := DecidePods([]corev1.Pod{mine, pending}, map[string]PodUsage{"web-1": {CPUCores: 0.2, ThrottledFraction: 0.3, ServiceTime: 0.05}})
	require.Len(t, pods, 1)
	require.Equal(t, int64(300), pods[0].CPURequest)
	require.Equal(t, int64(600), pods[0].CPULimit)
	require.True(t, pods[0].Ready)
	require.Equal(t, 0.3, pods[0].ThrottledFraction)

	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	nodes := DecideNodes([]corev1.Node{node}, []corev1.Pod{mine, other, done}, map[string]bool{"ns/web-1": true},
		map[string]NodeUsage{"n1": {CPUCores: 3.5}}, map[string]PodUsage{"db-1": {CPUCores: 0.9}})
	require.Len(t, nodes, 1)
	require.Equal(t, int64(4000), nodes[0].AllocatableCPU)
	require.Equal(t, int64(1300), nodes[0].RequestedCPU, "requests of running pods, finished ones excluded")
	require.Equal(t, 3.5, nodes[0].UsedCPU)
	require.Len(t, nodes[0].Pods, 1)
	require.Equal(t, "ns/db-1", nodes[0].Pods[0].Name)
	require.Equal(t, int64(0), nodes[0].Pods[0].CPULimit, "no limit stays no limit")
}

func TestLocalVolumes(t *testing.T) {
	limit := resource.MustParse("1Gi")
	p := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", Volumes: []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmpfs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}}}
	got := LocalVolumes(&p)
	require.Len(t, got, 3, "memory-backed emptyDir and ConfigMaps hold no node-local data")
	require.Equal(t, "scratch", got[0].Name)
	require.Equal(t, int64(1<<30), got[0].SizeBytes)
	require.Equal(t, "n1", got[0].Node)
	require.Equal(t, "host", got[2].Name)
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
