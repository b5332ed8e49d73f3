package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
)

// ResizeBlockedAnnotation holds, on the QueueAutoscaler, the time until which
// in-place resizing stays off after the kubelet could not carry one out, so that a
// restarted decider does not try the same resize again at once.
const ResizeBlockedAnnotation = "qas.dev/resize-blocked-until"

// resizeFollowThrough follows the pods' resize conditions. When a resize is
// Infeasible or Deferred too long, it asks for the pod's resize to be taken back (to
// what the kubelet allocated), turns vertical scaling off for ResizeBackoff (persisted
// on the QueueAutoscaler), and says so in an Event. It reports whether vertical
// scaling is off now; the engine then falls back to migration or horizontal scaling.
func (c *Controller) resizeFollowThrough(ctx context.Context, qa *v1alpha1.QueueAutoscaler, pods []*corev1.Pod, now time.Time) (bool, error) {
	limit, backoff := c.ResizeDeferredLimit, c.ResizeBackoff
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	if backoff <= 0 {
		backoff = 10 * time.Minute
	}
	var problems []string
	var errs []error
	for _, p := range pods {
		why := resources.ResizeProblem(p, now, limit)
		if why == "" {
			continue
		}
		problems = append(problems, why)
		if !c.dryRun(qa) {
			if err := c.revertResize(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	until, _ := time.Parse(time.RFC3339, qa.Annotations[ResizeBlockedAnnotation])
	if len(problems) > 0 {
		until = now.Add(backoff)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ResizeBlockedAnnotation: until.UTC().Format(time.RFC3339)}}})
		if err := c.patchAnnotations(ctx, qa, patch); err != nil {
			errs = append(errs, fmt.Errorf("save resize backoff: %w", err))
		}
		c.Recorder.Eventf(qa, corev1.EventTypeWarning, "ResizeBlocked", "in-place resize off until %s, falling back to migration or horizontal scaling: %s",
			until.UTC().Format(time.RFC3339), strings.Join(problems, "; "))
	}
	return now.Before(until), errors.Join(errs...)
}

// revertResize sets the pod's CPU back to what its containers run with, withdrawing a
// resize the kubelet will not carry out.
func (c *Controller) revertResize(ctx context.Context, p *corev1.Pod) error {
	var ctrs []any
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Resources == nil {
			continue
		}
		res := map[string]any{}
		if q, ok := cs.Resources.Requests[corev1.ResourceCPU]; ok {
			res["requests"] = map[string]any{"cpu": q.String()}
		}
		if q, ok := cs.Resources.Limits[corev1.ResourceCPU]; ok {
			res["limits"] = map[string]any{"cpu": q.String()}
		}
		if len(res) > 0 {
			ctrs = append(ctrs, map[string]any{"name": cs.Name, "resources": res})
		}
	}
	if len(ctrs) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": ctrs}})
	if _, err := c.Kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
		return fmt.Errorf("withdraw the resize of %s: %w", p.Name, err)
	}
	return nil
}

// resizePods gives every running pod cpu millicores in total, in place (pods/resize):
// the app containers take what the qas-proxy sidecar leaves (resizePlan).
func (c *Controller) resizePods(ctx context.Context, pods []*corev1.Pod, cpu int64) error {
	var errs []error
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			continue
		}
		plan, err := resources.ResizePlan(p, cpu)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(plan) == 0 {
			continue
		}
		ctrs := make([]any, 0, len(plan))
		for _, cc := range plan {
			res := map[string]any{"requests": map[string]any{"cpu": fmt.Sprintf("%dm", cc.Request)}}
			if cc.Limit > 0 {
				res["limits"] = map[string]any{"cpu": fmt.Sprintf("%dm", cc.Limit)}
			}
			ctrs = append(ctrs, map[string]any{"name": cc.Name, "resources": res})
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": ctrs}})
		if _, err := c.Kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
			errs = append(errs, fmt.Errorf("resize %s to %dm: %w", p.Name, cpu, err))
		}
	}
	return errors.Join(errs...)
}
