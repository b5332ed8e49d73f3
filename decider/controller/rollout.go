package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// Routing switches reach running pods (docs/pooling.md): the webhook configures a
// pod's sidecar for pooling only when the pod is created, so after routing changes
// the pods created before keep the old routing. Once the new routing can work (routing
// pooled: the front is ready; routing random: the pooling objects are gone) the
// controller rolls the target Deployment once per switch, as `kubectl rollout
// restart` does: it writes an annotation into the pod template, and the Deployment
// controller replaces the pods under the Deployment's own rolling-update strategy.
// The controller never deletes a pod for it.
//
// What a switch is, and whether the Deployment was rolled for it, is read from the
// API each cycle, never from the decider's memory, so that a restarted or newly
// elected decider neither rolls twice nor forgets to roll:
//   - RoutingSwitchAnnotation on the QueueAutoscaler names the switch:
//     "<routing>/<generation>", written when a cycle first sees the routing differ
//     from the one it names;
//   - RoutingRolloutAnnotation in the Deployment's pod template names the switch the
//     Deployment was rolled for.
//
// A roll is needed only while some pod with the qas-proxy sidecar does not follow the
// routing (the webhook's PodPoolingAnnotation says whether it pools): a Deployment
// whose pods were all created after the switch is not rolled.

// PodPoolingAnnotation is the webhook's annotation on a pod whose proxy pools (its
// value is the workload; decider/inject AnnotationPooling).
const PodPoolingAnnotation = "qas.dev/pooling"

// PoolingRolloutAnnotation on a QueueAutoscaler chooses who restarts the target's pods
// after a routing switch: absent or "auto", the controller; "manual", the user (the
// controller then says, in an Event and the PodsFollowRouting condition, which pods
// still have the old routing).
const PoolingRolloutAnnotation = "qas.dev/pooling-rollout"

// Values of PoolingRolloutAnnotation.
const (
	PoolingRolloutAuto   = "auto"
	PoolingRolloutManual = "manual"
)

// RoutingSwitchAnnotation on a QueueAutoscaler names the routing switch the
// controller last saw: "<routing>/<metadata.generation>".
const RoutingSwitchAnnotation = "qas.dev/routing-switch"

// RoutingRolloutAnnotation in a Deployment's pod template names the routing switch
// (RoutingSwitchAnnotation's value) the controller rolled the Deployment for.
const RoutingRolloutAnnotation = "qas.dev/routing-rollout"

// RoutingRestartedAtAnnotation in a Deployment's pod template is when the controller
// rolled it (RFC 3339), as kubectl's kubectl.kubernetes.io/restartedAt.
const RoutingRestartedAtAnnotation = "qas.dev/routing-restartedAt"

// PodsFollowRoutingCondition says whether the target's pods run with the
// QueueAutoscaler's routing, and what the controller did about those that do not.
// It is absent for a QueueAutoscaler that never pooled.
const PodsFollowRoutingCondition = "PodsFollowRouting"

// Reasons of PodsFollowRoutingCondition.
const (
	ReasonPodsMatch          = "PodsMatch"
	ReasonRolled             = "Rolled"
	ReasonWaitingToRoll      = "WaitingToRoll"
	ReasonManualRollout      = "ManualRollout"
	ReasonNotADeployment     = "NotADeployment"
	ReasonDeploymentPaused   = "DeploymentPaused"
	ReasonDryRunRollout      = "DryRun"
	ReasonInvalidRolloutMode = "InvalidRolloutMode"
	ReasonFailedRollout      = "FailedRollout"
)

// rolloutStep is what decideRollout chose.
type rolloutStep int

const (
	// stepNone: every pod with the sidecar follows the routing.
	stepNone rolloutStep = iota
	// stepRolled: the Deployment was already rolled for this switch; its rollout
	// replaces the remaining pods.
	stepRolled
	// stepRoll: roll the Deployment now.
	stepRoll
	// stepWait: the new routing cannot work yet (front not ready, pooling objects
	// not removed, a migration under way); roll in a later cycle.
	stepWait
	stepManual
	stepInvalidMode
	stepNotDeployment
	stepPaused
	stepDryRun
)

// rolloutInput is what the roll decision depends on.
type rolloutInput struct {
	// mismatched of proxied pods (pods with the qas-proxy sidecar, not terminating)
	// do not follow the routing.
	proxied, mismatched int
	// deployment: the target is an apps Deployment.
	deployment bool
	// mode is PoolingRolloutAnnotation's value.
	mode string
	// ready: the new routing can work now.
	ready  bool
	dryRun bool
	// switchID is the current switch, stamp the one the pod template was rolled for
	// ("" when not read: no pod mismatches, or not a Deployment), paused the
	// Deployment's spec.paused.
	switchID, stamp string
	paused          bool
}

// decideRollout chooses what to do about the pods that do not follow the routing.
func decideRollout(in rolloutInput) rolloutStep {
	switch {
	case in.mismatched == 0:
		return stepNone
	case !in.deployment:
		return stepNotDeployment
	case in.stamp != "" && in.stamp == in.switchID:
		return stepRolled
	case in.mode == PoolingRolloutManual:
		return stepManual
	case in.mode != "" && in.mode != PoolingRolloutAuto:
		return stepInvalidMode
	case !in.ready:
		return stepWait
	case in.dryRun:
		return stepDryRun
	case in.paused:
		return stepPaused
	}
	return stepRoll
}

// podCensus counts the target's pods by routing.
type podCensus struct {
	all, proxied, mismatched int
	// sinceRoll are the mismatched pods created at or after the roll (the webhook
	// did not give them the routing).
	sinceRoll int
}

// hasProxy reports whether p runs the qas-proxy sidecar.
func hasProxy(p *corev1.Pod) bool {
	for _, ct := range p.Spec.Containers {
		if ct.Name == sidecar.ContainerName {
			return true
		}
	}
	return false
}

// followsRouting reports whether p's sidecar has the routing: pooled for workload, or
// not pooled.
func followsRouting(p *corev1.Pod, pooled bool, workload string) bool {
	if pooled {
		return p.Annotations[PodPoolingAnnotation] == workload
	}
	return p.Annotations[PodPoolingAnnotation] == ""
}

// countPods takes the census of pods; terminating pods are on their way out and do
// not count. rolledAt (zero: unknown) splits the mismatched pods by creation.
func countPods(pods []*corev1.Pod, pooled bool, workload string, rolledAt time.Time) podCensus {
	var c podCensus
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		c.all++
		if !hasProxy(p) {
			continue
		}
		c.proxied++
		if !followsRouting(p, pooled, workload) {
			c.mismatched++
			if !rolledAt.IsZero() && !p.CreationTimestamp.Time.Before(rolledAt) {
				c.sinceRoll++
			}
		}
	}
	return c
}

// rolloutOutcome is what reconcileRollout found and did, for the status.
type rolloutOutcome struct {
	// active: the condition is set (the QueueAutoscaler has a routing switch).
	active  bool
	status  metav1.ConditionStatus
	reason  string
	message string
}

func (o rolloutOutcome) condition(st *v1alpha1.QueueAutoscalerStatus, gen int64, now time.Time) {
	if !o.active {
		return
	}
	resources.SetCondition(st, PodsFollowRoutingCondition, o.status, o.reason, o.message, gen, now)
}

// switchRouting is the routing a RoutingSwitchAnnotation value names.
func switchRouting(v string) string {
	routing, _, _ := strings.Cut(v, "/")
	return routing
}

// isDeployment reports whether t is an apps Deployment.
func (t target) isDeployment() bool {
	return t.resource.Group == appsv1.GroupName && t.resource.Resource == "deployments"
}

// reconcileRollout rolls qa's target Deployment once per routing switch when some of
// its pods do not follow the routing and the routing can work (pool is this cycle's
// pooling outcome; busy: a migration is under way, so wait). A failure is announced as
// a Warning Event and reported in the condition; it does not stop the cycle.
func (c *Controller) reconcileRollout(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, pods []*corev1.Pod, pool poolingOutcome, busy bool) rolloutOutcome {
	routing := routingOf(qa)
	isPooled := pooled(qa)
	workload := qa.Spec.ScaleTargetRef.Name
	census := countPods(pods, isPooled, workload, time.Time{})
	switchID := qa.Annotations[RoutingSwitchAnnotation]
	if switchID == "" && !isPooled && census.mismatched == 0 {
		// Never pooled (the common case): no condition, no API request.
		return rolloutOutcome{}
	}
	if switchRouting(switchID) != routing {
		switchID = fmt.Sprintf("%s/%d", routing, qa.Generation)
		if err := c.patchAnnotation(ctx, qa, RoutingSwitchAnnotation, switchID); err != nil {
			return c.rolloutFailed(qa, fmt.Errorf("record the routing switch %s in annotation %s: %w", switchID, RoutingSwitchAnnotation, err))
		}
	}
	in := rolloutInput{
		proxied: census.proxied, mismatched: census.mismatched, deployment: t.isDeployment(),
		mode: qa.Annotations[PoolingRolloutAnnotation], dryRun: c.dryRun(qa), switchID: switchID,
	}
	if isPooled {
		in.ready = pool.active && !pool.removing && pool.err == nil && pool.ready > 0
	} else {
		in.ready = !pool.active
	}
	in.ready = in.ready && !busy
	var dep *appsv1.Deployment
	if in.mismatched > 0 && in.deployment {
		var err error
		dep, err = c.Kube.AppsV1().Deployments(qa.Namespace).Get(ctx, workload, metav1.GetOptions{})
		if err != nil {
			return c.rolloutFailed(qa, fmt.Errorf("read Deployment %s/%s to roll it for routing %s: %w", qa.Namespace, workload, routing, err))
		}
		in.stamp = dep.Spec.Template.Annotations[RoutingRolloutAnnotation]
		in.paused = dep.Spec.Paused
	}
	prev := meta.FindStatusCondition(qa.Status.Conditions, PodsFollowRoutingCondition)
	out := rolloutOutcome{active: true, status: metav1.ConditionFalse}
	notFollowing := fmt.Sprintf("%d of %d pods with the qas-proxy sidecar %s", in.mismatched, in.proxied, notRouted(isPooled))
	restart := fmt.Sprintf("kubectl rollout restart %s/%s -n %s", strings.ToLower(qa.Spec.ScaleTargetRef.Kind), workload, qa.Namespace)
	switch decideRollout(in) {
	case stepNone:
		out.status, out.reason = metav1.ConditionTrue, ReasonPodsMatch
		out.message = fmt.Sprintf("all %d pods with the qas-proxy sidecar %s", census.proxied, routed(isPooled, workload))
		if census.proxied == 0 {
			out.message = fmt.Sprintf("none of the %d pods has the qas-proxy sidecar: routing does not concern them", census.all)
		}
		if prev != nil && prev.Reason == ReasonRolled && strings.Contains(prev.Message, "routing switch "+switchID+",") {
			// Keep the line saying the controller rolled for this switch, now that the
			// rollout is done.
			line, _, _ := strings.Cut(prev.Message, nowSeparator)
			out.reason, out.message = ReasonRolled, line+nowSeparator+out.message
		}
	case stepRolled:
		rolledAt, _ := time.Parse(time.RFC3339, dep.Spec.Template.Annotations[RoutingRestartedAtAnnotation])
		census = countPods(pods, isPooled, workload, rolledAt)
		out.reason = ReasonRolled
		out.message = rolledLine(workload, dep.Spec.Template.Annotations[RoutingRestartedAtAnnotation], switchID) + nowSeparator +
			fmt.Sprintf("%d of %d pods with the qas-proxy sidecar %s", census.mismatched, census.proxied, stillNotRouted(isPooled))
		if census.sinceRoll > 0 {
			out.message += fmt.Sprintf("; %d of them were created since the roll, so the webhook did not give them the routing (see its admission warnings and the pods' Events)", census.sinceRoll)
		} else {
			out.message += ": the Deployment's rollout replaces them"
		}
	case stepWait:
		out.reason = ReasonWaitingToRoll
		out.message = notFollowing + "; the controller rolls Deployment " + workload + " once " + waitingFor(isPooled, busy)
	case stepManual:
		out.reason = ReasonManualRollout
		out.message = fmt.Sprintf("%s; annotation %s=%s: restart them yourself (%s)", notFollowing, PoolingRolloutAnnotation, PoolingRolloutManual, restart)
		c.eventOnChange(qa, prev, out, corev1.EventTypeNormal)
	case stepInvalidMode:
		out.reason = ReasonInvalidRolloutMode
		out.message = fmt.Sprintf("%s; not rolled: annotation %s is %q, want %q or %q", notFollowing, PoolingRolloutAnnotation, in.mode, PoolingRolloutAuto, PoolingRolloutManual)
		c.eventOnChange(qa, prev, out, corev1.EventTypeWarning)
	case stepNotDeployment:
		out.reason = ReasonNotADeployment
		out.message = fmt.Sprintf("%s; the controller rolls only Deployments, and the target is a %s: restart its pods yourself (%s)", notFollowing, qa.Spec.ScaleTargetRef.Kind, restart)
		c.eventOnChange(qa, prev, out, corev1.EventTypeNormal)
	case stepPaused:
		out.reason = ReasonDeploymentPaused
		out.message = fmt.Sprintf("%s; Deployment %s is paused: resume it (kubectl rollout resume deployment/%s -n %s) and the controller rolls it", notFollowing, workload, workload, qa.Namespace)
		c.eventOnChange(qa, prev, out, corev1.EventTypeNormal)
	case stepDryRun:
		out.reason = ReasonDryRunRollout
		out.message = notFollowing + "; dry run: Deployment " + workload + " would be rolled now"
		c.eventOnChange(qa, prev, out, corev1.EventTypeNormal)
	case stepRoll:
		now := c.Clock.Now().UTC().Truncate(time.Second)
		rolled, err := c.rollDeployment(ctx, dep, switchID, now)
		if err != nil {
			return c.rolloutFailed(qa, fmt.Errorf("%s; rolling Deployment %s/%s failed (retried next cycle): %w", notFollowing, qa.Namespace, workload, err))
		}
		out.reason = ReasonRolled
		out.message = rolledLine(workload, now.Format(time.RFC3339), switchID) + nowSeparator + notFollowing + ": the Deployment's rollout replaces them"
		if rolled == nil {
			break // another decider rolled it between this cycle's read and its write
		}
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "RolledForRouting",
			"rolled Deployment %s (pod template annotation %s=%s) because routing is now %s and %s; the Deployment replaces them under its rolling-update strategy, as kubectl rollout restart does (annotation %s=%s opts out)",
			workload, RoutingRolloutAnnotation, switchID, routing, notFollowing, PoolingRolloutAnnotation, PoolingRolloutManual)
	}
	return out
}

// nowSeparator separates, in the Rolled condition's message, the roll from the pods'
// state now.
const nowSeparator = " — now: "

func rolledLine(workload, at, switchID string) string {
	return fmt.Sprintf("rolled Deployment %s at %s for routing switch %s, as kubectl rollout restart does, so that its pods take the new routing", workload, at, switchID)
}

func routed(pooled bool, workload string) string {
	if pooled {
		return "pool (annotation " + PodPoolingAnnotation + "=" + workload + ")"
	}
	return "route randomly (no annotation " + PodPoolingAnnotation + ")"
}

func notRouted(pooled bool) string {
	if pooled {
		return "do not pool (created before routing became pooled)"
	}
	return "still pool (created before routing became random)"
}

func stillNotRouted(pooled bool) string {
	if pooled {
		return "still do not pool"
	}
	return "still pool"
}

func waitingFor(pooled, busy bool) string {
	switch {
	case busy:
		return "the migration under way ends"
	case pooled:
		return "pooling is ready (PoolingReady True: the Secret and a ready front)"
	}
	return "the pooling objects are removed"
}

// rolloutFailed reports a failure to roll: a Warning Event and the condition.
func (c *Controller) rolloutFailed(qa *v1alpha1.QueueAutoscaler, err error) rolloutOutcome {
	c.Recorder.Event(qa, corev1.EventTypeWarning, ReasonFailedRollout, err.Error())
	return rolloutOutcome{active: true, status: metav1.ConditionFalse, reason: ReasonFailedRollout, message: err.Error()}
}

// eventOnChange announces out as an Event when the condition changes to it, not every
// cycle.
func (c *Controller) eventOnChange(qa *v1alpha1.QueueAutoscaler, prev *metav1.Condition, out rolloutOutcome, kind string) {
	if prev != nil && prev.Reason == out.reason && prev.Message == out.message {
		return
	}
	c.Recorder.Event(qa, kind, out.reason, out.message)
}

// patchAnnotation sets one annotation on qa.
func (c *Controller) patchAnnotation(ctx context.Context, qa *v1alpha1.QueueAutoscaler, key, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%s:%s}}}`, strconv.Quote(key), strconv.Quote(value))
	return c.patchAnnotations(ctx, qa, patch)
}

// errRolledElsewhere is not an error: the template already names the switch (another
// decider rolled it between this cycle's read and its write).
var errRolledElsewhere = errors.New("already rolled")

// rollDeployment writes the switch into dep's pod template, as `kubectl rollout
// restart` writes its restartedAt, so that the Deployment controller replaces its pods
// under the Deployment's strategy. It returns the updated Deployment, or nil when the
// template already names the switch. A write that meets another (the Deployment
// controller's, a user's) is tried again on a fresh read, as ensureFront does.
func (c *Controller) rollDeployment(ctx context.Context, dep *appsv1.Deployment, switchID string, now time.Time) (*appsv1.Deployment, error) {
	api := c.Kube.AppsV1().Deployments(dep.Namespace)
	var updated *appsv1.Deployment
	fresh := dep
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if fresh == nil {
			d, err := api.Get(ctx, dep.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fresh = d
		}
		cur := fresh
		fresh = nil // a retry reads again
		if cur.Spec.Template.Annotations[RoutingRolloutAnnotation] == switchID {
			return errRolledElsewhere
		}
		if cur.Spec.Paused {
			return fmt.Errorf("the Deployment %s was paused meanwhile", cur.Name)
		}
		if c.beforeRoll != nil {
			c.beforeRoll()
		}
		up := cur.DeepCopy()
		if up.Spec.Template.Annotations == nil {
			up.Spec.Template.Annotations = map[string]string{}
		}
		up.Spec.Template.Annotations[RoutingRolloutAnnotation] = switchID
		up.Spec.Template.Annotations[RoutingRestartedAtAnnotation] = now.Format(time.RFC3339)
		var err error
		updated, err = api.Update(ctx, up, metav1.UpdateOptions{})
		return err
	})
	if errors.Is(err, errRolledElsewhere) {
		return nil, nil
	}
	return updated, err
}
