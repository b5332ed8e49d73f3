package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
)

// HotTaint keeps new pods off a node while a pod is moved off it. The decider adds it
// only for the duration of a migration and removes it when the last migration off that
// node ends.
const HotTaint = "qas.dev/hot"

// HotTaintHolders is the node annotation that lists, comma-separated and sorted, the
// QueueAutoscalers (namespace/name) whose migrations hold the node's hot taint. Several
// workloads can move pods off one hot node at once; the taint goes when the last of
// them lets go, and letting go twice (a standby that repeats the undo of a deleted
// QueueAutoscaler's migration) changes nothing. A hot taint without this annotation
// was put there by someone else and is left alone.
const HotTaintHolders = "qas.dev/hot-holders"

// holderKey names qa among a node's hot-taint holders.
func holderKey(qa *v1alpha1.QueueAutoscaler) string { return qa.Namespace + "/" + qa.Name }

// holdHotTaint makes holder one of the holders of node's hot taint, adding the taint
// when the node has none. It reports whether holder holds it: false when the node
// has a hot taint that QAS did not put there (no holders annotation), which is then
// left to whoever put it.
func (c *Controller) holdHotTaint(ctx context.Context, node, holder string) (bool, error) {
	held := false
	err := c.updateNode(ctx, node, func(n *corev1.Node) bool {
		holders := splitHolders(n.Annotations[HotTaintHolders])
		tainted := hasHotTaint(n)
		if tainted && len(holders) == 0 {
			return false // someone else's taint
		}
		held = true
		if tainted && slices.Contains(holders, holder) {
			return false
		}
		if !tainted {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: HotTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
			holders = nil // a stale list of a taint someone removed
		}
		setHolders(n, append(holders, holder))
		return true
	})
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("node %s: %w", node, err)
	}
	return held, err
}

// releaseHotTaint takes holder off node's hot-taint holders and removes the taint with
// the last of them. A holder that is not on the list has let go already: nothing
// changes.
func (c *Controller) releaseHotTaint(ctx context.Context, node, holder string) error {
	err := c.updateNode(ctx, node, func(n *corev1.Node) bool {
		holders := splitHolders(n.Annotations[HotTaintHolders])
		if !slices.Contains(holders, holder) {
			return false
		}
		holders = slices.DeleteFunc(holders, func(h string) bool { return h == holder })
		if len(holders) > 0 {
			setHolders(n, holders)
			return true
		}
		delete(n.Annotations, HotTaintHolders)
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == HotTaint })
		return true
	})
	if apierrors.IsNotFound(err) {
		return nil // the node is gone, and its taint with it
	}
	return err
}

// updateNode reads node, lets change modify it (false: nothing to write) and writes
// it back, read again and retried on conflicts with other writers.
func (c *Controller) updateNode(ctx context.Context, node string, change func(*corev1.Node) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		if !change(n) {
			return nil
		}
		if _, err := c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("taint node %s: %w", node, err)
		}
		return nil
	})
}

func hasHotTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == HotTaint })
}

func splitHolders(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func setHolders(n *corev1.Node, holders []string) {
	slices.Sort(holders)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[HotTaintHolders] = strings.Join(slices.Compact(holders), ",")
}
