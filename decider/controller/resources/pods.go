package resources

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
)

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

// DecidePods converts the workload's pods into the engine's view, joining the
// collector's usage by pod name, and says how each can be moved (OwnMove; target
// is the workload; a ReplicaSet's pod that holds a claim only one node can mount,
// Storage.SingleNodeClaim, is evicted instead of surged). Pods not on a node, or finished, are left out; pods being deleted
// are marked Terminating (the engine neither moves nor counts them).
func DecidePods(own []*corev1.Pod, target v1alpha1.CrossVersionObjectReference, m measurement.Workload, storage Storage) []decide.Pod {
	out := make([]decide.Pod, 0, len(own))
	for _, p := range own {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req, lim := cpuMillis(p)
		u, _ := m.Pod(p.Name)
		move, noMove := OwnMove(p, target)
		if move == decide.MoveSurge && storage.SingleNodeClaim(p) != "" {
			// A surge's replacement could not attach the claim while the pod holds it:
			// evict, and the ReplicaSet starts the replacement once the volume is free.
			move = decide.MoveEvict
		}
		out = append(out, decide.Pod{
			Name: p.Name, Node: p.Spec.NodeName, Owned: true, Ready: IsReady(p), Terminating: p.DeletionTimestamp != nil,
			CPURequest: req, CPULimit: lim,
			CPUUsage: u.CPUUsage, ThrottledFraction: u.ThrottledFraction, ServiceTime: u.ServiceTime,
			InService: u.InService, Queued: u.Queued, InFlightMean: u.InFlightMean, MeasuredLatency: u.MeasuredLatency,
			LocalVolumes: storage.LocalVolumes(p), Move: move, NoMove: noMove,
		})
	}
	return out
}

// DecideNodes converts nodes into the engine's view: allocatable CPU, the requests of
// every pod bound to them, their absolute usage, their free local storage, and the
// neighbours of the workload's pods (all pods on the node not in owned) and whether
// evicting them moves them (NeighbourMove).
func DecideNodes(nodes []*corev1.Node, allPods []*corev1.Pod, owned map[string]bool, m measurement.Workload, storage Storage) []decide.Node {
	byNode := map[string][]*corev1.Pod{}
	for _, p := range allPods {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	out := make([]decide.Node, 0, len(nodes))
	for _, n := range nodes {
		used, _ := m.Node(n.Name)
		dn := decide.Node{
			Name:                  n.Name,
			AllocatableCPU:        n.Status.Allocatable.Cpu().MilliValue(),
			UsedCPU:               used.UsedCPU,
			Unschedulable:         n.Spec.Unschedulable,
			FreeLocalStorageBytes: freeLocalStorage(n, byNode[n.Name]),
		}
		for _, p := range byNode[n.Name] {
			req, lim := cpuMillis(p)
			dn.RequestedCPU += req
			if owned[p.Namespace+"/"+p.Name] {
				continue
			}
			// Neighbours are keyed "namespace/name": another namespace may hold a pod of
			// the same name.
			u, _ := m.Neighbour(p.Namespace + "/" + p.Name)
			move, noMove := NeighbourMove(p)
			dn.Pods = append(dn.Pods, decide.Pod{
				Name: p.Namespace + "/" + p.Name, Node: n.Name, Ready: IsReady(p), Terminating: p.DeletionTimestamp != nil,
				CPURequest: req, CPULimit: lim, CPUUsage: u.CPUUsage, LocalVolumes: storage.LocalVolumes(p),
				Move: move, NoMove: noMove,
			})
		}
		out = append(out, dn)
	}
	return out
}
