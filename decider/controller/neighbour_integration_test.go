package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
)

// TestNeighbourMoverReadsNeighbourCPU: with mover: neighbour, the neighbour moved
// off a hot node is the one that uses the most CPU as the collector measured it,
// not the one that requests the most. The measurements go through the decider's
// real read path (store.Source over the points the collector writes): each
// neighbour is another workload's pod, and its usage is in its own qas_pod points.
// (Before, the controller looked neighbours up by bare pod name among the
// workload's own pods, found nothing, and so ranked them by request.)
func TestNeighbourMoverReadsNeighbourCPU(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	hot, cool := "kwok-node-1", "kwok-node-2"
	pinned := func(name, request string) {
		e.deploymentOf(t, name, 1, corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": hot},
			Containers:   []corev1.Container{appContainer("app", request, "")},
		})
	}
	pinned("nr-greedy", "2") // requests much, uses little
	pinned("nr-hog", "100m") // requests little, uses most of the node
	e.spreadDeployment(t, "nr", 2, "500m")
	spec := migrationSpec()
	spec["migration"].(map[string]any)["mover"] = "neighbour"
	e.queueAutoscalerWith(t, "nr", "nr", false, spec)

	now := e.clock.Now()
	mem := store.NewMemory()
	var pts []*write.Point
	for i := range 3 {
		at := now.Add(time.Duration(i-2) * 5 * time.Second)
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": e.ns, "workload": "nr"},
			map[string]any{"arrival_rate": 10.0, "service_mean_seconds": 0.05, "service_scv": 1.0, "latency_p95_seconds": 0.1}, at))
	}
	podPoint := func(workload string, p corev1.Pod, service, cpu float64) *write.Point {
		return write.NewPoint(influx.Pod, map[string]string{"namespace": p.Namespace, "workload": workload, "pod": p.Name, "node": p.Spec.NodeName},
			map[string]any{"service_mean_seconds": service, "cpu_usage_cores": cpu, "cpu_request_cores": 0.5, "cpu_limit_cores": 0.5}, now)
	}
	own := e.pods(t, "nr")
	onHot := false
	for _, p := range own {
		service := 0.05
		if p.Spec.NodeName == hot {
			service, onHot = 0.3, true // slowed on the hot node
		}
		pts = append(pts, podPoint("nr", p, service, 0.3))
	}
	require.True(t, onHot, "one of the workload's pods runs on the hot node")
	greedy, hog := e.pods(t, "nr-greedy")[0], e.pods(t, "nr-hog")[0]
	pts = append(pts, podPoint("nr-greedy", greedy, 0.01, 0.1), podPoint("nr-hog", hog, 0.01, 3.5))
	for node, used := range map[string]float64{hot: 15.5, cool: 1} {
		pts = append(pts, write.NewPoint(influx.Node, map[string]string{"node": node},
			map[string]any{"cpu_usage_cores": used, "cpu_allocatable_cores": 16.0}, now))
	}
	mem.Write(pts...)

	src := store.Source{Store: mem, Window: time.Minute, MaxPodAge: time.Minute}
	ctrl, stop, err := controller.NewForConfig(e.c.Config, src, nil, zaptest.NewLogger(t), e.clock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); stop() })
	require.NoError(t, ctrl.Start(ctx))
	e.synced(t, ctrl)
	ctrl.DryRun = true // the choice is what is tested; acting is TestNeighbourMoverEvicts'
	d, err := ctrl.Reconcile(context.Background(), e.ns, "nr")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Equal(t, decide.MoverNeighbour, d.Migration.Mover)
	require.Equal(t, e.ns+"/"+hog.Name, d.Migration.Pod, "the neighbour using 3.5 cores moves, not the one requesting 2")
	require.Equal(t, cool, d.Migration.ToNode)
}
