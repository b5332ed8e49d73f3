package discovery

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func ctrl(kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "u", Controller: &yes}}
}

func container(req, lim string) corev1.Container {
	return corev1.Container{Name: "c", Resources: kubetest.CPU(req, lim)}
}

func pod(name string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{sidecar.InjectLabel: sidecar.InjectValue},
			OwnerReferences: ctrl("ReplicaSet", "web-abc")},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{container("250m", "500m"), container("50m", "100m")}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

func TestPods(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc",
		Labels: map[string]string{sidecar.InjectLabel: sidecar.InjectValue}, OwnerReferences: ctrl("Deployment", "web")}}
	// The ReplicaSet of a pod template that opted in by annotation has no label; the
	// webhook labels the pods.
	annotated := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api-xyz",
		OwnerReferences: ctrl("Deployment", "api")}}
	objs := []runtime.Object{rs, annotated,
		pod("a", nil),
		pod("b", func(p *corev1.Pod) { p.Annotations = map[string]string{sidecar.AdminPortAnnotation: "7000"} }),
		pod("c", func(p *corev1.Pod) {
			p.Annotations = map[string]string{sidecar.StatsURLAnnotation: "http://127.0.0.1:1234/stats"}
			p.OwnerReferences = ctrl("StatefulSet", "db")
			p.Spec.Containers = []corev1.Container{container("1", ""), container("100m", "1")}
		}),
		pod("d", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
		pod("e", func(p *corev1.Pod) { p.Status.PodIP = "" }),
		pod("f", func(p *corev1.Pod) { p.Annotations = map[string]string{sidecar.AdminPortAnnotation: "http"} }),
		pod("g", func(p *corev1.Pod) { p.Labels = nil }),
		pod("h", func(p *corev1.Pod) { p.OwnerReferences = nil }),
		pod("i", func(p *corev1.Pod) { p.OwnerReferences = ctrl("ReplicaSet", "api-xyz") }),
		// A replica of workload web's pooled front (the decider's qas-front-web).
		pod("qas-front-web-1", func(p *corev1.Pod) {
			p.Labels[sidecar.FrontOfLabel] = "web"
			p.OwnerReferences = ctrl("ReplicaSet", "qas-front-web-5d8")
		}),
	}
	client := fake.NewClientset(objs...)
	f := NewFactory(client, "")
	d := New(f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer f.Shutdown() // after cancel (defers run last-first): Shutdown waits for the informers to stop
	defer cancel()
	f.Start(ctx.Done())
	require.NoError(t, d.WaitForSync(ctx))

	pods, skipped, err := d.Pods()
	require.NoError(t, err)
	require.Equal(t, []Pod{
		{Target: scrape.Target{Namespace: "ns", Workload: "web", Pod: "a", Node: "node-1", URL: "http://10.0.0.1:9901/stats"}, CPURequest: 300, CPULimit: 600},
		{Target: scrape.Target{Namespace: "ns", Workload: "web", Pod: "b", Node: "node-1", URL: "http://10.0.0.1:7000/stats"}, CPURequest: 300, CPULimit: 600},
		{Target: scrape.Target{Namespace: "ns", Workload: "db", Pod: "c", Node: "node-1", URL: "http://127.0.0.1:1234/stats"}, CPURequest: 1100, CPULimit: 0},
		{Target: scrape.Target{Namespace: "ns", Workload: "h", Pod: "h", Node: "node-1", URL: "http://10.0.0.1:9901/stats"}, CPURequest: 300, CPULimit: 600},
		{Target: scrape.Target{Namespace: "ns", Workload: "api", Pod: "i", Node: "node-1", URL: "http://10.0.0.1:9901/stats"}, CPURequest: 300, CPULimit: 600},
		{Target: scrape.Target{Namespace: "ns", Workload: "web", Pod: "qas-front-web-1", Node: "node-1", URL: "http://10.0.0.1:9901/stats", Front: true}, CPURequest: 300, CPULimit: 600},
	}, pods)
	require.Equal(t, map[string]string{
		"ns/d": "not running", "ns/e": "no pod IP",
		"ns/f": `annotation qas.dev/admin-port: "http" is not a port`,
	}, skipped)
}
