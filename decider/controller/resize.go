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
	"github.com/qas-dev/qas/proxy/sidecar"
)

// ResizeBlockedAnnotation holds, on the QueueAutoscaler, the time until which
// in-place resizing stays off after the kubelet could not carry one out, so that a
// restarted decider does not try the same resize again at once.
const ResizeBlockedAnnotation = "qas.dev/resize-blocked-until"

// ResizeProblem returns why a pod's last in-place resize is not being carried out:
// Infeasible (the node can never fit it), or Deferred for longer than limit. It
// returns "" for a pod without such a problem.
func ResizeProblem(p *corev1.Pod, now time.Time, limit time.Duration) string {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodResizePending || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case corev1.PodReasonInfeasible:
			return fmt.Sprintf("resize of %s is infeasible on node %s: %s", p.Name, p.Spec.NodeName, c.Message)
		case corev1.PodReasonDeferred:
			if since := now.Sub(c.LastTransitionTime.Time); since > limit {
				return fmt.Sprintf("resize of %s deferred for %s (> %s) on node %s: %s", p.Name, since.Round(time.Second), limit, p.Spec.NodeName, c.Message)
			}
		}
	}
	return ""
}

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
		why := ResizeProblem(p, now, limit)
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

// containerCPU is one container's CPU after a resize, in millicores; Limit 0 means
// none.
type containerCPU struct {
	Name           string
	Request, Limit int64
}

// resizePlan splits the engine's per-pod CPU decision over p's containers, so that
// the pod's total request (what the engine sized and compares) becomes cpu: the
// qas-proxy sidecar keeps its CPU, and the app containers (every other container)
// share the rest in proportion to their current requests (equal shares when none
// has one), each limit scaled with its request so that the pod keeps its QoS class.
// It returns only the containers whose request changes: none when the pod already
// has cpu in total.
func resizePlan(p *corev1.Pod, cpu int64) ([]containerCPU, error) {
	var fixed, weights int64
	var apps []corev1.Container
	for _, c := range p.Spec.Containers {
		if c.Name == sidecar.ContainerName {
			fixed += c.Resources.Requests.Cpu().MilliValue()
			continue
		}
		apps = append(apps, c)
		weights += c.Resources.Requests.Cpu().MilliValue()
	}
	if len(apps) == 0 {
		return nil, fmt.Errorf("pod %s has no container besides %s to resize", p.Name, sidecar.ContainerName)
	}
	if weights+fixed == cpu {
		return nil, nil
	}
	budget := cpu - fixed
	if budget < int64(len(apps)) {
		return nil, fmt.Errorf("%dm per pod leaves no CPU for the app of %s beside the %s sidecar's %dm", cpu, p.Name, sidecar.ContainerName, fixed)
	}
	shares := make([]int64, len(apps))
	largest, given := 0, int64(0)
	for i, c := range apps {
		w := c.Resources.Requests.Cpu().MilliValue()
		if weights > 0 {
			shares[i] = budget * w / weights
		} else {
			shares[i] = budget / int64(len(apps))
		}
		shares[i] = max(shares[i], 1)
		given += shares[i]
		if shares[i] > shares[largest] {
			largest = i
		}
	}
	shares[largest] += budget - given // rounding goes to the biggest app container
	var out []containerCPU
	for i, c := range apps {
		req := c.Resources.Requests.Cpu().MilliValue()
		if shares[i] == req {
			continue
		}
		cc := containerCPU{Name: c.Name, Request: shares[i]}
		if lim := c.Resources.Limits.Cpu().MilliValue(); lim > 0 {
			cc.Limit = max(shares[i], lim)
			if req > 0 {
				cc.Limit = max(shares[i], lim*shares[i]/req)
			}
		}
		out = append(out, cc)
	}
	return out, nil
}
