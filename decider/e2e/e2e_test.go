// Package e2e runs QAS end to end on a real control plane (kube-apiserver, etcd,
// scheduler, controller-manager, kwok nodes):
//
//   - TestScalesWithLoadThroughRealPipeline: the example app's Deployment opts in by
//     annotation; the real webhook, registered with the apiserver, injects qas-proxy into
//     its pods; real qas-example-app and qas-proxy processes stand in for each kwok
//     pod's containers; Poisson load through the proxies; the real collector writes to a
//     real InfluxDB; two leader-elected `qas-decider run` replicas, under the shipped
//     RBAC, scale the Deployment up under load and down after it, hold while InfluxDB is
//     down, and fail over without starting afresh.
//   - TestDeciderCallsMatchRoles: every request a full decider run makes (scale,
//     resize, both kinds of migration, status, events, leader election and failover) is
//     allowed by config/rbac, and every rule there is used.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	collector "github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/inject/injecttest"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Full()) }

var qaGVR = v1alpha1.GroupVersion.WithResource(v1alpha1.Resource)

func installCRD(t *testing.T, c *kubetest.Cluster) {
	require.NoError(t, c.InstallCRD(context.Background(), filepath.Join(repoRoot(), "config", "crd", "qas.dev_queueautoscalers.yaml")))
}

// exampleDeployment is examples/manifests/app.yaml's Deployment in ns, with one
// replica and kwok's toleration (its pods run on kwok's nodes).
func exampleDeployment(t *testing.T, ns string) *appsv1.Deployment {
	f, err := os.Open(filepath.Join(repoRoot(), "examples", "manifests", "app.yaml"))
	require.NoError(t, err)
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		require.NoError(t, dec.Decode(&u.Object), "examples/manifests/app.yaml has no Deployment")
		if u.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d))
		one := int32(1)
		d.Namespace, d.Spec.Replicas = ns, &one
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, kubetest.Toleration())
		return &d
	}
}

// startWebhook registers the sidecar-injection webhook for ns with the apiserver (the
// chart's objectSelector and failurePolicy, a loopback URL) and runs it as `qas-decider
// webhook` runs it, with its self-managed certificate; it returns once the apiserver
// injects an opted-in pod (the configuration reaches the admission chain
// asynchronously).
func startWebhook(t *testing.T, c *kubetest.Cluster, ns string, probe corev1.PodTemplateSpec) {
	cs := c.Clientset()
	injecttest.Start(t, c, ns)

	n := 0
	eventually(t, time.Minute, "the apiserver never called the webhook", func(ctx context.Context) (bool, error) {
		n++
		p := &corev1.Pod{ObjectMeta: *probe.ObjectMeta.DeepCopy(), Spec: *probe.Spec.DeepCopy()}
		p.Name, p.Labels = fmt.Sprintf("webhook-probe-%d", n), nil // not one of the Deployment's
		got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
		return len(got.Spec.Containers) == 2, nil
	})
}

// requireInjected checks a pod of the example app against the injection contract.
func requireInjected(t *testing.T, p corev1.Pod) {
	require.Len(t, p.Spec.Containers, 2, "pod %s: the app and the sidecar", p.Name)
	app, proxy := p.Spec.Containers[0], p.Spec.Containers[1]
	require.Equal(t, sidecar.ContainerName, proxy.Name)
	require.Equal(t, []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: sidecar.AdminPortName, ContainerPort: sidecar.DefaultAdminPort, Protocol: corev1.ProtocolTCP},
	}, proxy.Ports, "the proxy owns the serving port")
	require.Equal(t, []string{"--listen=:8080", "--admin-listen=:9901", "--upstream=127.0.0.1:18080", "--drain=5s", "--shutdown-timeout=23s", "--concurrency=1"}, proxy.Args)
	require.Equal(t, []corev1.ContainerPort{{Name: inject.AppPortName, ContainerPort: 18080, Protocol: corev1.ProtocolTCP}}, app.Ports)
	require.Contains(t, app.Env, corev1.EnvVar{Name: inject.EnvAppPort, Value: "18080"})
	require.Equal(t, int32(18080), app.ReadinessProbe.HTTPGet.Port.IntVal, "the probe reaches the app directly")
	require.Equal(t, "true", p.Labels[sidecar.InjectLabel], "labelled for the collector (it opted in by annotation)")
	require.Equal(t, "true", p.Annotations[sidecar.InjectedAnnotation])
}

// load sends Poisson arrivals at rate per second (changeable) to the Ready pods'
// proxies, each request 50 ms (mean, exponential) of sleep in the app.
type load struct {
	mu   sync.Mutex
	rate float64
}

func (l *load) set(r float64) { l.mu.Lock(); l.rate = r; l.mu.Unlock() }

func (l *load) run(ctx context.Context, s *standIns) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for ctx.Err() == nil {
		l.mu.Lock()
		rate := l.rate
		l.mu.Unlock()
		if rate <= 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		ts := s.targets()
		if len(ts) == 0 {
			continue
		}
		n++
		inflight.Add(1)
		go func(url string) {
			defer inflight.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/work?sleep=50ms&dist=exp", nil)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}(ts[n%len(ts)])
	}
}

// queueAutoscaler targets the example app: one request at a time per pod (the
// proxies' --concurrency=1, from the manifest's qas.dev/concurrency), p95 under
// 250 ms.
func queueAutoscaler(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": "example-app", "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "example-app"},
			"minReplicas":    int64(1), "maxReplicas": int64(8), "concurrency": int64(1),
			"target": map[string]any{"latency": "250ms", "percentile": 95.0},
			// A wide band and a short scale-down window: one-second Poisson counts are
			// noisy (±16 % at 40/s), and the test must not wait five minutes.
			"tolerance": 0.3,
			"behavior":  map[string]any{"scaleDown": map[string]any{"stabilizationWindowSeconds": int64(20)}},
		},
	}}
}

func TestScalesWithLoadThroughRealPipeline(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	installCRD(t, c)
	bins := buildBinaries(t)
	db := influxtest.Start(t)
	kube := c.Clientset()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	qaClient := dyn.Resource(qaGVR).Namespace(ns)

	// 1. The example app opts in by annotation; the apiserver calls the webhook for
	// its pods.
	dep := exampleDeployment(t, ns)
	require.NotContains(t, dep.Spec.Template.Labels, sidecar.InjectLabel, "the manifest opts in by annotation")
	require.Equal(t, "true", dep.Spec.Template.Annotations[sidecar.InjectLabel])
	startWebhook(t, c, ns, dep.Spec.Template)
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	selector := metav1.FormatLabelSelector(dep.Spec.Selector)
	var pods *corev1.PodList
	eventually(t, time.Minute, "the Deployment's pod", func(ctx context.Context) (bool, error) {
		pods, err = kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) == 1, err
	})
	requireInjected(t, pods.Items[0])

	// Every scheduled pod gets its processes: real qas-example-app and qas-proxy.
	pp := newStandIns(t, kube, ns, selector, bins)
	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	t.Cleanup(func() { stopBG(); bgWG.Wait() })
	syncErr := make(chan error, 1)
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		for bg.Err() == nil {
			if err := pp.sync(bg); err != nil && bg.Err() == nil {
				select {
				case syncErr <- err:
				default:
				}
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	noSyncError := func() {
		t.Helper()
		select {
		case err := <-syncErr:
			t.Fatalf("stand-in processes: %v", err)
		default:
		}
	}

	// 2. The collector, as deployed: discovery through the API server, scrape, InfluxDB.
	cf, err := collector.Parse([]string{"--influx-url=" + db.URL, "--interval=1s", "--scrape-timeout=900ms", "--cpu=false",
		"--metrics-listen=127.0.0.1:0", "--namespace=" + ns}, func(string) string { return "" })
	require.NoError(t, err)
	bgWG.Add(1)
	go func() { defer bgWG.Done(); _ = collector.Run(bg, cf, c.Config, zap.NewNop()) }()

	// 3. The QueueAutoscaler, and two decider replicas as the decider's ServiceAccount
	// under the shipped RBAC.
	_, err = qaClient.Create(ctx, queueAutoscaler(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	rec := newRecorder()
	cfg := deciderConfig(t, c, ns, rec)
	deciders := map[string]*deciderProc{}
	for _, id := range []string{"decider-a", "decider-b"} {
		deciders[id] = startDecider(t, cfg, ns, db, id)
	}

	replicas := func(ctx context.Context) int32 {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "example-app", metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return *d.Spec.Replicas
	}
	getQA := func(ctx context.Context) (v1alpha1.QueueAutoscaler, error) {
		var qa v1alpha1.QueueAutoscaler
		obj, err := qaClient.Get(ctx, "example-app", metav1.GetOptions{})
		if err == nil {
			err = k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &qa)
		}
		return qa, err
	}

	// 4. Load: 40 req/s of 50 ms on pods that serve one at a time is 2 Erlangs: one
	// pod is overloaded; the leader scales up.
	l := &load{}
	l.set(40)
	bgWG.Add(1)
	go func() { defer bgWG.Done(); l.run(bg, pp) }()
	eventually(t, 3*time.Minute, "scale-up under load", func(ctx context.Context) (bool, error) {
		noSyncError()
		return replicas(ctx) >= 3, nil
	})
	upQA, err := getQA(ctx)
	require.NoError(t, err)
	require.NotNil(t, upQA.Status.LastDecision)
	t.Logf("scaled up to %d: last decision at %s: %s %s", replicas(ctx), upQA.Status.LastDecision.Time, upQA.Status.LastDecision.Action, upQA.Status.LastDecision.Reason)

	// The new pods were injected too, and run their own processes.
	eventually(t, time.Minute, "every pod injected and standing in", func(ctx context.Context) (bool, error) {
		noSyncError()
		pods, err = kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) >= 3 && len(pp.targets()) >= 3, err
	})
	for _, p := range pods.Items {
		requireInjected(t, p)
	}

	// Every decision is a point in InfluxDB.
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	eventually(t, 30*time.Second, "horizontal decision in InfluxDB", func(ctx context.Context) (bool, error) {
		res, err := client.QueryAPI("").Query(ctx, fmt.Sprintf(`from(bucket: %q) |> range(start: -1h)
  |> filter(fn: (r) => r._measurement == "qas_decision" and r.queueautoscaler == "example-app" and r.namespace == %q and r.action == "horizontal" and r._field == "desired_replicas")`, influxtest.Bucket, ns))
		if err != nil {
			return false, nil
		}
		defer res.Close()
		return res.Next(), nil
	})
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scaled"})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items, "the decision is an Event")

	// 5. Failover: under the same load, stop the leader. The other replica takes the
	// lease and goes on from the engine memory the first one left on the resource
	// (the stabilisation window and rate-limit budget), instead of starting afresh and
	// repeating its actions. (Whether it then scales is the live load's business; the
	// controller tests show with fixed measurements that nothing is repeated.)
	leaderID := leader(ctx, kube, ns)
	require.Contains(t, deciders, leaderID)
	deciders[leaderID].stop()
	failover := time.Now()
	eventually(t, time.Minute, "the standby takes over", func(ctx context.Context) (bool, error) {
		id := leader(ctx, kube, ns)
		return id != "" && id != leaderID, nil
	})
	var afterFailover v1alpha1.QueueAutoscaler
	eventually(t, time.Minute, "the new leader decides", func(ctx context.Context) (bool, error) {
		qa, err := getQA(ctx)
		afterFailover = qa
		return err == nil && qa.Status.LastDecision != nil && qa.Status.LastDecision.Time.After(failover.Add(time.Second)), nil
	})
	var memory decide.State
	require.NoError(t, json.Unmarshal([]byte(afterFailover.Annotations[controller.StateAnnotation]), &memory))
	carried := false
	for _, r := range memory.Recommendations {
		carried = carried || r.Time.Before(failover)
	}
	for _, ev := range memory.ScaleEvents {
		carried = carried || ev.Time.Before(failover)
	}
	require.True(t, carried, "the new leader kept the old leader's memory: %+v", memory)

	// 6. InfluxDB down: no measurements, so the leader holds, cycle after cycle.
	db.Stop()
	held := int32(-1)
	var holds []metav1.Time
	eventually(t, 2*time.Minute, "three held cycles without measurements", func(ctx context.Context) (bool, error) {
		qa, err := getQA(ctx)
		if err != nil || qa.Status.LastDecision == nil {
			return false, nil
		}
		cnd := apimeta.FindStatusCondition(qa.Status.Conditions, "ScalingActive")
		if cnd == nil || cnd.Status != metav1.ConditionFalse || cnd.Reason != "Holding" {
			return false, nil
		}
		if held < 0 {
			held = replicas(ctx)
		}
		require.Equal(t, held, replicas(ctx), "never scale on missing data")
		if last := qa.Status.LastDecision.Time; len(holds) == 0 || !last.Equal(&holds[len(holds)-1]) {
			holds = append(holds, last)
		}
		return len(holds) >= 4, nil // the cycle that began the hold and three more
	})
	require.Equal(t, held, replicas(ctx), "never scale on missing data")
	db.Restart()

	// 7. The load ends: back down to the minimum, and the processes of the pods that
	// went are stopped.
	l.set(0)
	eventually(t, 3*time.Minute, "scale-down after the load", func(ctx context.Context) (bool, error) {
		noSyncError()
		return replicas(ctx) == 1, nil
	})
	downQA, err := getQA(ctx)
	require.NoError(t, err)
	t.Logf("scaled down: %s", downQA.Status.LastDecision.Reason)
	eventually(t, time.Minute, "one pod left standing in", func(context.Context) (bool, error) {
		pp.mu.Lock()
		defer pp.mu.Unlock()
		return len(pp.pods) == 1, nil
	})
	t.Logf("%d stand-in processes were started", pp.started())

	// The deciders, as their ServiceAccount, were refused nothing.
	_, refused := rec.snapshot()
	require.Empty(t, refused, "requests the shipped RBAC refused")
}
