package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// MigrationAnnotation holds an unfinished migration on the QueueAutoscaler, so that a
// restarted or newly elected decider finishes (or aborts) it instead of starting it
// again.
const MigrationAnnotation = "qas.dev/migration"

// HotTaint keeps new pods off a node while a pod is moved off it. The decider adds it
// only for the duration of a migration and removes it when the migration ends.
const HotTaint = "qas.dev/hot"

// DeletionCostAnnotation is the ReplicaSet controller's hint of which pod to delete
// first on scale-down (lowest cost first).
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Migration phases.
const (
	phaseSurging  = "surging"  // a replacement pod is starting elsewhere
	phaseDraining = "draining" // the victim is marked and the target scaled back down
	phaseEvicting = "evicting" // a neighbour pod was evicted; its owner recreates it elsewhere
)

// migrationState is a migration in progress.
type migrationState struct {
	Pod      string       `json:"pod"`
	FromNode string       `json:"fromNode"`
	ToNode   string       `json:"toNode"`
	Mover    decide.Mover `json:"mover"`
	Phase    string       `json:"phase"`
	Started  time.Time    `json:"started"`
	// Replicas is the target's replica count before the surge.
	Replicas int32 `json:"replicas"`
	// Before are the workload's pods at the start: the replacement is a pod not in it.
	Before []string `json:"before,omitempty"`
	// Tainted is true when this migration added the hot taint (and must remove it).
	Tainted bool `json:"tainted"`
}

// MigrationTimeout bounds a migration: a replacement that is not Ready by then (or a
// PodDisruptionBudget that still allows no disruption) aborts it.
func (c *Controller) migrationTimeout() time.Duration {
	if c.MigrationTimeout > 0 {
		return c.MigrationTimeout
	}
	return 5 * time.Minute
}

func migrationFromAnnotation(v string) (*migrationState, error) {
	if v == "" {
		return nil, nil
	}
	var m migrationState
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// saveMigration stores m on the QueueAutoscaler (nil removes it).
func (c *Controller) saveMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, m *migrationState) error {
	var value any // JSON null deletes the annotation in a merge patch
	if m != nil {
		data, err := json.Marshal(m)
		if err != nil {
			return err
		}
		value = string(data)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{MigrationAnnotation: value}}})
	if err := c.patchAnnotations(ctx, qa, patch); err != nil {
		if m == nil && apierrors.IsNotFound(err) {
			return nil // the QueueAutoscaler, and its state, are gone
		}
		return fmt.Errorf("save migration state: %w", err)
	}
	return nil
}

// startMigration carries out the first step of plan: taint the hot node, then either
// surge the target by one (our own pod moves) or evict the neighbour (the neighbour
// moves; the Eviction API enforces its PodDisruptionBudgets).
func (c *Controller) startMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, plan *decide.MigrationPlan) error {
	now := c.Clock.Now()
	m := &migrationState{Pod: plan.Pod, FromNode: plan.FromNode, ToNode: plan.ToNode, Mover: plan.Mover, Started: now, Replicas: t.replicas}
	tainted, err := c.setHotTaint(ctx, plan.FromNode, true)
	if err != nil {
		return err
	}
	m.Tainted = tainted
	if plan.Mover == decide.MoverNeighbour {
		m.Phase = phaseEvicting
		// Saved before acting, so that a crash after the action still cleans up.
		if err := c.saveMigration(ctx, qa, m); err != nil {
			return err
		}
		if err := c.evict(ctx, plan.Pod); err != nil {
			return c.abortMigration(ctx, qa, &t, m, err.Error())
		}
	} else {
		pods, err := c.Kube.CoreV1().Pods(qa.Namespace).List(ctx, metav1.ListOptions{LabelSelector: t.selector.String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			m.Before = append(m.Before, p.Name)
		}
		m.Phase = phaseSurging
		if err := c.saveMigration(ctx, qa, m); err != nil {
			return err
		}
		if err := c.setReplicas(ctx, qa, t, t.replicas+1); err != nil {
			return c.abortMigration(ctx, qa, &t, m, err.Error())
		}
	}
	c.Recorder.Eventf(qa, corev1.EventTypeNormal, "MigrationStarted", "moving %s off hot node %s (to %s or another cool node)", plan.Pod, plan.FromNode, plan.ToNode)
	return nil
}

// advanceMigration moves an unfinished migration one step on; it returns true while
// the migration is still in progress (the engine then waits).
func (c *Controller) advanceMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, m *migrationState) (bool, error) {
	now := c.Clock.Now()
	overdue := now.Sub(m.Started) > c.migrationTimeout()
	log := c.Log.With(zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.String("phase", m.Phase))
	switch m.Phase {
	case phaseSurging:
		victim, err := c.Kube.CoreV1().Pods(qa.Namespace).Get(ctx, m.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// The victim went away by itself: the surge pod replaces it; scale back.
			return false, c.finishMigration(ctx, qa, t, m, true)
		}
		if err != nil {
			return true, err
		}
		replacement, err := c.readyReplacement(ctx, qa.Namespace, t.selector, m)
		if err != nil {
			return true, err
		}
		if replacement == "" {
			if overdue {
				return false, c.abortMigration(ctx, qa, &t, m, fmt.Sprintf("no replacement pod Ready off %s within %s", m.FromNode, c.migrationTimeout()))
			}
			log.Info("migration: waiting for the replacement pod to become Ready")
			return true, nil
		}
		if err := c.pdbAllows(ctx, victim); err != nil {
			if overdue {
				return false, c.abortMigration(ctx, qa, &t, m, err.Error())
			}
			log.Info("migration: waiting for the disruption budget", zap.Error(err))
			return true, nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{DeletionCostAnnotation: "-1000"}}})
		if _, err := c.Kube.CoreV1().Pods(qa.Namespace).Patch(ctx, m.Pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return true, fmt.Errorf("migration: mark %s for deletion: %w", m.Pod, err)
		}
		m.Phase = phaseDraining
		if err := c.saveMigration(ctx, qa, m); err != nil {
			return true, err
		}
		if err := c.setReplicas(ctx, qa, t, m.Replicas); err != nil {
			return true, err
		}
		log.Info("migration: replacement Ready; scaling back down", zap.String("replacement", replacement))
		return true, nil
	case phaseDraining:
		if err := c.setReplicas(ctx, qa, t, m.Replicas); err != nil { // idempotent, also after a restart
			return true, err
		}
		victim, err := c.Kube.CoreV1().Pods(qa.Namespace).Get(ctx, m.Pod, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return true, err
		}
		if err == nil && victim.DeletionTimestamp == nil && !overdue {
			return true, nil
		}
		return false, c.finishMigration(ctx, qa, t, m, err == nil && victim.DeletionTimestamp == nil)
	case phaseEvicting:
		ns, name := splitPod(m.Pod, qa.Namespace)
		_, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return true, err
		}
		if err == nil && !overdue {
			return true, nil
		}
		return false, c.finishMigration(ctx, qa, t, m, err == nil)
	}
	// An unknown phase (a newer decider's state?): clean up rather than guess.
	return false, c.abortMigration(ctx, qa, &t, m, fmt.Sprintf("unknown migration phase %q", m.Phase))
}

// readyReplacement returns a Ready pod of the workload that did not exist when the
// migration started and runs off the hot node.
func (c *Controller) readyReplacement(ctx context.Context, ns string, sel labels.Selector, m *migrationState) (string, error) {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", err
	}
	before := map[string]bool{}
	for _, p := range m.Before {
		before[p] = true
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !before[p.Name] && p.Spec.NodeName != "" && p.Spec.NodeName != m.FromNode && IsReady(p) {
			return p.Name, nil
		}
	}
	return "", nil
}

func (c *Controller) finishMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, m *migrationState, timedOut bool) error {
	if m.Tainted {
		if _, err := c.setHotTaint(ctx, m.FromNode, false); err != nil {
			return err
		}
	}
	if err := c.saveMigration(ctx, qa, nil); err != nil {
		return err
	}
	took := c.Clock.Now().Sub(m.Started).Round(time.Second)
	if timedOut {
		c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationIncomplete", "%s is still on %s after %s; the node is no longer held", m.Pod, m.FromNode, took)
	} else {
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "Migrated", "moved %s off hot node %s in %s", m.Pod, m.FromNode, took)
	}
	c.Log.Info("migration finished", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.Duration("took", took), zap.Bool("incomplete", timedOut))
	return nil
}

// abortMigration undoes what the migration did (the surge, the deletion cost, the
// taint) and reports why; the returned error carries the reason.
func (c *Controller) abortMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t *target, m *migrationState, why string) error {
	err := c.undoMigration(ctx, qa, t, m)
	c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationAborted", "moving %s off %s aborted: %s", m.Pod, m.FromNode, why)
	return errors.Join(fmt.Errorf("migration of %s off %s aborted: %s", m.Pod, m.FromNode, why), err)
}

// undoMigration takes the migration back: the target back to its replica count
// before the surge (skipped when t is nil: the target is gone), the deletion cost off
// the pod that was to move, the hot taint off the node if the migration added it,
// and the state off the QueueAutoscaler. It returns what could not be undone.
func (c *Controller) undoMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t *target, m *migrationState) error {
	var errs []error
	if m.Phase == phaseSurging || m.Phase == phaseDraining {
		if t != nil {
			if err := c.setReplicas(ctx, qa, *t, m.Replicas); err != nil {
				errs = append(errs, err)
			}
		}
		patch := []byte(`{"metadata":{"annotations":{"` + DeletionCostAnnotation + `":null}}}`)
		if _, err := c.Kube.CoreV1().Pods(qa.Namespace).Patch(ctx, m.Pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if m.Tainted {
		if _, err := c.setHotTaint(ctx, m.FromNode, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.saveMigration(ctx, qa, nil); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AbortMigrations undoes every unfinished migration, for a decider that stops: a
// migration nobody advances would leave its hot node tainted and its target surged
// until the next decider takes over, and for ever if QAS is being uninstalled. It
// runs also in dry run, since it only restores what a migration changed. It returns
// what could not be undone.
func (c *Controller) AbortMigrations(ctx context.Context, why string) error {
	list, err := c.Dynamic.Resource(GVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list queueautoscalers: %w", err)
	}
	var errs []error
	for _, item := range list.Items {
		if item.GetAnnotations()[MigrationAnnotation] == "" {
			continue
		}
		var qa v1alpha1.QueueAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &qa); err != nil {
			errs = append(errs, fmt.Errorf("decode %s/%s: %w", item.GetNamespace(), item.GetName(), err))
			continue
		}
		if err := c.abortStored(ctx, &qa, why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// abortStored aborts the migration stored on qa, if any.
func (c *Controller) abortStored(ctx context.Context, qa *v1alpha1.QueueAutoscaler, why string) error {
	m, err := migrationFromAnnotation(qa.Annotations[MigrationAnnotation])
	if err != nil || m == nil {
		return err
	}
	var tp *target
	if t, err := c.resolveTarget(ctx, qa); err == nil {
		tp = &t
	} else {
		c.Log.Warn("migration aborted without restoring replicas: the target cannot be read", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Error(err))
	}
	err = c.undoMigration(ctx, qa, tp, m)
	c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationAborted", "moving %s off %s aborted: %s", m.Pod, m.FromNode, why)
	c.Log.Info("migration aborted", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.String("why", why), zap.Error(err))
	if err != nil {
		return fmt.Errorf("abort the migration of %s off %s: %w", m.Pod, m.FromNode, err)
	}
	return nil
}

// setReplicas sets the target's replica count through the scale subresource.
func (c *Controller) setReplicas(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, n int32) error {
	sc, err := c.Scales.Scales(qa.Namespace).Get(ctx, t.resource.GroupResource(), qa.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
	if err == nil && sc.Spec.Replicas != n {
		sc.Spec.Replicas = n
		_, err = c.Scales.Scales(qa.Namespace).Update(ctx, t.resource.GroupResource(), sc, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", qa.Spec.ScaleTargetRef.Name, n, err)
	}
	return nil
}

// setHotTaint adds or removes the NoSchedule hot taint; it reports whether it added
// it (false when the node already had it).
func (c *Controller) setHotTaint(ctx context.Context, node string, on bool) (bool, error) {
	for attempt := 0; attempt < 4; attempt++ {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !on {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("node %s: %w", node, err)
		}
		var kept []corev1.Taint
		has := false
		for _, tt := range n.Spec.Taints {
			if tt.Key == HotTaint {
				has = true
				continue
			}
			kept = append(kept, tt)
		}
		if has == on {
			return false, nil
		}
		if on {
			kept = append(kept, corev1.Taint{Key: HotTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = kept
		_, err = c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			return on, nil
		}
		if !apierrors.IsConflict(err) {
			return false, fmt.Errorf("taint node %s: %w", node, err)
		}
	}
	return false, fmt.Errorf("taint node %s: kept conflicting with other writers", node)
}

// pdbAllows checks that the PodDisruptionBudgets selecting pod allow one more
// disruption now. During a surge their status counts the replacement once it is Ready.
func (c *Controller) pdbAllows(ctx context.Context, pod *corev1.Pod) error {
	pdbs, err := c.Kube.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			return fmt.Errorf("PodDisruptionBudget %s allows no disruption now (%d healthy, %d required)", pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy)
		}
	}
	return nil
}

// evict asks the Eviction API to remove a neighbour pod ("namespace/name"); it
// enforces the pod's PodDisruptionBudgets.
func (c *Controller) evict(ctx context.Context, pod string) error {
	ns, name := splitPod(pod, "")
	err := c.Kube.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("eviction of %s refused by its PodDisruptionBudget: %v", pod, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("evict %s: %w", pod, err)
	}
	return nil
}

// splitPod splits "namespace/name" (how the engine names neighbour pods); a bare name
// is in def.
func splitPod(pod, def string) (ns, name string) {
	if ns, name, ok := strings.Cut(pod, "/"); ok {
		return ns, name
	}
	return def, pod
}

// continueMigration advances a migration left on qa by an earlier cycle (or an earlier
// decider). While it runs, the engine does not decide: busy is true and why says
// what the migration waits for. In dry run an unfinished migration is frozen: it is
// reported, neither advanced nor aborted (dry run changes nothing), until dry run is
// turned off. When the migration ends, t is refreshed.
func (c *Controller) continueMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t *target) (busy bool, why string, err error) {
	m, err := migrationFromAnnotation(qa.Annotations[MigrationAnnotation])
	if err != nil {
		c.Log.Warn("discarding unreadable migration state", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Error(err))
		return false, "", c.saveMigration(ctx, qa, nil)
	}
	if m == nil {
		return false, "", nil
	}
	what := fmt.Sprintf("moving %s off hot node %s: %s since %s", m.Pod, m.FromNode, m.Phase, m.Started.UTC().Format(time.RFC3339))
	if c.dryRun(qa) {
		return true, "migration frozen by dry run (" + what + "); it continues when dry run is off", nil
	}
	busy, err = c.advanceMigration(ctx, qa, *t, m)
	if busy {
		why = "migration in progress: " + what
		if err != nil {
			why += ": " + err.Error()
		}
		return true, why, err
	}
	if err != nil {
		c.Recorder.Event(qa, corev1.EventTypeWarning, "FailedAction", err.Error())
	}
	fresh, rerr := c.resolveTarget(ctx, qa)
	if rerr != nil {
		return false, "", errors.Join(err, rerr)
	}
	*t = fresh
	return false, "", nil
}
