package kubetest

import (
	"context"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates the CustomResourceDefinition in the YAML file at path (if it does
// not exist yet) and waits until it is Established.
func (c *Cluster) InstallCRD(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("kubetest: %s: %w", path, err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create CRD %s: %w", crd.GetName(), err)
	}
	return poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Established" && cond["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
