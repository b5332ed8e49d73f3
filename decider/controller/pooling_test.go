package controller

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/qas-dev/qas/decider/api/v1alpha1"

	proxyapp "github.com/qas-dev/qas/proxy/app"
)

func TestFrontConfigValidate(t *testing.T) {
	require.NoError(t, DefaultFrontConfig().Validate())
	for _, tt := range []struct {
		name string
		mod  func(*FrontConfig)
		want string
	}{
		{"no image", func(f *FrontConfig) { f.Image = "" }, "front image"},
		{"no replica", func(f *FrontConfig) { f.Replicas = 0 }, "front replicas 0"},
		{"port out of range", func(f *FrontConfig) { f.Port = 70000 }, "port numbers"},
		{"ports collide", func(f *FrontConfig) { f.Port = f.AdminPort }, "both 9901"},
		{"bad pull secret", func(f *FrontConfig) { f.ImagePullSecrets = []string{"Not_A_Name"} }, `pull secret "Not_A_Name"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := DefaultFrontConfig()
			tt.mod(&f)
			require.ErrorContains(t, f.Validate(), tt.want)
		})
	}
}

// TestFrontDeploymentHash: the hash that decides whether the front is rewritten
// changes with what the decider writes, and only with it.
func TestFrontDeploymentHash(t *testing.T) {
	base := hashOf(FrontDeployment("shop", "web", DefaultFrontConfig()))
	require.Equal(t, base, hashOf(FrontDeployment("shop", "web", DefaultFrontConfig())), "deterministic")
	for _, mod := range []func(*FrontConfig){
		func(f *FrontConfig) { f.Image = "other:1" },
		func(f *FrontConfig) { f.Replicas = 3 },
		func(f *FrontConfig) {
			f.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		},
		func(f *FrontConfig) { f.NodeSelector = map[string]string{"pool": "edge"} },
	} {
		f := DefaultFrontConfig()
		mod(&f)
		require.NotEqual(t, base, hashOf(FrontDeployment("shop", "web", f)))
	}
	// The front's pods: scraped by the collector as web's front, skipped by the webhook.
	d := FrontDeployment("shop", "web", DefaultFrontConfig())
	labels := d.Spec.Template.Labels
	require.Equal(t, "web", labels["qas.dev/front-of"])
	require.Equal(t, "true", labels["qas.dev/inject"])
	require.Equal(t, "true", d.Spec.Template.Annotations["qas.dev/injected"])
	require.Equal(t, FrontContainerName, d.Spec.Template.Spec.Containers[0].Name)
	require.Subset(t, labels, d.Spec.Selector.MatchLabels)
}

// TestFrontArgsPassTheProxysValidation: the front's command line is one qas-proxy
// accepts in front mode (the contract with proxy/app, checked on its own parser).
func TestFrontArgsPassTheProxysValidation(t *testing.T) {
	d := FrontDeployment("shop", "web", DefaultFrontConfig())
	f, err := proxyapp.Parse(d.Spec.Template.Spec.Containers[0].Args, func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, proxyapp.ModeFront, f.Mode)
	require.Equal(t, "web", f.Workload)
	require.Equal(t, "/var/run/qas/pool/key", f.PoolSecretFile)
	require.Equal(t, ":9902", f.Listen)
}

// TestFrontUpdateRetriesAConflict: an update of the front Deployment that meets
// another writer's (the Deployment controller's revision or status) is tried again
// on a fresh read instead of failing the cycle; a conflict that persists is returned.
func TestFrontUpdateRetriesAConflict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int
		wantErr   bool
	}{
		{"one conflict", 1, false},
		{"conflicts that persist", 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qa := &v1alpha1.QueueAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "qa-uid"}}
			old := FrontDeployment("shop", "web", DefaultFrontConfig())
			old.OwnerReferences = []metav1.OwnerReference{ownerOf(qa)}
			old.Annotations = map[string]string{PoolingHashAnnotation: "stale"}
			kube := kubefake.NewClientset(old)
			updates, left := 0, tc.conflicts
			kube.PrependReactor("update", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
				updates++
				if left > 0 {
					left--
					return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), old.Name, errors.New("the object has been modified"))
				}
				return false, nil, nil
			})
			c := &Controller{Kube: kube, Recorder: record.NewFakeRecorder(10)}
			dep, err := c.ensureFront(t.Context(), qa, "web", ownerOf(qa), DefaultFrontConfig())
			if tc.wantErr {
				require.Error(t, err)
				require.True(t, apierrors.IsConflict(err), "the conflict is what is returned: %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 2, updates, "one conflict, then the update on a fresh read")
			require.NotEqual(t, "stale", dep.Annotations[PoolingHashAnnotation])
			stored, err := kube.AppsV1().Deployments("shop").Get(t.Context(), old.Name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, dep.Annotations[PoolingHashAnnotation], stored.Annotations[PoolingHashAnnotation])
		})
	}
}
