package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

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

// evict asks the Eviction API to remove pod ("namespace/name", or a bare name in
// namespace def), provided it is still the pod with uid (a StatefulSet's replacement
// has the same name). The Eviction API enforces the pod's PodDisruptionBudgets: when
// one refuses (429), refused says so and err is nil. A pod that is gone, or replaced
// already, counts as evicted.
func (c *Controller) evict(ctx context.Context, pod, def string, uid types.UID) (refused string, err error) {
	ns, name := splitPod(pod, def)
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if uid != "" {
		ev.DeleteOptions = &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	err = c.Kube.CoreV1().Pods(ns).EvictV1(ctx, ev)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsTooManyRequests(err):
		return fmt.Sprintf("eviction of %s refused by its PodDisruptionBudget: %v", pod, err), nil
	case apierrors.IsConflict(err) && uid != "":
		// The precondition failed: is the pod with that name another one now?
		p, gerr := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) || (gerr == nil && p.UID != uid) {
			return "", nil
		}
	}
	return "", fmt.Errorf("evict %s: %w", pod, err)
}

// splitPod splits "namespace/name" (how the engine names neighbour pods); a bare name
// is in def.
func splitPod(pod, def string) (ns, name string) {
	if ns, name, ok := strings.Cut(pod, "/"); ok {
		return ns, name
	}
	return def, pod
}
