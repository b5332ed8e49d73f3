package chart

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// TestExampleManifestsValid creates every object of examples/manifests with a
// server-side dry run on a real apiserver with the QueueAutoscaler CRD installed: the
// apiserver's schema, CEL rules and defaulting accept them.
func TestExampleManifestsValid(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCRD(ctx, filepath.Join(repoRoot(t), "config", "crd", "qas.dev_queueautoscalers.yaml")); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests (%v)", err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.Config)))
	kinds := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseManifests(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			kinds[gvk.Kind] = true
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %s: %v", filepath.Base(f), gvk, err)
				continue
			}
			if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %s %s: %v", filepath.Base(f), gvk.Kind, o.GetName(), err)
			}
		}
	}
	for _, k := range []string{"Deployment", "Service", "QueueAutoscaler"} {
		if !kinds[k] {
			t.Errorf("examples/manifests has no %s", k)
		}
	}
}
