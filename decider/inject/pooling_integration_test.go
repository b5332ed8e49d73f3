package inject_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/inject/injecttest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

var qaGVR = schema.GroupVersionResource{Group: "qas.dev", Version: "v1alpha1", Resource: "queueautoscalers"}

func createQA(t *testing.T, dyn dynamic.Interface, ns, name, kind, routing string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": kind, "name": name},
			"maxReplicas":    int64(10), "routing": routing,
			"target": map[string]any{"latency": "200ms", "percentile": 95.0},
		},
	}}
	_, err := dyn.Resource(qaGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

// pooledPod is an opted-in pod running as the namespace's default ServiceAccount
// (named, since the test apiserver runs without the ServiceAccount admission plugin).
func pooledPod() corev1.PodSpec {
	spec := optedInPod()
	spec.ServiceAccountName = "default"
	return spec
}

func proxyArgs(p *corev1.Pod) []string {
	for _, c := range p.Spec.Containers {
		if c.Name == sidecar.ContainerName {
			return c.Args
		}
	}
	return nil
}

// TestWebhookPoolsTheProxiesOfPooledWorkloads runs the webhook as `qas-decider webhook`
// runs it against the real apiserver: the pods of a Deployment whose QueueAutoscaler
// has routing pooled get, in their qas-proxy container only, the pooling key, the
// pooling flags, POD_NAMESPACE and the pod's API credentials; the pods of a workload
// that does not pool get a plain sidecar.
func TestWebhookPoolsTheProxiesOfPooledWorkloads(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	require.NoError(t, c.InstallCRD(ctx, filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "qas.dev_queueautoscalers.yaml")))
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	createQA(t, dyn, ns, "probe", "StatefulSet", "pooled")
	createQA(t, dyn, ns, "web", "Deployment", "pooled")
	createQA(t, dyn, ns, "plain", "Deployment", "random")
	injecttest.Start(t, c, ns)

	// The registration and the webhook's QueueAutoscaler cache are both ready once a
	// probe pod "of" the pooled StatefulSet probe comes back pooled (its owner does not
	// exist; the pod is only looked at).
	yes := true
	n := 0
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n), Labels: map[string]string{sidecar.InjectLabel: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "probe", UID: "0bd5e2b5-probe", Controller: &yes}}},
			Spec: pooledPod(),
		}, metav1.CreateOptions{})
		return err == nil && slices.Contains(proxyArgs(p), "--workload=probe"), err
	})
	require.NoError(t, err, "the webhook never pooled the probe")

	for _, name := range []string{"web", "plain"} {
		replicas := int32(2)
		_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, sidecar.InjectLabel: "true"}},
					Spec:       pooledPod(),
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pods := func(app string) []corev1.Pod {
		var out []corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			out = list.Items
			return err == nil && len(out) == 2, err
		})
		require.NoError(t, err, "the pods of %s", app)
		return out
	}

	for _, p := range pods("web") {
		require.True(t, hasSidecar(&p))
		require.Equal(t, "web", p.Annotations[inject.AnnotationPooling])
		var proxy, app corev1.Container
		for _, ct := range p.Spec.Containers {
			if ct.Name == sidecar.ContainerName {
				proxy = ct
			} else {
				app = ct
			}
		}
		require.Subset(t, proxy.Args, []string{"--workload=web", "--pool-secret-file=/var/run/qas/pool/key", "--pool-front-service=qas-front-web"})
		require.Contains(t, proxy.Env, corev1.EnvVar{Name: inject.EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}})
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range proxy.VolumeMounts {
			mounts[m.MountPath] = m
		}
		require.True(t, mounts["/var/run/qas/pool"].ReadOnly, "the key, read-only: %+v", proxy.VolumeMounts)
		require.Contains(t, mounts, inject.ServiceAccountDir, "the proxy has the pod's API credentials: %+v", proxy.VolumeMounts)

		// The app container has no pooling key, no pooling flag and no POD_NAMESPACE.
		for _, m := range app.VolumeMounts {
			require.NotEqual(t, sidecar.PoolKeyVolume, m.Name)
			require.NotEqual(t, "/var/run/qas/pool", m.MountPath)
		}
		for _, e := range app.Env {
			require.NotEqual(t, inject.EnvPodNamespace, e.Name)
		}
		require.Empty(t, app.Args)
		var secretVolume *corev1.Volume
		for i, v := range p.Spec.Volumes {
			if v.Name == sidecar.PoolKeyVolume {
				secretVolume = &p.Spec.Volumes[i]
			}
		}
		require.NotNil(t, secretVolume)
		require.Equal(t, "qas-pooling-web", secretVolume.Secret.SecretName)
	}
	for _, p := range pods("plain") {
		require.True(t, hasSidecar(&p))
		require.NotContains(t, p.Annotations, inject.AnnotationPooling)
		for _, a := range proxyArgs(&p) {
			require.NotContains(t, a, "--pool")
			require.NotContains(t, a, "--workload")
		}
		for _, v := range p.Spec.Volumes {
			require.NotEqual(t, sidecar.PoolKeyVolume, v.Name)
		}
	}
}
