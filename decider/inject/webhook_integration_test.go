package inject_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qas-dev/qas/decider/certs"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Options{ControllerManager: true}) }

func optedInPod() corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "app", Image: "qas-example-app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")},
			}},
		}},
		Tolerations: []corev1.Toleration{kubetest.Toleration()},
	}
}

func hasSidecar(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == inject.ContainerName {
			return true
		}
	}
	return false
}

// TestWebhookThroughRealAPIServer runs the webhook with self-managed TLS on loopback
// and has the real kube-apiserver call it for Pods and for a Deployment's pods; then
// rotates the certificate, and finally stops the webhook (failurePolicy Ignore).
func TestWebhookThroughRealAPIServer(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Certificates: the clock starts 23h in the past, so moving it to the present
	// later puts the certificate inside its renew window.
	realNow := time.Now()
	now := realNow.Add(-23 * time.Hour)
	reloader := &certs.Reloader{}
	srvCtx, stopServer := context.WithCancel(ctx)
	addrc := make(chan net.Addr, 1)
	srv := &inject.Server{
		Addr: "127.0.0.1:0", Handler: inject.Handler{Config: inject.DefaultConfig()},
		GetCertificate: reloader.GetCertificate, Ready: func(a net.Addr) { addrc <- a },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(srvCtx) }()
	t.Cleanup(func() { stopServer(); <-done })
	addr := <-addrc

	url := fmt.Sprintf("https://%s/mutate", addr)
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	hookName := "qas-inject-" + ns
	_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: hookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "inject.qas.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), hookName, metav1.DeleteOptions{})
	})

	mgr := &certs.Manager{
		Client: cs, Namespace: ns, SecretName: "qas-webhook-tls", WebhookConfig: hookName,
		DNSNames: []string{"127.0.0.1"}, Validity: 24 * time.Hour, RenewBefore: 8 * time.Hour,
		Now: func() time.Time { return now }, Reloader: reloader,
	}
	rotated, err := mgr.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated)
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
	require.NoError(t, err)
	hook, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, hookName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, sec.Data[certs.KeyCACert], hook.Webhooks[0].ClientConfig.CABundle)

	// createInjected creates opted-in pods until one comes back with the sidecar: the
	// webhook configuration reaches the apiserver's admission chain asynchronously, and
	// with failurePolicy Ignore early pods are admitted unchanged.
	n := 0
	createInjected := func() *corev1.Pod {
		var got *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			n++
			p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", n), Namespace: ns, Labels: map[string]string{inject.LabelInject: "true"}},
				Spec:       optedInPod(),
			}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			got = p
			return hasSidecar(p), nil
		})
		require.NoError(t, err, "no pod came back injected")
		return got
	}

	pod := createInjected()
	require.Equal(t, "true", pod.Annotations[inject.AnnotationInjected])
	require.Len(t, pod.Spec.Containers, 2)
	app := pod.Spec.Containers[0]
	require.Equal(t, inject.AppPortName, app.Ports[0].Name)
	require.Equal(t, int32(18080), app.ReadinessProbe.HTTPGet.Port.IntVal)
	proxy := pod.Spec.Containers[1]
	require.Equal(t, "http", proxy.Ports[0].Name)
	require.Equal(t, int32(8080), proxy.Ports[0].ContainerPort)
	require.Contains(t, proxy.Args, "--upstream=127.0.0.1:18080")

	// A pod that does not opt in is left alone.
	plain, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: optedInPod()}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.False(t, hasSidecar(plain))

	// A Deployment's pods, created by the ReplicaSet controller, get the sidecar.
	replicas := int32(2)
	labels := map[string]string{"app": "demo", inject.LabelInject: "true"}
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: optedInPod()},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods *corev1.PodList
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
		return err == nil && len(pods.Items) == 2, err
	})
	require.NoError(t, err, "the Deployment's pods were not created")
	for _, p := range pods.Items {
		require.True(t, hasSidecar(&p), "pod %s has no sidecar", p.Name)
		require.Len(t, p.Spec.Containers, 2, "injected once")
	}

	// Rotation: the clock reaches the renew window; the new certificate is served and
	// its CA published, and the apiserver keeps calling the webhook.
	now = realNow
	rotated, err = mgr.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated)
	sec2, err := cs.CoreV1().Secrets(ns).Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, sec.Data[certs.KeyCert], sec2.Data[certs.KeyCert])
	createInjected()

	// Webhook down: with failurePolicy Ignore pods are still admitted, uninjected.
	stopServer()
	require.NoError(t, <-done)
	done <- nil // for the cleanup
	p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "while-down", Labels: map[string]string{inject.LabelInject: "true"}},
		Spec:       optedInPod(),
	}, metav1.CreateOptions{})
	require.NoError(t, err, "a webhook outage must not block pod creation")
	require.False(t, hasSidecar(p))
}
