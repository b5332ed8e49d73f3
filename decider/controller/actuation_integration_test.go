package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// spreadDeployment is a Deployment whose pods spread over the kwok nodes.
func (e *env) spreadDeployment(t *testing.T, name string, replicas int32, cpu string) {
	e.createDeployment(t, name, replicas, cpu, cpu, spread(name))
}

func (e *env) pods(t *testing.T, app string) []corev1.Pod {
	t.Helper()
	list, err := e.c.Clientset().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func (e *env) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, what)
}

func (e *env) nodeTainted(t *testing.T, node string) bool {
	n, err := e.c.Clientset().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, tt := range n.Spec.Taints {
		if tt.Key == controller.HotTaint {
			return true
		}
	}
	return false
}

// removeHotTaint makes sure no test leaves a node tainted for the next.
func (e *env) removeHotTaint(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		nodes, err := e.c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, n := range nodes.Items {
			var kept []corev1.Taint
			for _, tt := range n.Spec.Taints {
				if tt.Key != controller.HotTaint {
					kept = append(kept, tt)
				}
			}
			_, held := n.Annotations[controller.HotTaintHolders]
			if len(kept) != len(n.Spec.Taints) || held {
				n.Spec.Taints = kept
				delete(n.Annotations, controller.HotTaintHolders)
				_, _ = e.c.Clientset().CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
			}
		}
	})
}

// measureHot reports the pod on hotNode as throttled and its node at 97 % CPU, the
// others healthy.
func (e *env) measureHot(pods []corev1.Pod, hotNode string) {
	now := e.clock.Now()
	e.metrics.set(10, 0.05, now)
	e.metrics.mu.Lock()
	defer e.metrics.mu.Unlock()
	e.metrics.m.Pods = nil
	for _, p := range pods {
		u := measurement.Pod{Name: p.Name, Node: p.Spec.NodeName, CPUUsage: 0.3, ServiceTime: 0.05}
		if p.Spec.NodeName == hotNode {
			u.CPUUsage, u.ThrottledFraction, u.ServiceTime = 0.5, 0.6, 0.15
		}
		e.metrics.m.Pods = append(e.metrics.m.Pods, u)
	}
	e.metrics.m.Nodes, e.metrics.m.Neighbours = []measurement.Node{{Name: hotNode, UsedCPU: 15.5}}, nil
	for _, n := range []string{"kwok-node-1", "kwok-node-2"} {
		if n != hotNode {
			e.metrics.m.Nodes = append(e.metrics.m.Nodes, measurement.Node{Name: n, UsedCPU: 1})
		}
	}
}

func migrationSpec() map[string]any {
	return map[string]any{
		"migration": map[string]any{"enabled": true, "nodeThreshold": 0.85},
		"tolerance": 0.5,
	}
}

// TestMigratesPodOffHotNode: a pod slowed on a node at 97 % CPU moves: a replacement
// starts on the other node (the hot node is tainted meanwhile), the slowed pod is
// removed, the taint goes. A decider restarted mid-migration finishes it without a
// second surge.
func TestMigratesPodOffHotNode(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	e.spreadDeployment(t, "mig", 2, "500m")
	e.queueAutoscalerWith(t, "mig", "mig", false, migrationSpec())
	pods := e.pods(t, "mig")
	require.Len(t, pods, 2)
	require.NotEqual(t, pods[0].Spec.NodeName, pods[1].Spec.NodeName, "the spread constraint puts one pod per node")
	victim, hot := pods[0].Name, pods[0].Spec.NodeName
	e.measureHot(pods, hot)

	d, err := e.reconcile(t, e.ctrl, "mig")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Equal(t, victim, d.Migration.Pod)
	require.Equal(t, int32(3), e.replicas(t, "mig"), "surge by one")
	require.True(t, e.nodeTainted(t, hot))
	require.NotEmpty(t, e.get(t, "mig").Annotations[controller.MigrationAnnotation])
	require.NotEmpty(t, e.events(t, "MigrationStarted"))

	// A restarted decider continues the migration: no second surge.
	e.waitReplicas(t, "mig", 3)
	for _, p := range e.pods(t, "mig") {
		if p.Name != pods[0].Name && p.Name != pods[1].Name {
			require.NotEqual(t, hot, p.Spec.NodeName, "the replacement avoids the hot node")
		}
	}
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	restarted := e.newController(t)
	_, err = e.reconcile(t, restarted, "mig")
	require.NoError(t, err)
	require.Equal(t, int32(2), e.replicas(t, "mig"), "replacement Ready: back to 2")
	e.eventually(t, "the slowed pod is the one removed", func() bool {
		for _, p := range e.pods(t, "mig") {
			if p.Name == victim {
				return false
			}
		}
		return len(e.pods(t, "mig")) == 2
	})
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	_, err = e.reconcile(t, e.newController(t), "mig")
	require.NoError(t, err)
	require.False(t, e.nodeTainted(t, hot), "the taint is removed when the migration ends")
	require.Empty(t, e.get(t, "mig").Annotations[controller.MigrationAnnotation])
	require.NotEmpty(t, e.events(t, "Migrated"))
	require.Equal(t, int32(2), e.replicas(t, "mig"))
	require.True(t, e.memory(t, "mig").MigrationEnded.Equal(e.clock.Now()), "the end is remembered for the cooldown")
}

// budget creates, or updates, the PodDisruptionBudget named app over the pods
// labelled app=app, allowing maxUnavailable of them to be disrupted.
func (e *env) budget(t *testing.T, app string, maxUnavailable int32) {
	t.Helper()
	ctx := context.Background()
	budgets := e.c.Clientset().PolicyV1().PodDisruptionBudgets(e.ns)
	mu := intstr.FromInt32(maxUnavailable)
	pdb, err := budgets.Get(ctx, app, metav1.GetOptions{})
	if err == nil {
		pdb.Spec.MaxUnavailable = &mu
		_, err = budgets.Update(ctx, pdb, metav1.UpdateOptions{})
	} else {
		_, err = budgets.Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
}

// TestMigrationRespectsDisruptionBudget: a budget that allows no disruption holds the
// slowed pod; after the timeout the migration is undone.
func TestMigrationRespectsDisruptionBudget(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	e.ctrl.MigrationTimeout = time.Minute
	e.spreadDeployment(t, "pdb", 2, "500m")
	e.budget(t, "pdb", 0)
	e.queueAutoscalerWith(t, "pdb", "pdb", false, migrationSpec())
	pods := e.pods(t, "pdb")
	victim, hot := pods[0].Name, pods[0].Spec.NodeName
	e.measureHot(pods, hot)

	d, err := e.reconcile(t, e.ctrl, "pdb")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	e.waitReplicas(t, "pdb", 3)
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	_, err = e.reconcile(t, e.ctrl, "pdb")
	require.NoError(t, err)
	qa := e.get(t, "pdb")
	require.Equal(t, "Migrating", condition(qa, "ScalingActive").Reason)
	require.Contains(t, condition(qa, "ScalingActive").Message, "surging")
	require.Equal(t, int32(3), e.replicas(t, "pdb"), "held at the surge while the budget allows nothing")

	e.clock.SetTime(e.clock.Now().Add(2 * time.Minute))
	_, err = e.reconcile(t, e.ctrl, "pdb")
	require.NoError(t, err, "the abort is reported in an Event; the cycle goes on")
	require.NotEmpty(t, e.events(t, "MigrationAborted"))
	require.Equal(t, int32(2), e.replicas(t, "pdb"), "the surge is undone")
	require.False(t, e.nodeTainted(t, hot))
	e.eventually(t, "the slowed pod is kept (the budget forbade removing it)", func() bool {
		ps := e.pods(t, "pdb")
		if len(ps) != 2 {
			return false
		}
		for _, p := range ps {
			if p.Name == victim {
				return true
			}
		}
		return false
	})
}

// verticalSpec makes a CPU-bound workload for which bigger pods are the cheapest fix.
func verticalSpec() map[string]any {
	return map[string]any{
		"vertical": map[string]any{"enabled": true, "minCPU": "250m", "maxCPU": "2", "podOverheadCPU": "500m"},
		"target":   map[string]any{"latency": "300ms"},
	}
}

func (e *env) measureCPUBound(pods []corev1.Pod) {
	e.metrics.set(12, 0.2, e.clock.Now())
	e.metrics.mu.Lock()
	defer e.metrics.mu.Unlock()
	e.metrics.m.Pods = nil
	for _, p := range pods {
		e.metrics.m.Pods = append(e.metrics.m.Pods, measurement.Pod{Name: p.Name, Node: p.Spec.NodeName, CPUUsage: 0.5, ServiceTime: 0.2})
	}
}

// resizeDecision puts the Deployment name under a QueueAutoscaler with vertical
// scaling, measures its pods CPU-bound and reconciles once, which must decide a
// resize; it returns the pods and the decision.
func (e *env) resizeDecision(t *testing.T, name string) ([]corev1.Pod, decide.Decision) {
	t.Helper()
	e.queueAutoscalerWith(t, name, name, false, verticalSpec())
	pods := e.pods(t, name)
	e.measureCPUBound(pods)
	d, err := e.reconcile(t, e.ctrl, name)
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionVertical), d.Explanation.Reason)
	return pods, d
}

// TestResizesInPlaceWhenCPUBound: busy CPU-bound pods get more CPU through pods/resize,
// and kwok (the kubelet) carries it out.
func TestResizesInPlaceWhenCPUBound(t *testing.T) {
	e := setup(t)
	e.spreadDeployment(t, "cpu", 2, "500m")
	_, d := e.resizeDecision(t, "cpu")
	require.Greater(t, d.DesiredCPU, int64(500))
	e.eventually(t, "every pod runs with the new CPU", func() bool {
		for _, p := range e.pods(t, "cpu") {
			cs := p.Status.ContainerStatuses
			if len(cs) == 0 || cs[0].Resources == nil || cs[0].Resources.Requests.Cpu().MilliValue() != d.DesiredCPU {
				return false
			}
		}
		return true
	})
	qa := e.get(t, "cpu")
	require.Equal(t, d.DesiredCPU, qa.Status.DesiredCPU.MilliValue())
}

// TestInfeasibleResizeFallsBack: when the kubelet reports the resize Infeasible, the
// decider withdraws it, stays off vertical scaling (also after a restart) and scales
// horizontally instead.
func TestInfeasibleResizeFallsBack(t *testing.T) {
	e := setup(t)
	e.spreadDeployment(t, "inf", 2, "500m")
	pods, d := e.resizeDecision(t, "inf")

	// The kubelet (kwok here) says the node cannot fit it.
	ctx := context.Background()
	for _, p := range pods {
		e.eventually(t, "resize carried out", func() bool {
			got, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.Status.ContainerStatuses[0].Resources != nil && got.Status.ContainerStatuses[0].Resources.Requests.Cpu().MilliValue() == d.DesiredCPU
		})
		got, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		got.Status.Conditions = append(got.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity: cpu", LastTransitionTime: metav1.NewTime(e.clock.Now())})
		_, err = e.c.Clientset().CoreV1().Pods(e.ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	e.measureCPUBound(pods)
	fresh := e.newController(t)
	d2, err := e.reconcile(t, fresh, "inf")
	require.NoError(t, err)
	require.False(t, d2.Action.Has(decide.ActionVertical), d2.Explanation.Reason)
	require.NotEmpty(t, e.events(t, "ResizeBlocked"))
	require.NotEmpty(t, e.get(t, "inf").Annotations[controller.ResizeBlockedAnnotation])
	var blockedNote bool
	for _, c := range d2.Explanation.Candidates {
		blockedNote = blockedNote || c.Note == "the last in-place resize was infeasible or deferred too long"
	}
	require.True(t, blockedNote, "the explanation says why vertical candidates were dropped")
}

// TestResizeSizesThePodAroundTheSidecar: a pod injected with qas-proxy is resized so
// that its total CPU request is the decision: the app container takes what the
// sidecar leaves, and the sidecar keeps its CPU.
func TestResizeSizesThePodAroundTheSidecar(t *testing.T) {
	e := setup(t)
	e.deploymentOf(t, "injected", 2, corev1.PodSpec{
		TopologySpreadConstraints: spread("injected"),
		Containers:                []corev1.Container{appContainer("app", "400m", "400m"), appContainer(sidecar.ContainerName, "100m", "100m")},
	})
	_, d := e.resizeDecision(t, "injected")
	require.Greater(t, d.DesiredCPU, int64(500))
	e.eventually(t, "every pod runs with the decided CPU in total, the sidecar unchanged", func() bool {
		for _, p := range e.pods(t, "injected") {
			running := map[string]int64{}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Resources != nil {
					running[cs.Name] = cs.Resources.Requests.Cpu().MilliValue()
				}
			}
			if running["app"] != d.DesiredCPU-100 || running[sidecar.ContainerName] != 100 {
				return false
			}
		}
		return true
	})
	for _, p := range e.pods(t, "injected") {
		for _, c := range p.Spec.Containers {
			if c.Name == "app" {
				require.Equal(t, c.Resources.Requests.Cpu().MilliValue(), c.Resources.Limits.Cpu().MilliValue(), "a Guaranteed container stays Guaranteed")
			}
		}
	}
	// The next cycle reads the pods' total, sidecar included, as their CPU.
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	e.measureCPUBound(e.pods(t, "injected"))
	_, err := e.reconcile(t, e.ctrl, "injected")
	require.NoError(t, err)
	require.Equal(t, d.DesiredCPU, e.get(t, "injected").Status.CurrentCPU.MilliValue(), "status.currentCPU is the pod's total")
}

// TestDeferredResizeFallsBack: a resize the kubelet defers briefly is waited for; one
// deferred for longer than the limit is withdrawn, vertical scaling is turned off
// for a while (persisted), and the engine falls back to horizontal scaling. kwok
// sets no resize conditions, so the test writes them as the kubelet would.
func TestDeferredResizeFallsBack(t *testing.T) {
	e := setup(t)
	e.spreadDeployment(t, "deferred", 2, "500m")
	pods, d := e.resizeDecision(t, "deferred")

	ctx := context.Background()
	deferredSince := e.clock.Now().Truncate(time.Second) // condition times have whole seconds
	for _, p := range pods {
		// kwok writes pod status too: retry on its conflicts, as a kubelet would.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Status.Conditions = append(got.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough capacity: cpu", LastTransitionTime: metav1.NewTime(deferredSince)})
			_, err = e.c.Clientset().CoreV1().Pods(e.ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err)
	}

	// Deferred for 30 s, within the 2-minute limit: keep waiting.
	e.clock.SetTime(deferredSince.Add(30 * time.Second))
	e.measureCPUBound(pods)
	_, err := e.reconcile(t, e.ctrl, "deferred")
	require.NoError(t, err)
	require.Empty(t, e.get(t, "deferred").Annotations[controller.ResizeBlockedAnnotation], "a brief deferral is waited for")

	// Deferred for 3 minutes: give up on resizing, scale out instead.
	e.clock.SetTime(deferredSince.Add(3 * time.Minute))
	e.measureCPUBound(pods)
	d, err = e.reconcile(t, e.newController(t), "deferred")
	require.NoError(t, err)
	require.False(t, d.Action.Has(decide.ActionVertical), d.Explanation.Reason)
	require.True(t, d.Action.Has(decide.ActionHorizontal), d.Explanation.Reason)
	blocked := e.events(t, "ResizeBlocked")
	require.NotEmpty(t, blocked)
	require.Contains(t, blocked[0].Message, "deferred for 3m0s")
	require.NotEmpty(t, e.get(t, "deferred").Annotations[controller.ResizeBlockedAnnotation])
	e.waitReplicas(t, "deferred", d.DesiredReplicas)
}

// neighbourSetup runs our two spread pods and one big neighbour pod of another
// Deployment, and measures the neighbour's node as hot; it returns the neighbour
// pod and its node.
func (e *env) neighbourSetup(t *testing.T, name string) (corev1.Pod, string) {
	e.createDeployment(t, name+"-batch", 1, "1", "4", nil)
	neighbour := e.pods(t, name+"-batch")[0]
	hot := neighbour.Spec.NodeName
	e.spreadDeployment(t, name, 2, "500m")
	spec := migrationSpec()
	spec["migration"].(map[string]any)["mover"] = "neighbour"
	e.queueAutoscalerWith(t, name, name, false, spec)
	e.measureHot(e.pods(t, name), hot)
	e.metrics.mu.Lock()
	e.metrics.m.Neighbours = append(e.metrics.m.Neighbours, measurement.Pod{Name: neighbour.Namespace + "/" + neighbour.Name, Node: hot, CPUUsage: 4})
	e.metrics.mu.Unlock()
	return neighbour, hot
}

// TestNeighbourMoverEvicts: with mover: neighbour, the biggest other pod on the hot
// node is evicted (the Eviction API), its owner recreates it elsewhere while the hot
// node is tainted, and the migration ends with the taint removed.
func TestNeighbourMoverEvicts(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	neighbour, hot := e.neighbourSetup(t, "nbr")
	d, err := e.reconcile(t, e.ctrl, "nbr")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Equal(t, decide.MoverNeighbour, d.Migration.Mover)
	require.Equal(t, e.ns+"/"+neighbour.Name, d.Migration.Pod)
	require.Equal(t, int32(2), e.replicas(t, "nbr"), "our workload is not surged")
	e.eventually(t, "the neighbour is recreated off the hot node", func() bool {
		ps := e.readyPods(t, "nbr-batch")
		return len(ps) == 1 && ps[0].Name != neighbour.Name && ps[0].Spec.NodeName != hot
	})
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	_, err = e.reconcile(t, e.ctrl, "nbr")
	require.NoError(t, err)
	require.False(t, e.nodeTainted(t, hot), "the taint goes when the neighbour is gone")
	require.Empty(t, e.get(t, "nbr").Annotations[controller.MigrationAnnotation])
	require.NotEmpty(t, e.events(t, "Migrated"))
}

// TestNeighbourMoverRespectsDisruptionBudget: a neighbour whose budget allows no
// disruption is not evicted; the migration is aborted at once and undone.
func TestNeighbourMoverRespectsDisruptionBudget(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	neighbour, hot := e.neighbourSetup(t, "guarded")
	ctx := context.Background()
	one := intstr.FromInt32(1)
	pdb, err := e.c.Clientset().PolicyV1().PodDisruptionBudgets(e.ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded-batch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "the disruption controller has processed the budget", func() bool {
		got, err := e.c.Clientset().PolicyV1().PodDisruptionBudgets(e.ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 1
	})

	d, err := e.reconcile(t, e.ctrl, "guarded")
	require.ErrorContains(t, err, "refused by its PodDisruptionBudget")
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.NotEmpty(t, e.events(t, "MigrationAborted"))
	require.False(t, e.nodeTainted(t, hot), "the abort removes the taint")
	require.Empty(t, e.get(t, "guarded").Annotations[controller.MigrationAnnotation])
	ps := e.pods(t, "guarded-batch")
	require.Len(t, ps, 1)
	require.Equal(t, neighbour.Name, ps[0].Name, "the neighbour was not evicted")

	// The abort starts the cooldown: the next cycles do not try again at once.
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	d, err = e.reconcile(t, e.ctrl, "guarded")
	require.NoError(t, err)
	require.False(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Contains(t, d.Explanation.Reason, "cooling down")
	require.False(t, e.nodeTainted(t, hot))
}

// TestHotTaintHeldUntilTheLastMigrationEnds: migrations of several workloads off one
// node share its hot taint, which goes when the last of them ends; letting go twice
// changes nothing (a standby repeating a deleted QueueAutoscaler's undo), and a hot
// taint that QAS did not put there is never taken off.
func TestHotTaintHeldUntilTheLastMigrationEnds(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	ctx := context.Background()
	nodes, err := e.c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	node := nodes.Items[0].Name
	holders := func() string {
		n, err := e.c.Clientset().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		return n.Annotations[controller.HotTaintHolders]
	}
	hold := func(h string) (bool, error) { return controller.HoldHotTaint(ctx, e.ctrl, node, h) }
	release := func(h string) (bool, error) { return true, controller.ReleaseHotTaint(ctx, e.ctrl, node, h) }
	steps := []struct {
		name        string
		do          func(string) (bool, error)
		holder      string
		held        bool // what hold reports (release: always true)
		tainted     bool
		wantHolders string
	}{
		{"first migration taints", hold, "ns/a", true, true, "ns/a"},
		{"second joins", hold, "ns/b", true, true, "ns/a,ns/b"},
		{"holding again changes nothing", hold, "ns/a", true, true, "ns/a,ns/b"},
		{"first ends: the second still holds it", release, "ns/a", true, true, "ns/b"},
		{"first ends again: nothing", release, "ns/a", true, true, "ns/b"},
		{"last ends: the taint goes", release, "ns/b", true, false, ""},
		{"last ends again: nothing", release, "ns/b", true, false, ""},
	}
	for _, s := range steps {
		held, err := s.do(s.holder)
		require.NoError(t, err, s.name)
		require.Equal(t, s.held, held, s.name)
		require.Equal(t, s.tainted, e.nodeTainted(t, node), s.name)
		require.Equal(t, s.wantHolders, holders(), s.name)
	}

	// Someone else's hot taint: not held, not removed.
	n, err := e.c.Clientset().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: controller.HotTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	_, err = e.c.Clientset().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	held, err := hold("ns/c")
	require.NoError(t, err)
	require.False(t, held, "a taint QAS did not put there is not QAS's to hold")
	require.NoError(t, controller.ReleaseHotTaint(ctx, e.ctrl, node, "ns/c"))
	require.True(t, e.nodeTainted(t, node), "nor to remove")
	require.Empty(t, holders())

	// A holders list left on a node whose taint someone removed is stale: a new
	// migration starts it afresh.
	n, err = e.c.Clientset().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == controller.HotTaint })
	n.Annotations[controller.HotTaintHolders] = "ns/stale"
	_, err = e.c.Clientset().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	held, err = hold("ns/d")
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, "ns/d", holders())
	require.True(t, e.nodeTainted(t, node))

	_, err = controller.HoldHotTaint(ctx, e.ctrl, "no-such-node", "ns/e")
	require.Error(t, err, "a node that is gone cannot be tainted")
	require.NoError(t, controller.ReleaseHotTaint(ctx, e.ctrl, "no-such-node", "ns/e"), "nor needs its taint removed")
}
