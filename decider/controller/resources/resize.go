package resources

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/proxy/sidecar"
)

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

// ContainerCPU is one container's CPU after a resize, in millicores; Limit 0 means
// none.
type ContainerCPU struct {
	Name           string
	Request, Limit int64
}

// ResizePlan splits the engine's per-pod CPU decision over p's containers, so that
// the pod's total request (what the engine sized and compares) becomes cpu: the
// qas-proxy sidecar keeps its CPU, and the app containers (every other container)
// share the rest in proportion to their current requests (equal shares when none
// has one), each limit scaled with its request so that the pod keeps its QoS class.
// It returns only the containers whose request changes: none when the pod already
// has cpu in total.
func ResizePlan(p *corev1.Pod, cpu int64) ([]ContainerCPU, error) {
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
	var out []ContainerCPU
	for i, c := range apps {
		req := c.Resources.Requests.Cpu().MilliValue()
		if shares[i] == req {
			continue
		}
		cc := ContainerCPU{Name: c.Name, Request: shares[i]}
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
