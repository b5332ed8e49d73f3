package resources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/qas-dev/qas/decider/decide"
)

// Storage finds the node-local data of pods, the input of migration's local-storage
// guard (DESIGN §3, seed 002): which volumes tie a pod to its node, and how much
// room the nodes have for the data that can be recreated elsewhere.
type Storage struct {
	Claims  corelisters.PersistentVolumeClaimLister
	Volumes corelisters.PersistentVolumeLister
	// Nodes are every node, to tell a PersistentVolume only one node can mount from
	// one a whole zone can.
	Nodes []*corev1.Node
}

// LocalVolumes lists the pod's node-local data:
//   - emptyDir volumes on disk (their size limit; 0 when unbounded): scratch data a
//     replacement pod recreates on its own node, so with allowLocalStorage the pod may
//     move when the destination has room for them;
//   - hostPath volumes, pinned: the data stays on the node (a replacement elsewhere
//     would read another node's directory), so the pod never moves;
//   - PersistentVolumeClaims (and generic ephemeral volumes) bound to a node-local
//     PersistentVolume, pinned: a local or hostPath volume, or one whose node affinity
//     admits no other node. A claim the caches do not know yet counts as pinned, the
//     safe side of a guard. Network volumes (no node affinity, or one a zone of
//     nodes satisfies) are not local data and are not listed.
//
// Memory-backed emptyDirs, ConfigMaps, Secrets and projected volumes hold nothing
// that needs to move.
func (s Storage) LocalVolumes(p *corev1.Pod) []decide.Volume {
	var out []decide.Volume
	node := p.Spec.NodeName
	for _, v := range p.Spec.Volumes {
		switch {
		case v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory:
			size := int64(0)
			if v.EmptyDir.SizeLimit != nil {
				size = v.EmptyDir.SizeLimit.Value()
			}
			out = append(out, decide.Volume{Name: v.Name, Node: node, SizeBytes: size})
		case v.HostPath != nil:
			out = append(out, decide.Volume{Name: v.Name, Node: node, Pinned: true})
		case v.PersistentVolumeClaim != nil:
			if vol, ok := s.claimed(p, v.Name, v.PersistentVolumeClaim.ClaimName); ok {
				out = append(out, vol)
			}
		case v.Ephemeral != nil:
			// A generic ephemeral volume is a claim named after the pod and the volume.
			if vol, ok := s.claimed(p, v.Name, p.Name+"-"+v.Name); ok {
				out = append(out, vol)
			}
		}
	}
	return out
}

// claimed resolves the claim of one of p's volumes to its PersistentVolume and
// returns it as a pinned volume when the PersistentVolume is node-local.
func (s Storage) claimed(p *corev1.Pod, volume, claim string) (decide.Volume, bool) {
	pinned := decide.Volume{Name: volume, Node: p.Spec.NodeName, Pinned: true}
	if s.Claims == nil || s.Volumes == nil {
		return pinned, true
	}
	pvc, err := s.Claims.PersistentVolumeClaims(p.Namespace).Get(claim)
	if err != nil || pvc.Spec.VolumeName == "" {
		return pinned, true
	}
	pv, err := s.Volumes.Get(pvc.Spec.VolumeName)
	if err != nil {
		return pinned, true
	}
	if !s.nodeLocal(pv, p.Spec.NodeName) {
		return decide.Volume{}, false
	}
	pinned.SizeBytes = pv.Spec.Capacity.Storage().Value()
	return pinned, true
}

// SingleNodeClaim returns the name of a PersistentVolumeClaim among p's volumes that
// only one node can mount at a time (access modes ReadWriteOnce or ReadWriteOncePod,
// neither ReadWriteMany nor ReadOnlyMany), or "" when there is none. A surge cannot
// move such a pod: its replacement, started beside it on another node, would wait to
// attach the volume the pod still holds. A generic ephemeral volume is not counted
// (each pod gets a claim of its own), nor a claim the caches do not know
// (LocalVolumes pins that pod already).
func (s Storage) SingleNodeClaim(p *corev1.Pod) string {
	if s.Claims == nil {
		return ""
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ReadOnly {
			continue
		}
		pvc, err := s.Claims.PersistentVolumeClaims(p.Namespace).Get(v.PersistentVolumeClaim.ClaimName)
		if err != nil {
			continue
		}
		modes := pvc.Status.AccessModes
		if len(modes) == 0 {
			modes = pvc.Spec.AccessModes
		}
		if len(modes) > 0 && !slices.Contains(modes, corev1.ReadWriteMany) && !slices.Contains(modes, corev1.ReadOnlyMany) {
			return pvc.Name
		}
	}
	return ""
}

// nodeLocal reports whether only node can mount pv.
func (s Storage) nodeLocal(pv *corev1.PersistentVolume, node string) bool {
	if pv.Spec.Local != nil || pv.Spec.HostPath != nil {
		return true
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
	if err != nil {
		return true // the scheduler could not place it elsewhere either
	}
	for _, n := range s.Nodes {
		if n.Name != node && sel.Match(n) {
			return false
		}
	}
	return true
}

// freeLocalStorage is the node's allocatable ephemeral storage minus what the pods
// on it request, as the scheduler accounts it: the room a moved pod's recreated
// emptyDir volumes need. A node that reports no ephemeral storage has none.
func freeLocalStorage(n *corev1.Node, pods []*corev1.Pod) int64 {
	free := n.Status.Allocatable.StorageEphemeral().Value()
	for _, p := range pods {
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		free -= req.StorageEphemeral().Value()
	}
	return max(free, 0)
}
