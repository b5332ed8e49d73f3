package inject_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qas-dev/qas/collector/discovery"
	"github.com/qas-dev/qas/decider/certs"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/inject/injecttest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// Full: Deployments, scheduling and kwok's Running pods, which the collector's
// discovery needs.
func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Full()) }

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
		if c.Name == sidecar.ContainerName {
			return true
		}
	}
	return false
}

// service stands in for the webhook's Service in front of its replicas: it forwards
// TCP connections (TLS passes through untouched) to one replica's server, and
// switching replicas retires every open connection, so the apiserver's next call makes
// a new TLS handshake, as it does with a new connection at any time.
type service struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   map[net.Conn]chan struct{} // apiserver side → closed when forwarding ends
	wg      sync.WaitGroup
}

func startService(t *testing.T) *service {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &service{ln: ln, conns: map[net.Conn]chan struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.forward(c) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.dropAll()
		s.wg.Wait()
	})
	return s
}

func (s *service) forward(c net.Conn) {
	s.mu.Lock()
	backend := s.backend
	s.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		_ = c.Close()
		return
	}
	ended := make(chan struct{})
	s.mu.Lock()
	s.conns[c] = ended
	s.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = b.Close()
	<-done
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	close(ended)
}

// routeTo sends new connections to addr and retires the open ones: it ends its
// side of each (the apiserver reads the end, and its HTTP client closes the
// connection) and waits until the apiserver has closed them. Closing them outright
// instead races with a call the apiserver may be starting on a pooled connection,
// which then fails, and with failurePolicy Ignore admits that pod uninjected: a flaw
// of this stand-in, not of the webhook.
func (s *service) routeTo(addr string) {
	s.mu.Lock()
	s.backend = addr
	open := make(map[net.Conn]chan struct{}, len(s.conns))
	for c, ended := range s.conns {
		open[c] = ended
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			_ = c.Close()
		}
	}
	s.mu.Unlock()
	deadline := time.After(10 * time.Second)
	for c, ended := range open {
		select {
		case <-ended:
		case <-deadline:
			_ = c.Close() // the apiserver kept it: close it outright
		}
	}
}

func (s *service) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

// replica is one webhook replica: its own certificate manager and server, sharing
// the Secret with the others.
type replica struct {
	mgr  *certs.Manager
	addr string
}

func startReplica(t *testing.T, ctx context.Context, mgr *certs.Manager) *replica {
	mgr.Reloader = &certs.Reloader{}
	srvCtx, stop := context.WithCancel(ctx)
	addrc := make(chan net.Addr, 1)
	srv := &inject.Server{
		Addr: "127.0.0.1:0", Handler: inject.Handler{Config: inject.DefaultConfig()},
		GetCertificate: mgr.Reloader.GetCertificate, Ready: func(a net.Addr) { addrc <- a },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(srvCtx) }()
	t.Cleanup(func() { stop(); <-done }) //nolint:errcheck // waits for the end; the error is the cancellation
	return &replica{mgr: mgr, addr: (<-addrc).String()}
}

// TestWebhookThroughRealAPIServer runs two webhook replicas with self-managed TLS on
// loopback behind a stand-in Service, and has the real kube-apiserver call them for
// Pods and for a Deployment's pods; renews the serving certificate and then rolls the
// CA over, each time creating pods right away (no retries) through either replica, a
// renewed one and one that has not reloaded yet; finally stops the webhook
// (failurePolicy Ignore).
func TestWebhookThroughRealAPIServer(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Certificates are checked by the apiserver against the real time, so the
	// injected clock starts in the past: the first serving certificate enters its renew
	// window 2 h before now (the first clock step), the CA 1 h before now (the second).
	realNow := time.Now()
	now := realNow.Add(-10 * time.Hour)
	newManager := func() *certs.Manager {
		return &certs.Manager{
			Client: cs, Namespace: ns, SecretName: "qas-webhook-tls", WebhookConfig: "qas-inject-" + ns,
			DNSNames: []string{"127.0.0.1"}, CAValidity: 20 * time.Hour, CARenewBefore: 11 * time.Hour,
			Validity: 12 * time.Hour, RenewBefore: 4 * time.Hour, Clock: nowClock{&now},
		}
	}
	a, b := startReplica(t, ctx, newManager()), startReplica(t, ctx, newManager())
	svc := startService(t)
	svc.routeTo(a.addr)
	hookName := injecttest.Register(t, c, ns, fmt.Sprintf("https://%s/mutate", svc.ln.Addr()))

	rotated, err := a.mgr.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated)
	rotated, err = b.mgr.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated, "the second replica uses the first one's certificate")
	secret := func() map[string][]byte {
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
		require.NoError(t, err)
		return sec.Data
	}
	caBundle := func() []byte {
		hook, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, hookName, metav1.GetOptions{})
		require.NoError(t, err)
		return hook.Webhooks[0].ClientConfig.CABundle
	}
	first := secret()
	require.Equal(t, first[certs.KeyCACert], caBundle())

	n := 0
	newPod := func(labels, annotations map[string]string) *corev1.Pod {
		n++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", n), Labels: labels, Annotations: annotations},
			Spec:       optedInPod(),
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}
	optIn := map[string]string{sidecar.InjectLabel: "true"}
	// The webhook configuration reaches the apiserver's admission chain
	// asynchronously, and with failurePolicy Ignore pods created before that are
	// admitted unchanged: wait for the first injected pod once, when it is registered.
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		pod = newPod(optIn, nil)
		return hasSidecar(pod), nil
	})
	require.NoError(t, err, "no pod came back injected")
	require.Equal(t, "true", pod.Annotations[sidecar.InjectedAnnotation])
	require.Len(t, pod.Spec.Containers, 2)
	app := pod.Spec.Containers[0]
	require.Equal(t, inject.AppPortName, app.Ports[0].Name)
	require.Equal(t, int32(18080), app.ReadinessProbe.HTTPGet.Port.IntVal)
	proxy := pod.Spec.Containers[1]
	require.Equal(t, "http", proxy.Ports[0].Name)
	require.Equal(t, int32(8080), proxy.Ports[0].ContainerPort)
	require.Contains(t, proxy.Args, "--upstream=127.0.0.1:18080")

	// From here on every opted-in pod must come back injected at once, through
	// either replica, whatever the renewals.
	injectedNow := func(what string) {
		t.Helper()
		for _, r := range []*replica{a, b} {
			svc.routeTo(r.addr)
			for range 3 {
				p := newPod(optIn, nil)
				require.True(t, hasSidecar(p), "%s: pod %s admitted without the sidecar through replica %s", what, p.Name, r.addr)
			}
		}
	}
	injectedNow("after the first certificate")

	// Pods that do not opt in, or opt out, are left alone.
	for _, p := range []*corev1.Pod{newPod(nil, nil), newPod(map[string]string{sidecar.InjectLabel: "false"}, optIn)} {
		require.False(t, hasSidecar(p), "pod %s labels %v annotations %v", p.Name, p.Labels, p.Annotations)
	}

	// A Deployment's pods, created by the ReplicaSet controller, get the sidecar.
	replicas := int32(2)
	labels := map[string]string{"app": "demo", sidecar.InjectLabel: "true"}
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

	// The serving certificate enters its renew window: replica a renews it under the
	// same CA (the caBundle does not change); b still serves the old one.
	now = realNow.Add(-90 * time.Minute)
	rotated, err = a.mgr.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated)
	second := secret()
	require.NotEqual(t, first[certs.KeyCert], second[certs.KeyCert])
	require.Equal(t, first[certs.KeyCACert], second[certs.KeyCACert])
	require.Equal(t, first[certs.KeyCACert], caBundle())
	injectedNow("after renewing the serving certificate")
	rotated, err = b.mgr.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated)

	// The CA enters its renew window: a rolls it over. First as seen by an apiserver
	// that has not reloaded the caBundle yet (a's publication is held back): a serves
	// a certificate of the new CA, which the old caBundle must still verify, and b
	// still serves the previous one until its next sync.
	now = realNow
	held := *a.mgr // shares a's Reloader
	held.WebhookConfig = ""
	rotated, err = held.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated)
	require.Equal(t, second[certs.KeyCACert], caBundle(), "the apiserver still has the old caBundle")
	third := secret()
	require.NotEqual(t, second[certs.KeyCACert], third[certs.KeyCACert])
	require.Equal(t, second[certs.KeyCACert], third[certs.KeyPreviousCA])
	injectedNow("after the CA rollover, before the caBundle changes")
	// Then the caBundle gains the new CA (the previous one stays while valid).
	rotated, err = a.mgr.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated)
	require.Equal(t, append(append([]byte{}, third[certs.KeyCACert]...), second[certs.KeyCACert]...), caBundle())
	injectedNow("right after the caBundle changed")
	rotated, err = b.mgr.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated)
	injectedNow("after every replica reloaded")

	// Webhook down: with failurePolicy Ignore pods are still admitted, uninjected.
	svc.routeTo("127.0.0.1:1")
	p := newPod(optIn, nil)
	require.False(t, hasSidecar(p), "a webhook outage must not block pod creation")
}

// TestAnnotationOptInReachesDiscovery: a Deployment whose pod template opts in by
// annotation only (no label; its ReplicaSet has none either) gets the sidecar through
// the real apiserver with the chart's default selectors, and the collector's discovery
// finds its pods under the Deployment's name.
func TestAnnotationOptInReachesDiscovery(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startReplica(t, ctx, &certs.Manager{
		Client: cs, Namespace: ns, SecretName: "qas-webhook-tls", WebhookConfig: "qas-inject-" + ns,
		DNSNames: []string{"127.0.0.1"},
	})
	injecttest.Register(t, c, ns, fmt.Sprintf("https://%s/mutate", r.addr))
	_, err := r.mgr.Sync(ctx)
	require.NoError(t, err)
	// The configuration reaches the admission chain asynchronously: wait until an
	// annotated probe pod comes back injected (and labelled).
	n := 0
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n++
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n), Annotations: map[string]string{sidecar.InjectLabel: "true"}},
			Spec:       optedInPod(),
		}, metav1.CreateOptions{})
		return err == nil && hasSidecar(p), err
	})
	require.NoError(t, err, "the webhook was never called for an annotated pod")

	replicas := int32(2)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}, Annotations: map[string]string{sidecar.InjectLabel: "true"}},
				Spec:       optedInPod(),
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	factory := discovery.NewFactory(cs, ns)
	d := discovery.New(factory)
	dctx, stop := context.WithCancel(ctx)
	factory.Start(dctx.Done())
	defer factory.Shutdown()
	defer stop()
	require.NoError(t, d.WaitForSync(ctx))
	var found []discovery.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods, _, err := d.Pods()
		found = nil
		for _, p := range pods {
			if p.Workload == "api" {
				found = append(found, p)
			}
		}
		return len(found) == 2, err
	})
	require.NoError(t, err, "discovery found %+v", found)
	for _, p := range found {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, p.Pod, metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, hasSidecar(pod), "pod %s", p.Pod)
		require.Equal(t, "true", pod.Labels[sidecar.InjectLabel], "the webhook labels what it injects")
	}
	rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
	require.NoError(t, err)
	require.Len(t, rs.Items, 1)
	require.NotContains(t, rs.Items[0].Labels, sidecar.InjectLabel, "the ReplicaSet is not labelled: discovery resolved it anyway")
}

// nowClock reads the time the test moves by hand.
type nowClock struct{ t *time.Time }

func (c nowClock) Now() time.Time                  { return *c.t }
func (c nowClock) Since(t time.Time) time.Duration { return c.t.Sub(t) }
