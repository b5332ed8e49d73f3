package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { Main(m, Full()) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return Deployment(ns, name, replicas, corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "example/app:1", Resources: CPU("250m", "500m")}},
	})
}

func waitReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, want int32) {
	t.Helper()
	err := poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ReadyReplicas == want && d.Status.Replicas == want, nil
	})
	require.NoError(t, err, "deployment %s/%s never had %d ready replicas", ns, name, want)
}

func TestDeploymentBecomesReadyAndScales(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	ctx := ctxT(t)
	cs := c.Clientset()
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(ctx, t, cs, ns, "web", 2)

	// The scale subresource is how the decider changes replicas of any scalable kind.
	scale, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(2), scale.Spec.Replicas)
	scale.Spec.Replicas = 3
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitReady(ctx, t, cs, ns, "web", 3)

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		require.True(t, strings.HasPrefix(p.Spec.NodeName, "kwok-node-"), "pod %s on %q", p.Name, p.Spec.NodeName)
		require.NotEmpty(t, p.Status.ContainerStatuses[0].Resources, "kwok must copy resources into container statuses")
	}
}

func TestInPlaceResize(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	ctx := ctxT(t)
	cs := c.Clientset()
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "cpu", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	waitReady(ctx, t, cs, ns, "cpu", 1)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=cpu"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	pod := pods.Items[0]

	patch := []byte(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"1"}}}]}}`)
	_, err = cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	require.NoError(t, err)
	err = poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		res := p.Status.ContainerStatuses[0].Resources
		return res != nil && res.Requests.Cpu().MilliValue() == 500 && res.Limits.Cpu().MilliValue() == 1000 &&
			p.Status.ObservedGeneration == p.Generation, nil
	})
	require.NoError(t, err, "container status never followed the resize")
}

func TestAggregatedAPIService(t *testing.T) {
	c := Shared(t)
	ctx := ctxT(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/example.qas.dev/v1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "example.qas.dev/v1",
			APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Verbs: []string{"get", "list"}}},
		})
	})
	mux.HandleFunc("/apis/example.qas.dev/v1/widgets", func(w http.ResponseWriter, r *http.Request) {
		// The aggregator forwards who is asking through the front-proxy headers.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"WidgetList","apiVersion":"example.qas.dev/v1","user":%q,"items":[]}`, r.Header.Get("X-Remote-User"))
	})
	stop, err := c.RegisterAPIService(ctx, "example.qas.dev", "v1", mux)
	require.NoError(t, err)
	t.Cleanup(stop)

	body, err := c.Clientset().Discovery().RESTClient().Get().AbsPath("/apis/example.qas.dev/v1/widgets").DoRaw(ctx)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "WidgetList", got["kind"])
	require.Equal(t, "admin", got["user"])
}

func TestMutatingWebhookOnLoopback(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	ctx := ctxT(t)
	calls := make(chan string, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(data, &review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		calls <- review.Request.Name
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{
			UID: review.Request.UID, Allowed: true, PatchType: &pt,
			Patch: []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`),
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := certPEMOf(srv)

	fail := admissionregistrationv1.Fail
	url := srv.URL + "/mutate"
	c.RegisterPodWebhook(t, ns, "kubetest-"+ns, admissionregistrationv1.MutatingWebhook{
		Name:          "mutate.kubetest.qas.dev",
		ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
		FailurePolicy: &fail,
	})

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hooked", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}, Tolerations: []corev1.Toleration{Toleration()}},
	}
	// Webhook configuration reaches the apiserver's admission chain asynchronously.
	var created *corev1.Pod
	err := poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := c.Clientset().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if p.Labels["mutated"] == "yes" {
			created = p
			return true, nil
		}
		return false, c.Clientset().CoreV1().Pods(ns).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
	})
	require.NoError(t, err)
	require.Equal(t, "yes", created.Labels["mutated"])
	require.NotEmpty(t, calls)
}

func TestServiceAccountIsBoundByRBAC(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	ctx := ctxT(t)
	cfg, err := c.ServiceAccountConfig(ctx, ns, "limited")
	require.NoError(t, err)
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
	require.Contains(t, err.Error(), "system:serviceaccount:"+ns+":limited")
}

// TestRemoveTaintAfter: a taint a test leaves on a node is gone once the test ends;
// the node's other taints (kwok's) stay.
func TestRemoveTaintAfter(t *testing.T) {
	c := Shared(t)
	ctx := ctxT(t)
	nodes := c.Clientset().CoreV1().Nodes()
	const key = "kubetest.qas.dev/left-behind"
	t.Run("taints", func(t *testing.T) {
		c.RemoveTaintAfter(t, key)
		n, err := nodes.Get(ctx, "kwok-node-1", metav1.GetOptions{})
		require.NoError(t, err)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectPreferNoSchedule})
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	})
	n, err := nodes.Get(ctx, "kwok-node-1", metav1.GetOptions{})
	require.NoError(t, err)
	var keys []string
	for _, tn := range n.Spec.Taints {
		keys = append(keys, tn.Key)
	}
	require.Equal(t, []string{"kwok.x-k8s.io/node"}, keys)
}

func TestStopLeavesNoProcesses(t *testing.T) {
	c := StartT(t, Options{})
	ctx := ctxT(t)
	_, err := c.Clientset().CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	pids := c.PIDs()
	require.Len(t, pids, 2, "etcd and kube-apiserver")
	c.Stop()
	c.Stop() // idempotent
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "pid %d still running", pid)
	}
}
