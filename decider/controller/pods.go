package controller

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/decider/decide"
)

// InitTimes returns, for each pod that has become Ready, the time from its creation to
// its Ready condition turning True: the pod start time the predictive lead is based
// on. Pods never Ready, or Ready before they were created (clock skew), give no sample.
// At most limit samples are returned, the most recent pods first, so the estimate
// follows recent start-up behaviour instead of every pod ever.
func InitTimes(pods []corev1.Pod, limit int) []time.Duration {
	type sample struct {
		created time.Time
		d       time.Duration
	}
	var samples []sample
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
				continue
			}
			d := c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
			if d >= 0 {
				samples = append(samples, sample{created: p.CreationTimestamp.Time, d: d})
			}
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].created.After(samples[j].created) })
	if limit > 0 && len(samples) > limit {
		samples = samples[:limit]
	}
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.d
	}
	return out
}

// PodUsage is a pod's measured CPU and service time, from the collector.
type PodUsage struct {
	CPUCores          float64 // absolute usage, cores
	ThrottledFraction float64
	ServiceTime       float64 // seconds; 0 if unknown
}

// NodeUsage is a node's measured absolute CPU usage in cores.
type NodeUsage struct {
	CPUCores float64
}

// IsReady reports whether a pod is Ready and not being deleted.
func IsReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// cpuMillis sums the CPU requests and limits of a pod's containers; a limit of zero
// means at least one container has none.
func cpuMillis(p *corev1.Pod) (request, limit int64) {
	unlimited := false
	for _, c := range p.Spec.Containers {
		request += c.Resources.Requests.Cpu().MilliValue()
		l := c.Resources.Limits.Cpu().MilliValue()
		if l == 0 {
			unlimited = true
		}
		limit += l
	}
	if unlimited {
		limit = 0
	}
	return request, limit
}

// DecidePods converts the workload's pods and the other pods on the same nodes into the
// engine's view, joining the collector's usage by pod name.
func DecidePods(own []corev1.Pod, usage map[string]PodUsage) []decide.Pod {
	out := make([]decide.Pod, 0, len(own))
	for i := range own {
		p := &own[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req, lim := cpuMillis(p)
		u := usage[p.Name]
		out = append(out, decide.Pod{
			Name: p.Name, Node: p.Spec.NodeName, Owned: true, Ready: IsReady(p),
			CPURequest: req, CPULimit: lim,
			CPUUsage: u.CPUCores, ThrottledFraction: u.ThrottledFraction, ServiceTime: u.ServiceTime,
			LocalVolumes: LocalVolumes(p),
		})
	}
	return out
}

// LocalVolumes lists the pod's node-local data, the local-storage guard of migration:
// emptyDir volumes on disk (their size limit, 0 when unbounded) and hostPath volumes.
// A pod with any is moved only when the QueueAutoscaler allows local storage.
func LocalVolumes(p *corev1.Pod) []decide.Volume {
	var out []decide.Volume
	for _, v := range p.Spec.Volumes {
		switch {
		case v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory:
			size := int64(0)
			if v.EmptyDir.SizeLimit != nil {
				size = v.EmptyDir.SizeLimit.Value()
			}
			out = append(out, decide.Volume{Name: v.Name, Node: p.Spec.NodeName, SizeBytes: size})
		case v.HostPath != nil:
			out = append(out, decide.Volume{Name: v.Name, Node: p.Spec.NodeName})
		}
	}
	return out
}

// DecideNodes converts nodes into the engine's view: allocatable CPU, the requests of
// every pod bound to them, their absolute usage, and the neighbours of the workload's
// pods (all pods on the node not in owned).
func DecideNodes(nodes []corev1.Node, allPods []corev1.Pod, owned map[string]bool, usage map[string]NodeUsage, podUsage map[string]PodUsage) []decide.Node {
	byNode := map[string][]*corev1.Pod{}
	for i := range allPods {
		p := &allPods[i]
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	out := make([]decide.Node, 0, len(nodes))
	for _, n := range nodes {
		dn := decide.Node{
			Name:           n.Name,
			AllocatableCPU: n.Status.Allocatable.Cpu().MilliValue(),
			UsedCPU:        usage[n.Name].CPUCores,
			Unschedulable:  n.Spec.Unschedulable,
		}
		for _, p := range byNode[n.Name] {
			req, lim := cpuMillis(p)
			dn.RequestedCPU += req
			if owned[p.Namespace+"/"+p.Name] {
				continue
			}
			u := podUsage[p.Name]
			dn.Pods = append(dn.Pods, decide.Pod{
				Name: p.Namespace + "/" + p.Name, Node: n.Name, Ready: IsReady(p),
				CPURequest: req, CPULimit: lim, CPUUsage: u.CPUCores, LocalVolumes: LocalVolumes(p),
			})
		}
		out = append(out, dn)
	}
	return out
}
