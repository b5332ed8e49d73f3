package inject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// pullSecretsPatch adds Config.ImagePullSecrets the pod lacks to its imagePullSecrets,
// keeping the ones it has and their order.
func (c Config) pullSecretsPatch(pod *corev1.Pod) []PatchOp {
	refs := slices.Clone(pod.Spec.ImagePullSecrets)
	for _, name := range c.ImagePullSecrets {
		if !slices.ContainsFunc(refs, func(r corev1.LocalObjectReference) bool { return r.Name == name }) {
			refs = append(refs, corev1.LocalObjectReference{Name: name})
		}
	}
	if len(refs) == len(pod.Spec.ImagePullSecrets) {
		return nil
	}
	return []PatchOp{{Op: "add", Path: "/spec/imagePullSecrets", Value: refs}}
}
