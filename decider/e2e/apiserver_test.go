package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// TestAPIServerKilledAndRestarted: two leader-elected deciders run against a control
// plane of their own. Once QAS has scaled a loaded workload and settled, kube-apiserver
// is killed (SIGKILL: watches and requests cut, nothing drained) and stays down longer
// than the lease, then starts again on the same etcd. Both deciders survive, one leads
// and decides again, and the scale they set is neither repeated nor undone.
func TestAPIServerKilledAndRestarted(t *testing.T) {
	c := kubetest.StartT(t, kubetest.Full())
	ns := c.Namespace(t)
	installCRD(t, c)
	kube := c.Clientset()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	db := influxtest.Start(t)

	f := &feed{kube: kube, ns: ns, db: db}
	f.hot.Store("")
	bg, stopFeed := context.WithCancel(context.Background())
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); f.run(bg) }()
	t.Cleanup(func() { stopFeed(); <-feedDone })
	// 20 req/s of 50 ms on pods that serve one at a time: p95 under 200 ms needs 4
	// pods, which the default scale-up rate limit allows in one step from 2.
	createDeployment(t, kube, ns, "scale", 2, "500m", false)
	f.add(workloadFeed{name: "scale", lambda: 20, es: 0.05, pod: func(corev1.Pod, string) (float64, float64) { return 0.05, 0.2 }})
	createQA(t, dyn, ns, "scale", nil)
	deciders := []*deciderProc{startDecider(t, c.Config, ns, db, "decider-a"), startDecider(t, c.Config, ns, db, "decider-b")}

	// settled returns the replicas once the last decision was to do nothing at the
	// count the Deployment has (not held there by a rate limit), and when that
	// decision was taken.
	settled := func(ctx context.Context) (replicas int32, at time.Time, ok bool) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "scale", metav1.GetOptions{})
		if err != nil {
			return 0, time.Time{}, false
		}
		obj, err := dyn.Resource(qaGVR).Namespace(ns).Get(ctx, "scale", metav1.GetOptions{})
		if err != nil {
			return 0, time.Time{}, false
		}
		action, _, _ := unstructured.NestedString(obj.Object, "status", "lastDecision", "action")
		desired, _, _ := unstructured.NestedInt64(obj.Object, "status", "desiredReplicas")
		reason, _, _ := unstructured.NestedString(obj.Object, "status", "lastDecision", "reason")
		ts, _, _ := unstructured.NestedString(obj.Object, "status", "lastDecision", "time")
		at, err = time.Parse(time.RFC3339, ts)
		return *d.Spec.Replicas, at, err == nil && action == "none" && !strings.Contains(reason, "rate limit") && int64(*d.Spec.Replicas) == desired && d.Status.ReadyReplicas == *d.Spec.Replicas
	}
	var before int32
	eventually(t, 3*time.Minute, "scaled up and settled", func(ctx context.Context) (bool, error) {
		r, _, ok := settled(ctx)
		before = r
		return ok && r > 2, nil
	})
	scaledBefore := countEvents(t, kube, ns, "scale", "Scaled")
	require.Positive(t, scaledBefore)

	require.NoError(t, c.KillAPIServer())
	time.Sleep(10 * time.Second) // longer than the lease (4 s): the leader loses it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, c.StartAPIServer(ctx))
	restarted := time.Now()

	eventually(t, 2*time.Minute, "a leader decides again after the restart", func(ctx context.Context) (bool, error) {
		_, at, ok := settled(ctx)
		return leader(ctx, kube, ns) != "" && ok && at.After(restarted.Add(time.Second)), nil
	})
	after, _, _ := settled(context.Background())
	require.Equal(t, before, after, "the scale is neither repeated nor undone")
	require.Equal(t, scaledBefore, countEvents(t, kube, ns, "scale", "Scaled"), "no further scaling action")
	for _, d := range deciders {
		select {
		case err := <-d.done:
			t.Fatalf("decider %s stopped: %v", d.identity, err)
		default:
		}
	}
}

// countEvents counts the Events of reason about object (their Count, as repeated
// Events are aggregated).
func countEvents(t *testing.T, kube kubernetes.Interface, ns, object, reason string) int32 {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	require.NoError(t, err)
	var n int32
	for _, e := range list.Items {
		n += max(e.Count, 1)
	}
	return n
}
