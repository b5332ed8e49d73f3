// Package v1alpha1 is the qas.dev/v1alpha1 API: the QueueAutoscaler resource, which asks
// QAS to keep a workload's latency under a target by scaling it horizontally, resizing
// its pods in place, or moving them off overloaded nodes.
//
// +kubebuilder:object:generate=true
// +groupName=qas.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "qas.dev", Version: "v1alpha1"}

// Resource is the plural resource name, as used in URLs and RBAC rules.
const Resource = "queueautoscalers"

var (
	// SchemeBuilder registers this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &QueueAutoscaler{}, &QueueAutoscalerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
