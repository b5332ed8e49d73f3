package inject

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/qas-dev/qas/proxy/sidecar"
)

// Pooling (issue #20, docs/pooling.md): the sidecars of a workload whose
// QueueAutoscaler has routing pooled overflow to and pull from the workload's front.
// The webhook tells the qas-proxy container, and only it, where the front is and how
// to authenticate: the pooling Secret mounted read-only, --workload,
// --pool-secret-file and --pool-front-service, POD_NAMESPACE from the downward API,
// and the pod's ServiceAccount token (the proxy watches the front's EndpointSlices
// with the Role the decider binds to that account). The app container gets none of it.

// EnvPodNamespace tells the proxy its namespace, where the front's EndpointSlices are.
const EnvPodNamespace = "POD_NAMESPACE"

// ServiceAccountDir is where Kubernetes mounts a pod's API credentials.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ProxyAPIAccessVolume is the projected volume the webhook adds for the proxy's API
// credentials when no container of the pod has them (automountServiceAccountToken:
// false): the proxy needs them, the app need not have them.
const ProxyAPIAccessVolume = "qas-proxy-api-access"

// PoolingLookup tells whether a pod belongs to a workload whose QueueAutoscaler has
// routing pooled.
type PoolingLookup interface {
	// PooledWorkload returns the pooled workload (Workload "" when the pod's workload
	// does not pool). pod.Namespace is set.
	PooledWorkload(ctx context.Context, pod *corev1.Pod) (Pooled, error)
}

// Pooled is a pooled workload as its QueueAutoscaler says.
type Pooled struct {
	// Workload is the scale target's name.
	Workload string
	// Concurrency is the QueueAutoscaler's spec.concurrency (k; 0 when unset): a
	// pooled proxy needs a concurrency limit, since it overflows when its k slots
	// are busy.
	Concurrency int
}

// queueAutoscalers is the QueueAutoscaler resource the lookup watches.
var queueAutoscalers = schema.GroupVersionResource{Group: "qas.dev", Version: "v1alpha1", Resource: "queueautoscalers"}

// QueueAutoscalerLookup finds a pod's pooled workload from the QueueAutoscalers (an
// informer cache) and the pod's controller: a QueueAutoscaler whose scaleTargetRef
// names the pod's controlling owner, or, for a ReplicaSet's pod, the Deployment that
// owns the ReplicaSet (read from the API server only for a pod in a namespace with
// a pooled QueueAutoscaler).
type QueueAutoscalerLookup struct {
	kube     kubernetes.Interface
	informer cache.SharedIndexInformer
	// Timeout bounds the ReplicaSet read (default 2 s): admission waits for it.
	Timeout time.Duration
}

// NewQueueAutoscalerLookup starts watching QueueAutoscalers in every namespace until
// ctx ends. WaitForSync waits for the first list.
func NewQueueAutoscalerLookup(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) *QueueAutoscalerLookup {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(queueAutoscalers).Informer()
	_ = inf.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	factory.Start(ctx.Done())
	return &QueueAutoscalerLookup{kube: kube, informer: inf, Timeout: 2 * time.Second}
}

// WaitForSync waits until the QueueAutoscalers were listed once, or ctx ends.
func (l *QueueAutoscalerLookup) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), l.informer.HasSynced)
}

// pooledTarget is a pooled QueueAutoscaler's scale target.
type pooledTarget struct {
	group, kind, name string
	concurrency       int
}

// PooledWorkload implements PoolingLookup.
func (l *QueueAutoscalerLookup) PooledWorkload(ctx context.Context, pod *corev1.Pod) (Pooled, error) {
	if !l.informer.HasSynced() {
		return Pooled{}, errors.New("the QueueAutoscalers are not listed yet (can the webhook list and watch queueautoscalers?)")
	}
	objs, err := l.informer.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	if err != nil {
		return Pooled{}, err
	}
	var targets []pooledTarget
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if routing, _, _ := unstructured.NestedString(u.Object, "spec", "routing"); routing != "pooled" {
			continue
		}
		apiVersion, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "apiVersion")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || kind == "" || name == "" {
			continue
		}
		k, _, _ := unstructured.NestedInt64(u.Object, "spec", "concurrency")
		if k < 0 || k > 1<<20 {
			k = 0
		}
		targets = append(targets, pooledTarget{group: gv.Group, kind: kind, name: name, concurrency: int(k)})
	}
	if len(targets) == 0 {
		return Pooled{}, nil // the common case: no API call
	}
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		return Pooled{}, nil // a bare pod has no scale target
	}
	if p := match(targets, owner); p.Workload != "" {
		return p, nil
	}
	if owner.Kind != "ReplicaSet" || groupOf(owner.APIVersion) != "apps" {
		return Pooled{}, nil
	}
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := l.kube.AppsV1().ReplicaSets(pod.Namespace).Get(rctx, owner.Name, metav1.GetOptions{})
	if err != nil {
		return Pooled{}, fmt.Errorf("read the pod's ReplicaSet %s to find its Deployment: %w", owner.Name, err)
	}
	if dep := metav1.GetControllerOfNoCopy(rs); dep != nil {
		return match(targets, dep), nil
	}
	return Pooled{}, nil
}

func match(targets []pooledTarget, owner *metav1.OwnerReference) Pooled {
	group := groupOf(owner.APIVersion)
	for _, t := range targets {
		if t.kind == owner.Kind && t.name == owner.Name && t.group == group {
			return Pooled{Workload: t.name, Concurrency: t.concurrency}
		}
	}
	return Pooled{}
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// poolingFor asks the lookup about pod; a failure is a warning and no pooling (the
// sidecar then queues locally, as with random routing).
func (c Config) poolingFor(pod *corev1.Pod) (p Pooled, warning string) {
	if c.Pooling == nil {
		return Pooled{}, ""
	}
	ctx := context.Background()
	p, err := c.Pooling.PooledWorkload(ctx, pod)
	if err != nil {
		return Pooled{}, "pooling not configured, the sidecar queues locally: " + err.Error()
	}
	if p.Workload == "" {
		return Pooled{}, ""
	}
	if len(p.Workload) > sidecar.MaxPoolingWorkloadName {
		return Pooled{}, fmt.Sprintf("pooling not configured: workload name %q is longer than %d characters", p.Workload, sidecar.MaxPoolingWorkloadName)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == sidecar.PoolKeyVolume || v.Name == ProxyAPIAccessVolume {
			return Pooled{}, fmt.Sprintf("pooling not configured: the pod already has a volume named %q", v.Name)
		}
	}
	return p, ""
}

// poolProxy configures the proxy container ct of pod for workload's pooled data
// plane; containers are the pod's other containers. It returns the volumes to add to
// the pod, and a warning when the proxy cannot be given API credentials.
func poolProxy(ct *corev1.Container, pod *corev1.Pod, containers []corev1.Container, workload string) (volumes []corev1.Volume, warning string) {
	mode := int32(0o444) // the proxy runs as a non-root user; only its container mounts it
	volumes = []corev1.Volume{{Name: sidecar.PoolKeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: sidecar.PoolingName(workload), DefaultMode: &mode,
	}}}}
	ct.Args = append(ct.Args,
		"--workload="+workload,
		"--pool-secret-file="+sidecar.PoolKeyPath,
		"--pool-front-service="+sidecar.FrontName(workload),
	)
	ct.Env = append(ct.Env, corev1.EnvVar{Name: EnvPodNamespace, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
	}})
	ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: sidecar.PoolKeyVolume, MountPath: sidecar.PoolKeyDir, ReadOnly: true})
	// The ServiceAccount admission plugin mounted the pod's API credentials into the
	// containers it saw, before this webhook added the proxy: mount the same volume.
	for _, other := range containers {
		for _, m := range other.VolumeMounts {
			if m.MountPath == ServiceAccountDir || strings.TrimSuffix(m.MountPath, "/") == ServiceAccountDir {
				ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: ServiceAccountDir, ReadOnly: true})
				return volumes, ""
			}
		}
	}
	if pod.Spec.ServiceAccountName == "" {
		// No ServiceAccount to project a token for (the ServiceAccount admission
		// plugin is off): the proxy runs without fronts and queues locally.
		return volumes, "pooling: the pod has no ServiceAccount (is the ServiceAccount admission plugin off?), so its proxy cannot read the front's EndpointSlices and queues locally"
	}
	// No container has them (automountServiceAccountToken: false): the proxy alone
	// gets them, as the kubelet would project them.
	expiry := int64(3607)
	volumes = append(volumes, corev1.Volume{Name: ProxyAPIAccessVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}})
	ct.VolumeMounts = append(ct.VolumeMounts, corev1.VolumeMount{Name: ProxyAPIAccessVolume, MountPath: ServiceAccountDir, ReadOnly: true})
	return volumes, ""
}
