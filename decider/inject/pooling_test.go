package inject

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	proxyapp "github.com/qas-dev/qas/proxy/app"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// fixedLookup answers every pod alike.
type fixedLookup struct {
	workload    string
	concurrency int
	err         error
	asked       []string
}

func (f *fixedLookup) PooledWorkload(_ context.Context, pod *corev1.Pod) (Pooled, error) {
	f.asked = append(f.asked, pod.Namespace+"/"+pod.Name)
	return Pooled{Workload: f.workload, Concurrency: f.concurrency}, f.err
}

// withAPIAccess mounts the pod's API credentials in its app container, as the
// ServiceAccount admission plugin does before the webhook is called.
func withAPIAccess(p *corev1.Pod) {
	p.Namespace = "shop"
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x1", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "kube-api-access-x1", MountPath: ServiceAccountDir, ReadOnly: true})
}

func TestMutatePoolsOnlyTheProxy(t *testing.T) {
	cfg := DefaultConfig()
	lookup := &fixedLookup{workload: "web", concurrency: 4}
	cfg.Pooling = lookup
	before := appPod(withAPIAccess)
	got, res := apply(t, cfg, before)
	require.Empty(t, res.Skip)
	require.Empty(t, res.Warnings)
	require.Equal(t, []string{"shop/app"}, lookup.asked)
	proxy, app := container(got, sidecar.ContainerName), container(got, "app")

	require.Equal(t, []string{"--listen=:8080", "--admin-listen=:9901", "--upstream=127.0.0.1:18080", "--drain=5s", "--shutdown-timeout=23s",
		"--concurrency=4", "--workload=web", "--pool-secret-file=/var/run/qas/pool/key", "--pool-front-service=qas-front-web"}, proxy.Args)
	require.Equal(t, []corev1.EnvVar{{Name: EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}, proxy.Env)
	require.Equal(t, []corev1.VolumeMount{
		{Name: sidecar.PoolKeyVolume, MountPath: "/var/run/qas/pool", ReadOnly: true},
		{Name: "kube-api-access-x1", MountPath: ServiceAccountDir, ReadOnly: true},
	}, proxy.VolumeMounts, "the key, and the API credentials the app container already had")

	// The app container gets nothing of it: not the key, not the flags, not the env.
	require.Equal(t, before.Spec.Containers[0].VolumeMounts, app.VolumeMounts)
	require.Equal(t, []corev1.EnvVar{{Name: EnvAppPort, Value: "18080"}}, app.Env)

	mode := int32(0o444)
	require.Equal(t, []corev1.Volume{
		before.Spec.Volumes[0],
		{Name: sidecar.PoolKeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "qas-pooling-web", DefaultMode: &mode}}},
	}, got.Spec.Volumes)
	require.Equal(t, "web", got.Annotations[AnnotationPooling])
}

func TestMutatePoolingWithoutAutomountGivesTheProxyAloneAToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Pooling = &fixedLookup{workload: "web"}
	no := false
	got, res := apply(t, cfg, appPod(func(p *corev1.Pod) {
		p.Namespace, p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken = "shop", "web-runner", &no
	}))
	require.Empty(t, res.Warnings)
	proxy, app := container(got, sidecar.ContainerName), container(got, "app")
	require.Contains(t, proxy.VolumeMounts, corev1.VolumeMount{Name: ProxyAPIAccessVolume, MountPath: ServiceAccountDir, ReadOnly: true})
	require.Empty(t, app.VolumeMounts, "the app still has no token")
	require.Len(t, got.Spec.Volumes, 2)
	access := got.Spec.Volumes[1]
	require.Equal(t, ProxyAPIAccessVolume, access.Name)
	srcs := access.Projected.Sources
	require.Len(t, srcs, 3)
	require.Equal(t, "token", srcs[0].ServiceAccountToken.Path)
	require.Equal(t, "kube-root-ca.crt", srcs[1].ConfigMap.Name)
	require.Equal(t, "metadata.namespace", srcs[2].DownwardAPI.Items[0].FieldRef.FieldPath)
}

func TestMutatePoolingConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name       string
		annotation string
		fromQA     int
		want       string
	}{
		{"the QueueAutoscaler's k", "", 3, "--concurrency=3"},
		{"k = 1 when the QueueAutoscaler has none", "", 0, "--concurrency=1"},
		{"the pod's annotation wins", "2", 3, "--concurrency=2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Pooling = &fixedLookup{workload: "web", concurrency: tt.fromQA}
			got, _ := apply(t, cfg, appPod(func(p *corev1.Pod) {
				if tt.annotation != "" {
					p.Annotations = map[string]string{sidecar.ConcurrencyAnnotation: tt.annotation}
				}
			}))
			args := container(got, sidecar.ContainerName).Args
			require.Contains(t, args, tt.want)
			n := 0
			for _, a := range args {
				if strings.HasPrefix(a, "--concurrency=") {
					n++
				}
			}
			require.Equal(t, 1, n, "%v", args)
		})
	}
}

func TestMutatePoolingWithoutServiceAccountWarns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Pooling = &fixedLookup{workload: "web"}
	got, res := apply(t, cfg, appPod(nil))
	require.Len(t, res.Warnings, 1)
	require.Contains(t, res.Warnings[0], "has no ServiceAccount")
	proxy := container(got, sidecar.ContainerName)
	require.Contains(t, proxy.Args, "--pool-front-service=qas-front-web", "pooled all the same: the front is found once the pod has credentials")
	require.Equal(t, []corev1.VolumeMount{{Name: sidecar.PoolKeyVolume, MountPath: "/var/run/qas/pool", ReadOnly: true}}, proxy.VolumeMounts)
	require.Len(t, got.Spec.Volumes, 1, "no token projected for no ServiceAccount (the API server refuses it)")
}

func TestMutatePoolingFallsBackWithAWarning(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lookup PoolingLookup
		pod    func(*corev1.Pod)
		warn   string
	}{
		{"lookup fails", &fixedLookup{err: errors.New("apiserver down")}, nil, "pooling not configured, the sidecar queues locally: apiserver down"},
		{"volume name taken", &fixedLookup{workload: "web"}, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: sidecar.PoolKeyVolume}}
		}, `already has a volume named "qas-pool-key"`},
		{"workload name too long", &fixedLookup{workload: "a-workload-name-that-is-far-too-long-for-a-front-service-name"}, nil, "longer than 53 characters"},
		{"not pooled", &fixedLookup{}, nil, ""},
		{"no lookup", nil, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Pooling = tt.lookup
			got, res := apply(t, cfg, appPod(tt.pod))
			require.Empty(t, res.Skip, "injected all the same")
			if tt.warn == "" {
				require.Empty(t, res.Warnings)
			} else {
				require.Len(t, res.Warnings, 1)
				require.Contains(t, res.Warnings[0], tt.warn)
			}
			proxy := container(got, sidecar.ContainerName)
			require.NotNil(t, proxy)
			require.Equal(t, []string{"--listen=:8080", "--admin-listen=:9901", "--upstream=127.0.0.1:18080", "--drain=5s", "--shutdown-timeout=23s"}, proxy.Args)
			require.Empty(t, proxy.VolumeMounts)
			require.Empty(t, proxy.Env)
			require.NotContains(t, got.Annotations, AnnotationPooling)
		})
	}
}

func qaObject(ns, name, apiVersion, kind, target, routing string) *unstructured.Unstructured {
	spec := map[string]any{"scaleTargetRef": map[string]any{"apiVersion": apiVersion, "kind": kind, "name": target}}
	if routing != "" {
		spec["routing"] = routing
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
}

func withConcurrency(u *unstructured.Unstructured, k int64) *unstructured.Unstructured {
	_ = unstructured.SetNestedField(u.Object, k, "spec", "concurrency")
	return u
}

func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes}}
}

func TestQueueAutoscalerLookup(t *testing.T) {
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{queueAutoscalers: "QueueAutoscalerList"},
		withConcurrency(qaObject("shop", "web", "apps/v1", "Deployment", "web", "pooled"), 2),
		qaObject("shop", "db", "apps/v1", "StatefulSet", "db", "pooled"),
		qaObject("shop", "api", "apps/v1", "Deployment", "api", "random"),
		qaObject("shop", "bad", "not/a/version", "Deployment", "bad", "pooled"),
		qaObject("other", "cart", "apps/v1", "Deployment", "cart", "pooled"),
	)
	kube := fake.NewClientset(
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7d9", Namespace: "shop", OwnerReferences: controlledBy("apps/v1", "Deployment", "web")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "api-5c4", Namespace: "shop", OwnerReferences: controlledBy("apps/v1", "Deployment", "api")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "cart-1a2", Namespace: "other", OwnerReferences: controlledBy("apps/v1", "Deployment", "cart")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "lone", Namespace: "shop"}},
	)
	ctx := t.Context()
	l := NewQueueAutoscalerLookup(ctx, kube, dyn)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.True(t, l.WaitForSync(sctx))
	web, err := l.PooledWorkload(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", OwnerReferences: controlledBy("apps/v1", "ReplicaSet", "web-7d9")}})
	require.NoError(t, err)
	require.Equal(t, Pooled{Workload: "web", Concurrency: 2}, web)
	pod := func(ns string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, OwnerReferences: owners}}
	}
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want string
		err  string
	}{
		{"a pooled Deployment's pod, through its ReplicaSet", pod("shop", controlledBy("apps/v1", "ReplicaSet", "web-7d9")), "web", ""},
		{"a pooled StatefulSet's pod", pod("shop", controlledBy("apps/v1", "StatefulSet", "db")), "db", ""},
		{"a workload with routing random", pod("shop", controlledBy("apps/v1", "ReplicaSet", "api-5c4")), "", ""},
		{"the same names in another namespace do not count", pod("other", controlledBy("apps/v1", "StatefulSet", "db")), "", ""},
		{"a pooled workload in another namespace", pod("other", controlledBy("apps/v1", "ReplicaSet", "cart-1a2")), "cart", ""},
		{"a bare pod", pod("shop", nil), "", ""},
		{"a ReplicaSet without a Deployment", pod("shop", controlledBy("apps/v1", "ReplicaSet", "lone")), "", ""},
		{"a StatefulSet of another group", pod("shop", controlledBy("example.com/v1", "StatefulSet", "db")), "", ""},
		{"a namespace without pooled QueueAutoscalers costs no API call", pod("empty", controlledBy("apps/v1", "ReplicaSet", "gone")), "", ""},
		{"a ReplicaSet that cannot be read", pod("shop", controlledBy("apps/v1", "ReplicaSet", "gone")), "", `read the pod's ReplicaSet gone`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.PooledWorkload(ctx, tt.pod)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.Workload)
		})
	}
}

func TestQueueAutoscalerLookupBeforeSync(t *testing.T) {
	l := &QueueAutoscalerLookup{informer: neverSynced{}}
	_, err := l.PooledWorkload(t.Context(), &corev1.Pod{})
	require.ErrorContains(t, err, "not listed yet")
}

// neverSynced is an informer whose first list never arrives.
type neverSynced struct{ cache.SharedIndexInformer }

func (neverSynced) HasSynced() bool { return false }

// TestPooledProxyArgsKnownToTheProxy: the pooled sidecar's flags are qas-proxy's and
// pass its validation unchanged: --pool-front-service names the front's Service, whose
// EndpointSlices qas-proxy's main watches for the replicas.
func TestPooledProxyArgsKnownToTheProxy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Pooling = &fixedLookup{workload: "web", concurrency: 2}
	got, _ := apply(t, cfg, appPod(withAPIAccess))
	f, err := proxyapp.Parse(container(got, sidecar.ContainerName).Args, func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "web", f.Workload)
	require.Equal(t, 2, f.Concurrency)
	require.Equal(t, "/var/run/qas/pool/key", f.PoolSecretFile)
	require.Equal(t, "qas-front-web", f.PoolFrontService)
	require.Equal(t, sidecar.PoolPortName, f.PoolFrontPortName)
	require.Empty(t, f.PoolFronts, "no static list beside the Service")
}
