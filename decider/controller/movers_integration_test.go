package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// statefulSet creates a StatefulSet of kwok pods spread over the nodes and waits for
// its pods to be Ready.
func (e *env) statefulSet(t *testing.T, name string, replicas int32) {
	labels := map[string]string{"app": name}
	_, err := e.c.Clientset().AppsV1().StatefulSets(e.ns).Create(context.Background(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas, ServiceName: name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Tolerations:               []corev1.Toleration{kubetest.Toleration()},
				TopologySpreadConstraints: spread(name),
				Containers:                []corev1.Container{appContainer("app", "500m", "1")},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "the StatefulSet's pods are Ready", func() bool { return len(e.readyPods(t, name)) == int(replicas) })
}

func (e *env) statefulSetReplicas(t *testing.T, name string) int32 {
	sts, err := e.c.Clientset().AppsV1().StatefulSets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return *sts.Spec.Replicas
}

// pod returns the pod named name, or nil when there is none (or it is being deleted).
func (e *env) pod(t *testing.T, name string) *corev1.Pod {
	p, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	if p.DeletionTimestamp != nil {
		return nil
	}
	return p
}

// memory reads the engine's memory persisted on the QueueAutoscaler.
func (e *env) memory(t *testing.T, name string) decide.State {
	var st decide.State
	require.NoError(t, json.Unmarshal([]byte(e.get(t, name).Annotations[controller.StateAnnotation]), &st))
	return st
}

func (e *env) migrationPhase(t *testing.T, name string) string {
	var m struct {
		Phase  string            `json:"phase"`
		Method decide.MoveMethod `json:"method"`
	}
	v := e.get(t, name).Annotations[controller.MigrationAnnotation]
	if v == "" {
		return ""
	}
	require.NoError(t, json.Unmarshal([]byte(v), &m))
	return string(m.Method) + "/" + m.Phase
}

func statefulSetMigrationSpec(name string) map[string]any {
	spec := migrationSpec()
	spec["scaleTargetRef"] = map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name}
	return spec
}

// TestMigratesStatefulSetPodByEviction: a StatefulSet's scale-down removes its highest
// ordinal whatever the deletion cost, so its slowed pod is moved by eviction instead
// of a surge: the hot node is tainted, the pod evicted, the StatefulSet controller
// recreates it (under the same name) on the other node, and the taint goes. A decider
// restarted meanwhile finishes the move without evicting the replacement, and the
// move is remembered for the cooldown.
func TestMigratesStatefulSetPodByEviction(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	e.statefulSet(t, "sts", 2)
	e.queueAutoscalerWith(t, "sts", "sts", false, statefulSetMigrationSpec("sts"))
	pods := e.pods(t, "sts")
	require.Len(t, pods, 2)
	require.NotEqual(t, pods[0].Spec.NodeName, pods[1].Spec.NodeName, "the spread constraint puts one pod per node")
	victim, hot := pods[0], pods[0].Spec.NodeName
	e.measureHot(pods, hot)

	d, err := e.reconcile(t, e.ctrl, "sts")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Equal(t, victim.Name, d.Migration.Pod)
	require.Equal(t, decide.MoveEvict, d.Migration.Method)
	require.Equal(t, int32(2), e.statefulSetReplicas(t, "sts"), "no surge")
	require.True(t, e.nodeTainted(t, hot))
	require.Equal(t, "evict/replacing", e.migrationPhase(t, "sts"), "evicted at once: no budget stands in the way")
	require.Contains(t, e.events(t, "MigrationStarted")[0].Message, "by eviction")

	e.eventually(t, "the StatefulSet recreates the evicted pod off the hot node", func() bool {
		for _, p := range e.readyPods(t, "sts") {
			if p.Name == victim.Name {
				return p.UID != victim.UID && p.Spec.NodeName != hot
			}
		}
		return false
	})
	replacement := e.pod(t, victim.Name)

	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	_, err = e.reconcile(t, e.newController(t), "sts")
	require.NoError(t, err)
	require.False(t, e.nodeTainted(t, hot), "the taint goes once the replacement is Ready elsewhere")
	require.Empty(t, e.get(t, "sts").Annotations[controller.MigrationAnnotation])
	require.Contains(t, e.events(t, "Migrated")[0].Message, "moved "+victim.Name+" off hot node "+hot)
	now := e.pod(t, victim.Name)
	require.NotNil(t, now)
	require.Equal(t, replacement.UID, now.UID, "the replacement is not evicted again")
	require.Nil(t, now.DeletionTimestamp)
	require.Equal(t, int32(2), e.statefulSetReplicas(t, "sts"))
	mem := e.memory(t, "sts")
	require.True(t, mem.MigrationEnded.Equal(e.clock.Now()), "the end is remembered for the cooldown")
	require.Len(t, mem.MovedOff, 1)
	require.Equal(t, hot, mem.MovedOff[0].Node)
}

// TestEvictionFinishedAfterACrash: a decider that stopped between evicting our pod
// and saving that it did leaves the migration awaiting the eviction; the next decider
// sees the pod replaced (another UID under its name), does not evict the replacement,
// and finishes the move.
func TestEvictionFinishedAfterACrash(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	ctx := context.Background()
	e.statefulSet(t, "crashed", 2)
	e.queueAutoscalerWith(t, "crashed", "crashed", false, statefulSetMigrationSpec("crashed"))
	pods := e.pods(t, "crashed")
	victim, hot := pods[0], pods[0].Spec.NodeName
	e.measureHot(pods, hot)

	// What the stopped decider did: node tainted (held for this QueueAutoscaler), state saved, pod evicted.
	state := controller.AwaitingEvictionState(&victim, []types.UID{pods[0].UID, pods[1].UID}, e.clock.Now())
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{controller.MigrationAnnotation: state}}})
	_, err := e.ctrl.Dynamic.Resource(controller.GVR).Namespace(e.ns).Patch(ctx, "crashed", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	node, err := e.c.Clientset().CoreV1().Nodes().Get(ctx, hot, metav1.GetOptions{})
	require.NoError(t, err)
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: controller.HotTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[controller.HotTaintHolders] = e.ns + "/crashed"
	_, err = e.c.Clientset().CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, e.c.Clientset().CoreV1().Pods(e.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: e.ns}}))
	e.eventually(t, "the StatefulSet recreates the evicted pod off the hot node", func() bool {
		p := e.pod(t, victim.Name)
		return p != nil && p.UID != victim.UID && p.Spec.NodeName != hot && resources.IsReady(p)
	})
	replacement := e.pod(t, victim.Name)

	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	restarted := e.newController(t)
	_, err = e.reconcile(t, restarted, "crashed")
	require.NoError(t, err)
	require.Empty(t, e.migrationPhase(t, "crashed"), "finished in one cycle")
	require.False(t, e.nodeTainted(t, hot))
	got := e.pod(t, victim.Name)
	require.NotNil(t, got)
	require.Equal(t, replacement.UID, got.UID, "the replacement is not evicted")
	require.NotEmpty(t, e.events(t, "Migrated"))
}

// TestStatefulSetEvictionWaitsForDisruptionBudget: an eviction the pod's
// PodDisruptionBudget refuses (429) is retried in later cycles, also by a restarted
// decider, and goes through once the budget allows; a budget that never allows it
// aborts the migration at the timeout, without evicting anything.
func TestStatefulSetEvictionWaitsForDisruptionBudget(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	e.ctrl.MigrationTimeout = time.Minute
	ctx := context.Background()
	budgets := e.c.Clientset().PolicyV1().PodDisruptionBudgets(e.ns)
	budget := func(t *testing.T, app string, maxUnavailable int32) {
		e.budget(t, app, maxUnavailable)
		e.eventually(t, "the disruption controller has processed the budget", func() bool {
			got, err := budgets.Get(ctx, app, metav1.GetOptions{})
			return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 2 && got.Status.DisruptionsAllowed == maxUnavailable
		})
	}
	start := func(t *testing.T, app string) (corev1.Pod, string) {
		e.statefulSet(t, app, 2)
		budget(t, app, 0)
		e.queueAutoscalerWith(t, app, app, false, statefulSetMigrationSpec(app))
		pods := e.pods(t, app)
		e.measureHot(pods, pods[0].Spec.NodeName)
		d, err := e.reconcile(t, e.ctrl, app)
		require.NoError(t, err, "a refused eviction is waited for, not an error")
		require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
		require.Equal(t, "evict/awaiting-eviction", e.migrationPhase(t, app))
		require.True(t, e.nodeTainted(t, pods[0].Spec.NodeName))
		return pods[0], pods[0].Spec.NodeName
	}
	untouched := func(t *testing.T, p corev1.Pod) {
		got := e.pod(t, p.Name)
		require.NotNil(t, got)
		require.Equal(t, p.UID, got.UID, "not evicted")
		require.Nil(t, got.DeletionTimestamp, "not evicted")
	}

	t.Run("retried until the budget allows", func(t *testing.T) {
		victim, hot := start(t, "guarded")
		e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
		restarted := e.newController(t)
		_, err := e.reconcile(t, restarted, "guarded")
		require.NoError(t, err)
		untouched(t, victim)
		st := condition(e.get(t, "guarded"), "ScalingActive")
		require.Equal(t, "Migrating", st.Reason)
		require.Contains(t, st.Message, "awaiting-eviction")

		budget(t, "guarded", 1)
		e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
		_, err = e.reconcile(t, restarted, "guarded")
		require.NoError(t, err)
		require.Equal(t, "evict/replacing", e.migrationPhase(t, "guarded"))
		e.eventually(t, "the evicted pod is recreated off the hot node", func() bool {
			p := e.pod(t, victim.Name)
			return p != nil && p.UID != victim.UID && p.Spec.NodeName != hot && resources.IsReady(p)
		})
		e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
		_, err = e.reconcile(t, restarted, "guarded")
		require.NoError(t, err)
		require.Empty(t, e.migrationPhase(t, "guarded"))
		require.False(t, e.nodeTainted(t, hot))
	})

	t.Run("aborted at the timeout", func(t *testing.T) {
		victim, hot := start(t, "locked")
		e.clock.SetTime(e.clock.Now().Add(2 * time.Minute))
		_, err := e.reconcile(t, e.ctrl, "locked")
		require.NoError(t, err, "the abort is reported in an Event; the cycle goes on")
		var aborted bool
		for _, ev := range e.events(t, "MigrationAborted") {
			aborted = aborted || ev.InvolvedObject.Name == "locked"
		}
		require.True(t, aborted)
		require.Empty(t, e.migrationPhase(t, "locked"))
		require.False(t, e.nodeTainted(t, hot))
		untouched(t, victim)
		mem := e.memory(t, "locked")
		require.False(t, mem.MigrationEnded.IsZero(), "an aborted migration starts the cooldown too")
		require.Empty(t, mem.MovedOff, "nothing moved: the node's back-off is not counted")
	})
}

// TestUnmovableOwnPodsFallBackToScaling: a custom kind whose pods have no controller
// (nothing would recreate a pod elsewhere, and no deletion cost steers its
// scale-down) is not migrated: the decision says why (reason in status, log and the
// decision point, and a MigrationBlocked Event) and sizes for the slowed pods as they
// are, scaling the target out instead.
func TestUnmovableOwnPodsFallBackToScaling(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	sink := &recordingSink{}
	ctrl := e.startController(t, e.c.Config, sink)
	e.widget(t, "bare", 2)
	spec := migrationSpec()
	spec["scaleTargetRef"] = map[string]any{"apiVersion": "example.qas.dev/v1", "kind": "Widget", "name": "bare"}
	e.queueAutoscalerWith(t, "bare", "bare", false, spec)
	pods := e.pods(t, "bare")
	hot := pods[0].Spec.NodeName
	e.measureHot(pods, hot)
	e.metrics.mu.Lock()
	e.metrics.m.ServiceTime = 0.1 // the slowed pod drags the mean up: 2 pods are too few as they are
	e.metrics.mu.Unlock()

	d, err := e.reconcile(t, ctrl, "bare")
	require.NoError(t, err)
	why := "cannot move " + pods[0].Name + " off " + hot + ": it has no controller that would recreate it on another node"
	require.False(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Nil(t, d.Migration)
	require.Contains(t, d.Explanation.Reason, why)
	require.True(t, d.Action.Has(decide.ActionHorizontal), d.Explanation.Reason)
	require.Greater(t, d.DesiredReplicas, int32(2))
	require.Equal(t, int64(d.DesiredReplicas), e.widgetReplicas(t, "bare"), "scaled out instead")

	require.False(t, e.nodeTainted(t, hot), "nothing was started")
	require.Empty(t, e.get(t, "bare").Annotations[controller.MigrationAnnotation])
	require.Contains(t, e.get(t, "bare").Status.LastDecision.Reason, why)
	blocked := e.events(t, "MigrationBlocked")
	require.NotEmpty(t, blocked)
	require.Contains(t, blocked[0].Message, why)
	recorded := sink.since(0, "bare")
	require.NotEmpty(t, recorded)
	require.Contains(t, recorded[len(recorded)-1].Explanation.Reason, why, "the decision point says why")
}

// TestNeighbourMovesCoolDownAndBackOff: a neighbour that comes back to the hot node
// (its pods are pinned to it) leaves the node hot. After each move the workload cools
// down (5 minutes, kept across a restart), and each further move off the still-hot
// node waits twice as long: the decider no longer evicts neighbour after neighbour.
func TestNeighbourMovesCoolDownAndBackOff(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	hot := "kwok-node-1"
	e.deploymentOf(t, "pinned-batch", 1, corev1.PodSpec{
		NodeSelector: map[string]string{"kubernetes.io/hostname": hot},
		Containers:   []corev1.Container{appContainer("batch", "1", "4")},
	})
	e.spreadDeployment(t, "pinned", 2, "500m")
	spec := migrationSpec()
	spec["migration"].(map[string]any)["mover"] = "neighbour"
	e.queueAutoscalerWith(t, "pinned", "pinned", false, spec)
	measure := func() {
		e.measureHot(e.pods(t, "pinned"), hot)
		e.metrics.mu.Lock()
		defer e.metrics.mu.Unlock()
		for _, p := range e.pods(t, "pinned-batch") {
			e.metrics.m.Neighbours = append(e.metrics.m.Neighbours, measurement.Pod{Name: p.Namespace + "/" + p.Name, Node: p.Spec.NodeName, CPUUsage: 4})
		}
	}
	decideAt := func(at time.Time) decide.Decision {
		t.Helper()
		e.clock.SetTime(at)
		measure()
		d, err := e.reconcile(t, e.newController(t), "pinned") // a fresh decider each time: the memory is the annotation's
		require.NoError(t, err)
		return d
	}
	// move evicts the neighbour, waits for it to be gone, ends the migration, and
	// waits for the neighbour to be back on the hot node; it returns when it ended.
	move := func(at time.Time) time.Time {
		t.Helper()
		d := decideAt(at)
		require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
		require.Equal(t, decide.MoveEvict, d.Migration.Method)
		_, name, _ := strings.Cut(d.Migration.Pod, "/")
		e.eventually(t, "the neighbour is evicted", func() bool { return e.pod(t, name) == nil })
		end := at.Add(15 * time.Second)
		decideAt(end)
		require.Empty(t, e.migrationPhase(t, "pinned"), "the migration ended")
		require.False(t, e.nodeTainted(t, hot))
		e.eventually(t, "the neighbour is back on the hot node", func() bool {
			ps := e.readyPods(t, "pinned-batch")
			return len(ps) == 1 && ps[0].Spec.NodeName == hot
		})
		return end
	}
	held := func(at time.Time, why string) {
		t.Helper()
		d := decideAt(at)
		require.False(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
		require.Contains(t, d.Explanation.Reason, why)
		require.Empty(t, e.migrationPhase(t, "pinned"))
	}

	end := move(e.clock.Now())
	held(end.Add(time.Minute), "cooling down after the migration that ended at "+end.UTC().Format(time.RFC3339))
	held(end.Add(5*time.Minute-time.Second), "cooling down")
	// The decision that ends the move may already see the hot node without its
	// neighbour (evicted, its replacement not yet Ready) and say so in a first
	// MigrationBlocked event; one of them must say why the moves are held.
	blocked := e.events(t, "MigrationBlocked")
	require.True(t, slices.ContainsFunc(blocked, func(ev corev1.Event) bool { return strings.Contains(ev.Message, "cooling down") }),
		"no MigrationBlocked event says the migration is cooling down: %v", blocked)

	end = move(end.Add(5 * time.Minute)) // the node is still hot: a second move, after the cooldown
	held(end.Add(5*time.Minute), "node "+hot+" is still hot after 2 move(s) off it")
	held(end.Add(10*time.Minute-time.Second), "node "+hot+" is still hot after 2 move(s) off it")
	end = move(end.Add(10 * time.Minute))
	held(end.Add(10*time.Minute), "node "+hot+" is still hot after 3 move(s) off it")
	mem := e.memory(t, "pinned")
	require.Equal(t, []decide.StateMovedOff{{Node: hot, Last: end.UTC().Truncate(0), Moves: 3, Pods: 1, Stalled: 2}}, normalise(mem.MovedOff))
}

// normalise drops monotonic clock readings and locations, for comparing times.
func normalise(in []decide.StateMovedOff) []decide.StateMovedOff {
	out := make([]decide.StateMovedOff, len(in))
	for i, m := range in {
		out[i] = m
		out[i].Last = m.Last.UTC().Truncate(0)
	}
	return out
}

// cordon marks node unschedulable (or schedulable again), and makes sure it is
// schedulable when the test ends.
func (e *env) cordon(t *testing.T, node string, on bool) {
	t.Helper()
	set := func(on bool) error {
		ctx := context.Background()
		n, err := e.c.Clientset().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Unschedulable = on
		_, err = e.c.Clientset().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	require.NoError(t, set(on))
	if on {
		t.Cleanup(func() { _ = set(false) })
	}
}

// TestOwnMovesFollowWhileTheyMakeProgress: two of the workload's pods are slowed on a
// node that other work keeps hot, which is no reason to wait between moves. The first
// move takes one of them off; in the cycle it ends the next starts (the workload's
// pods there fell, 2 → 1), each cycle by a fresh decider whose memory is the
// annotation's. Then a scale-up lands on the hot node again: the last move made no
// progress there (1 of the workload's pods, as when it was planned), so the workload
// cools down, and the reason and a MigrationBlocked Event say why; after the cooldown
// the pod is moved.
func TestOwnMovesFollowWhileTheyMakeProgress(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	hot, cool := "kwok-node-1", "kwok-node-2"
	e.cordon(t, cool, true) // the scheduler puts both pods on the hot node
	e.createDeployment(t, "crowd", 2, "500m", "1", nil)
	e.cordon(t, cool, false)
	for _, p := range e.pods(t, "crowd") {
		require.Equal(t, hot, p.Spec.NodeName)
	}
	e.queueAutoscalerWith(t, "crowd", "crowd", false, migrationSpec())
	cycle := func() decide.Decision {
		t.Helper()
		e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
		e.measureHot(e.pods(t, "crowd"), hot)
		d, err := e.reconcile(t, e.newController(t), "crowd")
		require.NoError(t, err)
		return d
	}
	// finish carries the surge that d started to its end and returns the decision of
	// the cycle in which it ended.
	finish := func(d decide.Decision) decide.Decision {
		t.Helper()
		require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
		require.Equal(t, "surge/surging", e.migrationPhase(t, "crowd"))
		e.waitReplicas(t, "crowd", 3)
		cycle()
		require.Equal(t, "surge/draining", e.migrationPhase(t, "crowd"))
		e.eventually(t, "the moved pod goes", func() bool { return e.pod(t, d.Migration.Pod) == nil })
		return cycle()
	}

	first := cycle()
	require.Equal(t, 2, first.Migration.PodsOnNode)
	second := finish(first)
	require.True(t, second.Action.Has(decide.ActionMigrate), "the move made progress: the next at once; %s", second.Explanation.Reason)
	require.Equal(t, hot, second.Migration.FromNode)
	require.NotEqual(t, first.Migration.Pod, second.Migration.Pod)
	require.Equal(t, 1, second.Migration.PodsOnNode)
	require.Contains(t, e.get(t, "crowd").Annotations[controller.MigrationAnnotation], `"podsOnNode":1`, "kept with the migration, across restarts")
	after := finish(second)
	require.False(t, after.Action.Has(decide.ActionMigrate), "nothing slowed is left on the hot node: %s", after.Explanation.Reason)
	for _, p := range e.pods(t, "crowd") {
		require.Equal(t, cool, p.Spec.NodeName)
	}
	mem := e.memory(t, "crowd")
	require.Equal(t, hot, mem.MigrationFrom)
	require.True(t, mem.MigrationMoved)
	require.Equal(t, []decide.StateMovedOff{{Node: hot, Last: e.clock.Now().UTC().Truncate(0), Moves: 2, Pods: 1}}, normalise(mem.MovedOff))

	// A scale-up the scheduler places on the hot node.
	e.cordon(t, cool, true)
	scale, err := e.c.Clientset().AppsV1().Deployments(e.ns).GetScale(context.Background(), "crowd", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas++
	_, err = e.c.Clientset().AppsV1().Deployments(e.ns).UpdateScale(context.Background(), "crowd", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.waitReplicas(t, "crowd", scale.Spec.Replicas)
	e.cordon(t, cool, false)
	ended := e.clock.Now()
	why := "cooling down after the migration that ended at " + ended.UTC().Format(time.RFC3339) +
		", which did not reduce the workload's pods on " + hot + " (1 there now, 1 when the move was planned)"
	held := cycle()
	require.False(t, held.Action.Has(decide.ActionMigrate), held.Explanation.Reason)
	require.Contains(t, held.Explanation.Reason, why)
	var blocked bool
	for _, ev := range e.events(t, "MigrationBlocked") {
		blocked = blocked || strings.Contains(ev.Message, why)
	}
	require.True(t, blocked, "a MigrationBlocked Event says why")

	e.clock.SetTime(ended.Add(5*time.Minute - 15*time.Second))
	d := cycle()
	require.True(t, d.Action.Has(decide.ActionMigrate), "the cooldown is over: %s", d.Explanation.Reason)
	require.Equal(t, hot, d.Migration.FromNode)
}
