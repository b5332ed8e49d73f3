package kubetest

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Deployment is a Deployment in ns of replicas pods labelled app=name (its selector),
// each running spec on kwok's nodes: Toleration is added to spec's tolerations.
func Deployment(ns, name string, replicas int32, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec.Tolerations = append(slices.Clone(spec.Tolerations), Toleration())
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// CPU is a container's resources with the given CPU request and limit (quantities
// such as "250m"; "" leaves that one unset). It panics on a malformed quantity, as
// resource.MustParse does: the values are the test's own constants.
func CPU(request, limit string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if request != "" {
		r.Requests[corev1.ResourceCPU] = resource.MustParse(request)
	}
	if limit != "" {
		r.Limits[corev1.ResourceCPU] = resource.MustParse(limit)
	}
	return r
}

// RemoveTaintAfter removes the taint key from every node when t ends, so that a test
// whose controller taints nodes leaves none tainted for the next test on the shared
// cluster. It is best effort: a node that cannot be listed or updated is left as it is.
func (c *Cluster) RemoveTaintAfter(t testing.TB, key string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, n := range nodes.Items {
			kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(tn corev1.Taint) bool { return tn.Key == key })
			if len(kept) != len(n.Spec.Taints) {
				n.Spec.Taints = kept
				_, _ = c.clientset.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
			}
		}
	})
}
