package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// Kubernetes has no live migration: a pod "moves" when it is removed and its
// controller starts a replacement elsewhere (the hot node is tainted meanwhile).
// Which pod a controller removes, and whether it replaces one removed for it,
// depends on the controller, so the method follows the pod's owner.

// OwnMove says how one of the workload's own pods can be moved off its node,
// from the pod's controller (its owner reference with controller: true), and,
// when it cannot, why:
//   - a ReplicaSet (a Deployment's) or a ReplicationController: surge, since their
//     scale-down removes the pod with the lowest pod-deletion-cost first;
//   - a StatefulSet, whose scale-down removes the highest ordinal whatever the
//     cost: evict the pod (the Eviction API respects its PodDisruptionBudgets),
//     and the StatefulSet recreates it, under the same name, on another node;
//   - the scale target itself (a custom kind whose controller creates its pods
//     directly and holds them at spec.replicas): evict, for the same reason;
//   - anything else (no controller, or a controller QAS does not know to
//     recreate the pod): the pod does not move.
func OwnMove(p *corev1.Pod, target v1alpha1.CrossVersionObjectReference) (decide.MoveMethod, string) {
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return decide.MoveNone, "it has no controller that would recreate it on another node (own pods move when a ReplicaSet, a StatefulSet or the scale target itself controls them)"
	}
	gk := ownerKind(owner)
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, schema.GroupKind{Kind: "ReplicationController"}:
		return decide.MoveSurge, ""
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return decide.MoveEvict, ""
	}
	if tgv, err := schema.ParseGroupVersion(target.APIVersion); err == nil && gk == (schema.GroupKind{Group: tgv.Group, Kind: target.Kind}) && owner.Name == target.Name {
		return decide.MoveEvict, ""
	}
	return decide.MoveNone, fmt.Sprintf("its controller %s %s is neither a ReplicaSet nor a StatefulSet nor the scale target: QAS does not know whether it would remove this pod on scale-down or recreate it on another node", owner.Kind, owner.Name)
}

// NeighbourMove says whether evicting a neighbour pod moves it: only when a
// ReplicaSet, ReplicationController or StatefulSet controls it, since those
// recreate an evicted pod wherever the scheduler puts it. A pod without a
// controller would be gone for good, a DaemonSet's would come back on the same
// node (or not at all while it is tainted), a Job's would count as a failure.
func NeighbourMove(p *corev1.Pod) (decide.MoveMethod, string) {
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return decide.MoveNone, "it has no controller: evicted, it would not come back"
	}
	switch ownerKind(owner) {
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}, schema.GroupKind{Kind: "ReplicationController"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return decide.MoveEvict, ""
	}
	return decide.MoveNone, fmt.Sprintf("its controller %s %s is not known to recreate it on another node", owner.Kind, owner.Name)
}

func ownerKind(o *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return schema.GroupKind{Kind: o.Kind}
	}
	return schema.GroupKind{Group: gv.Group, Kind: o.Kind}
}
