package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/decide"
)

// MigrationAnnotation holds an unfinished migration on the QueueAutoscaler, so that a
// restarted or newly elected decider finishes (or aborts) it instead of starting it
// again.
const MigrationAnnotation = "qas.dev/migration"

// DeletionCostAnnotation is the ReplicaSet controller's hint of which pod to delete
// first on scale-down (lowest cost first).
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// Migration phases. Our own pod moves by surge (a ReplicaSet's: surging, then
// draining) or by eviction (a StatefulSet's: awaiting-eviction while its
// PodDisruptionBudgets refuse, then replacing); a neighbour is evicted (evicting).
const (
	phaseSurging          = "surging"           // a replacement pod is starting elsewhere
	phaseDraining         = "draining"          // the victim is marked and the target scaled back down
	phaseEvicting         = "evicting"          // a neighbour pod was evicted; its owner recreates it elsewhere
	phaseAwaitingEviction = "awaiting-eviction" // our pod's eviction is refused by a disruption budget so far; retried each cycle
	phaseReplacing        = "replacing"         // our pod was evicted; its controller recreates it elsewhere
)

// migrationState is a migration in progress.
type migrationState struct {
	Pod      string       `json:"pod"`
	FromNode string       `json:"fromNode"`
	ToNode   string       `json:"toNode"`
	Mover    decide.Mover `json:"mover"`
	// Method is how the pod moves: surge or evict (empty in a state written before
	// there was a choice: surge for our own pod, evict for a neighbour).
	Method  decide.MoveMethod `json:"method,omitempty"`
	Phase   string            `json:"phase"`
	Started time.Time         `json:"started"`
	// Replicas is the target's replica count before the surge.
	Replicas int32 `json:"replicas"`
	// Before are the workload's pods at the start: the replacement is a pod not in it.
	// A StatefulSet's replacement has the evicted pod's name, so eviction compares
	// UIDs: UID is the evicted pod's, BeforeUIDs the workload's pods at the start.
	Before     []string    `json:"before,omitempty"`
	UID        types.UID   `json:"uid,omitempty"`
	BeforeUIDs []types.UID `json:"beforeUIDs,omitempty"`
	// Tainted is true when this migration added the hot taint (and must remove it).
	Tainted bool `json:"tainted"`
	// PodsOnNode is the workload's pods on FromNode when the move was planned, handed
	// back to the engine when the migration ends (its own-mover pacing compares it
	// with the count afterwards); 0 in a state written before it was kept.
	PodsOnNode int `json:"podsOnNode,omitempty"`
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
	if m.Method == decide.MoveAny {
		m.Method = decide.MoveSurge
		if m.Mover == decide.MoverNeighbour {
			m.Method = decide.MoveEvict
		}
	}
	return &m, nil
}

// saveMigration stores m on the QueueAutoscaler.
func (c *Controller) saveMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, m *migrationState) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{MigrationAnnotation: string(data)}}})
	if err := c.patchAnnotations(ctx, qa, patch); err != nil {
		return fmt.Errorf("save migration state: %w", err)
	}
	return nil
}

// endMigration removes m's state from the QueueAutoscaler. With record set it also
// tells the engine's memory that the migration ended now (moved: the pod left the
// node), for its pacing: the cooldown, the node's back-off and, for our own pods,
// whether the move reduced the workload's pods on the node; both go in one patch, so
// that a restarted decider sees the migration either running or ended and
// remembered.
func (c *Controller) endMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, m *migrationState, record, moved bool) error {
	annotations := map[string]any{MigrationAnnotation: nil} // JSON null deletes it in a merge patch
	if record {
		engine, err := engineFromAnnotation(qa.Annotations[StateAnnotation])
		if err != nil {
			c.Log.Warn("discarding unreadable engine state", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Error(err))
			engine = decide.NewEngine()
		}
		engine.MigrationEnded(decide.MigrationPlan{Pod: m.Pod, FromNode: m.FromNode, ToNode: m.ToNode, Mover: m.Mover, Method: m.Method, PodsOnNode: m.PodsOnNode},
			c.Clock.Now(), moved)
		data, err := json.Marshal(engine.State())
		if err != nil {
			return err
		}
		annotations[StateAnnotation] = string(data)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err := c.patchAnnotations(ctx, qa, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the QueueAutoscaler, and its state, are gone
		}
		return fmt.Errorf("save the end of the migration: %w", err)
	}
	return nil
}

// startMigration carries out the first step of plan: taint the hot node, then surge
// the target by one (our own pod, surge), evict our pod (our own pod, evict: the
// Eviction API enforces its PodDisruptionBudgets, and a refusal is retried in later
// cycles) or evict the neighbour (a refusal aborts). The state is saved before each
// action, so that a decider that crashes after it still cleans up.
func (c *Controller) startMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, plan *decide.MigrationPlan) error {
	now := c.Clock.Now()
	m := &migrationState{Pod: plan.Pod, FromNode: plan.FromNode, ToNode: plan.ToNode, Mover: plan.Mover, Method: plan.Method, Started: now, Replicas: t.replicas,
		PodsOnNode: plan.PodsOnNode}
	switch {
	case plan.Mover == decide.MoverNeighbour:
		m.Method, m.Phase = decide.MoveEvict, phaseEvicting
		ns, name := splitPod(plan.Pod, qa.Namespace)
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("migration: neighbour %s: %w", plan.Pod, err)
		}
		m.UID = p.UID
	case plan.Method == decide.MoveSurge:
		m.Phase = phaseSurging
		pods, err := c.Kube.CoreV1().Pods(qa.Namespace).List(ctx, metav1.ListOptions{LabelSelector: t.selector.String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			m.Before = append(m.Before, p.Name)
		}
	case plan.Method == decide.MoveEvict:
		m.Phase = phaseAwaitingEviction
		pods, err := c.Kube.CoreV1().Pods(qa.Namespace).List(ctx, metav1.ListOptions{LabelSelector: t.selector.String()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			m.BeforeUIDs = append(m.BeforeUIDs, p.UID)
			if p.Name == plan.Pod {
				m.UID = p.UID
			}
		}
		if m.UID == "" {
			return fmt.Errorf("migration: pod %s is gone", plan.Pod)
		}
	default:
		return fmt.Errorf("migration: %s cannot be moved (move method %q)", plan.Pod, plan.Method)
	}
	tainted, err := c.holdHotTaint(ctx, plan.FromNode, holderKey(qa))
	if err != nil {
		return err
	}
	m.Tainted = tainted
	if err := c.saveMigration(ctx, qa, m); err != nil {
		if tainted {
			if uerr := c.releaseHotTaint(ctx, plan.FromNode, holderKey(qa)); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return err
	}
	switch m.Phase {
	case phaseEvicting:
		refused, err := c.evict(ctx, plan.Pod, qa.Namespace, m.UID)
		if err != nil {
			refused = err.Error()
		}
		if refused != "" {
			return c.abortMigration(ctx, qa, &t, m, refused)
		}
	case phaseSurging:
		if err := c.setReplicas(ctx, qa, t, t.replicas+1); err != nil {
			return c.abortMigration(ctx, qa, &t, m, err.Error())
		}
	case phaseAwaitingEviction:
		if _, err := c.evictOwn(ctx, qa, m, false); err != nil {
			return c.abortMigration(ctx, qa, &t, m, err.Error())
		}
	}
	c.Recorder.Eventf(qa, corev1.EventTypeNormal, "MigrationStarted", "moving %s off hot node %s (to %s or another cool node) by %s", plan.Pod, plan.FromNode, plan.ToNode, describeMethod(m))
	return nil
}

// describeMethod says how m moves its pod, for Events.
func describeMethod(m *migrationState) string {
	switch {
	case m.Mover == decide.MoverNeighbour:
		return "evicting the neighbour"
	case m.Method == decide.MoveEvict:
		return "eviction (its controller recreates it elsewhere)"
	}
	return "surge (a replacement first, then scale back)"
}

// evictOwn asks for the eviction of our pod m.Pod (the pod with m.UID) and moves m
// to phaseReplacing once it is evicted, or gone already. A PodDisruptionBudget that
// refuses is no error: m stays awaiting the eviction, which is retried next cycle,
// and refused says why; overdue turns the refusal into an abort (an error).
func (c *Controller) evictOwn(ctx context.Context, qa *v1alpha1.QueueAutoscaler, m *migrationState, overdue bool) (refused string, err error) {
	refused, err = c.evict(ctx, m.Pod, qa.Namespace, m.UID)
	if err != nil {
		return "", err
	}
	if refused != "" {
		if overdue {
			return "", fmt.Errorf("%s, for %s", refused, c.migrationTimeout())
		}
		c.Log.Info("migration: waiting for the disruption budget to allow the eviction", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.String("refused", refused))
		return refused, nil
	}
	m.Phase = phaseReplacing
	return "", c.saveMigration(ctx, qa, m)
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
	case phaseAwaitingEviction:
		victim, err := c.Kube.CoreV1().Pods(qa.Namespace).Get(ctx, m.Pod, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return true, err
		}
		if err != nil || victim.UID != m.UID || victim.DeletionTimestamp != nil {
			// Evicted already (by a decider that stopped before saving so), or gone:
			// look for its replacement.
			m.Phase = phaseReplacing
			if err := c.saveMigration(ctx, qa, m); err != nil {
				return true, err
			}
			return c.advanceMigration(ctx, qa, t, m)
		}
		refused, err := c.evictOwn(ctx, qa, m, overdue)
		if err != nil {
			if overdue {
				return false, c.abortMigration(ctx, qa, &t, m, err.Error())
			}
			return true, err
		}
		if refused == "" {
			log.Info("migration: evicted; waiting for the replacement pod to become Ready")
		}
		return true, nil
	case phaseReplacing:
		replacement, err := c.readyReplacement(ctx, qa.Namespace, t.selector, m)
		if err != nil {
			return true, err
		}
		if replacement == "" && !overdue {
			log.Info("migration: waiting for the evicted pod's replacement to become Ready")
			return true, nil
		}
		return false, c.finishMigration(ctx, qa, t, m, replacement == "")
	case phaseEvicting:
		ns, name := splitPod(m.Pod, qa.Namespace)
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return true, err
		}
		// A StatefulSet's neighbour comes back under its name: another UID is another pod.
		there := err == nil && (m.UID == "" || p.UID == m.UID)
		if there && !overdue {
			return true, nil
		}
		return false, c.finishMigration(ctx, qa, t, m, there)
	}
	// An unknown phase (a newer decider's state?): clean up rather than guess.
	return false, c.abortMigration(ctx, qa, &t, m, fmt.Sprintf("unknown migration phase %q", m.Phase))
}

// readyReplacement returns a Ready pod of the workload that did not exist when the
// migration started (by name for a surge, by UID for an eviction) and runs off the
// hot node.
func (c *Controller) readyReplacement(ctx context.Context, ns string, sel labels.Selector, m *migrationState) (string, error) {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		existed := slices.Contains(m.Before, p.Name)
		if m.Method == decide.MoveEvict {
			existed = slices.Contains(m.BeforeUIDs, p.UID)
		}
		if !existed && p.Spec.NodeName != "" && p.Spec.NodeName != m.FromNode && resources.IsReady(p) {
			return p.Name, nil
		}
	}
	return "", nil
}

// finishMigration ends m: the taint goes, the state goes, and the engine's memory
// starts the cooldown. incomplete is true when the pod did not (or not
// verifiably) leave the node in time.
func (c *Controller) finishMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, m *migrationState, incomplete bool) error {
	if m.Tainted {
		if err := c.releaseHotTaint(ctx, m.FromNode, holderKey(qa)); err != nil {
			return err
		}
	}
	if err := c.endMigration(ctx, qa, m, true, !incomplete); err != nil {
		return err
	}
	took := c.Clock.Now().Sub(m.Started).Round(time.Second)
	switch {
	case incomplete && m.Phase == phaseReplacing:
		c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationIncomplete", "%s was evicted but no replacement is Ready off %s after %s; the node is no longer held", m.Pod, m.FromNode, took)
	case incomplete:
		c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationIncomplete", "%s is still on %s after %s; the node is no longer held", m.Pod, m.FromNode, took)
	default:
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "Migrated", "moved %s off hot node %s in %s by %s", m.Pod, m.FromNode, took, describeMethod(m))
	}
	c.Log.Info("migration finished", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.String("method", string(m.Method)),
		zap.Duration("took", took), zap.Bool("incomplete", incomplete))
	return nil
}

// abortMigration undoes what the migration did (the surge, the deletion cost, the
// taint), starts the cooldown and reports why; the returned error carries the
// reason.
func (c *Controller) abortMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t *target, m *migrationState, why string) error {
	err := c.undoMigration(ctx, qa, t, m, true)
	c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationAborted", "moving %s off %s aborted: %s", m.Pod, m.FromNode, why)
	return errors.Join(fmt.Errorf("migration of %s off %s aborted: %s", m.Pod, m.FromNode, why), err)
}

// undoMigration takes the migration back: the target back to its replica count
// before the surge if it still has the surged count (skipped when t is nil: the
// target is gone; a count someone changed since is theirs and stays), the deletion
// cost off the pod that was to move, this migration's hold on the hot taint (the
// taint goes with the last holder), and the state off the QueueAutoscaler (with
// record, the engine's memory starts the cooldown). An eviction cannot be taken back:
// its pod is being recreated. Undoing twice changes nothing the second time. It
// returns what could not be undone.
func (c *Controller) undoMigration(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t *target, m *migrationState, record bool) error {
	var errs []error
	if m.Phase == phaseSurging || m.Phase == phaseDraining {
		if t != nil {
			if err := c.unsurge(ctx, qa, *t, m.Replicas); err != nil {
				errs = append(errs, err)
			}
		}
		patch := []byte(`{"metadata":{"annotations":{"` + DeletionCostAnnotation + `":null}}}`)
		if _, err := c.Kube.CoreV1().Pods(qa.Namespace).Patch(ctx, m.Pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if m.Tainted {
		if err := c.releaseHotTaint(ctx, m.FromNode, holderKey(qa)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.endMigration(ctx, qa, m, record, false); err != nil {
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
	err = c.undoMigration(ctx, qa, tp, m, false)
	c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationAborted", "moving %s off %s aborted: %s", m.Pod, m.FromNode, why)
	c.Log.Info("migration aborted", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("pod", m.Pod), zap.String("why", why), zap.Error(err))
	if err != nil {
		return fmt.Errorf("abort the migration of %s off %s: %w", m.Pod, m.FromNode, err)
	}
	return nil
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
		return false, "", c.endMigration(ctx, qa, &migrationState{}, false, false)
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
