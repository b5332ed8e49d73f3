// Package e2e runs QAS end to end on a real control plane: a Deployment on kwok nodes
// whose pods are stood in for by real local qas-proxy processes in front of the example
// app, under Poisson load; the real collector writes to a real InfluxDB; two
// `qas-decider run` replicas elect a leader, which scales the Deployment up under load
// and down after it, holds while InfluxDB is down, and fails over without repeating
// an action.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	collector "github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/collector/discovery"
	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/examples/app"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Full()) }

// pods stands in for the kwok pods' sidecars: each pod of the Deployment that gets a
// node gets a real qas-proxy (concurrency 1, so queueing is real) in front of the
// example app on loopback, and the pod is annotated with the proxy's /stats URL so the
// collector scrapes it. Load goes to the proxies of Ready pods, as a Service routes.
type pods struct {
	t    *testing.T
	kube *kubetest.Cluster
	ns   string
	mu   sync.Mutex
	live map[string]*fakePod
}

type fakePod struct {
	serving string
	ready   bool
	stop    func()
}

func (p *pods) sync(ctx context.Context) error {
	list, err := p.kube.Clientset().CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			continue
		}
		seen[pod.Name] = true
		p.mu.Lock()
		fp, ok := p.live[pod.Name]
		p.mu.Unlock()
		if !ok {
			fp = p.start()
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, discovery.StatsURLAnnotation, fp.statsURL())
			if _, err := p.kube.Clientset().CoreV1().Pods(p.ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				fp.stop()
				continue
			}
			p.mu.Lock()
			p.live[pod.Name] = fp
			p.mu.Unlock()
		}
		p.mu.Lock()
		fp.ready = controller.IsReady(pod)
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, fp := range p.live {
		if !seen[name] {
			fp.stop()
			delete(p.live, name)
		}
	}
	return nil
}

var statsURLs sync.Map // serving URL → stats URL

func (fp *fakePod) statsURL() string { v, _ := statsURLs.Load(fp.serving); return v.(string) }

func (p *pods) start() *fakePod {
	upstream := httptest.NewServer(app.Handler())
	srv, err := server.Listen(server.Config{Upstream: upstream.Listener.Addr().String(), UpstreamTimeout: 30 * time.Second, ConcurrencyLimit: 1, QueueLimit: 10000},
		server.Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"}, measure.New(nil, 0, 0), zap.NewNop())
	require.NoError(p.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	fp := &fakePod{serving: "http://" + srv.Addr()}
	statsURLs.Store(fp.serving, "http://"+srv.AdminAddr()+"/stats")
	var once sync.Once
	fp.stop = func() { once.Do(func() { cancel(); <-done; upstream.Close() }) }
	p.t.Cleanup(fp.stop)
	return fp
}

func (p *pods) targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, fp := range p.live {
		if fp.ready {
			out = append(out, fp.serving)
		}
	}
	return out
}

// load sends Poisson arrivals at rate per second (changeable) to the Ready pods'
// proxies, each request 50 ms of sleep in the app.
type load struct {
	mu   sync.Mutex
	rate float64
}

func (l *load) set(r float64) { l.mu.Lock(); l.rate = r; l.mu.Unlock() }

func (l *load) run(ctx context.Context, p *pods) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}, Timeout: 30 * time.Second}
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
		ts := p.targets()
		if len(ts) == 0 {
			continue
		}
		n++
		go func(url string) {
			if resp, err := client.Get(url + "/work?sleep=50ms&dist=exp"); err == nil {
				resp.Body.Close()
			}
		}(ts[n%len(ts)])
	}
}

func deployment(ns string) *appsv1.Deployment {
	one := int32(1)
	labels := map[string]string{"app": "web", discovery.InjectLabel: discovery.InjectValue}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{kubetest.Toleration()},
					Containers: []corev1.Container{{Name: "app", Image: "qas-example-app:dev", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
					}}},
				},
			},
		},
	}
}

func queueAutoscaler(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"minReplicas":    int64(1), "maxReplicas": int64(8), "concurrency": int64(1),
			"target": map[string]any{"latency": "250ms", "percentile": 95.0},
			// A wide band and a short scale-down window: one-second Poisson counts are
			// noisy (±16 % at 40/s), and the test must not wait five minutes.
			"tolerance": 0.3,
			"behavior":  map[string]any{"scaleDown": map[string]any{"stabilizationWindowSeconds": int64(20)}},
		},
	}}
}

type decider struct {
	identity string
	cancel   context.CancelFunc
	done     chan error
}

func startDecider(t *testing.T, c *kubetest.Cluster, db *influxtest.Server, identity string) *decider {
	o := runner.Options{
		InfluxURL: db.URL, InfluxBucket: influxtest.Bucket, Interval: 2 * time.Second, Window: time.Minute, MaxPodAge: 10 * time.Second,
		LeaderElect: true, LeaseNamespace: "default", LeaseName: "qas-decider-e2e", Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		MetricsListen: "127.0.0.1:0",
	}
	require.NoError(t, o.Validate())
	ctx, cancel := context.WithCancel(context.Background())
	d := &decider{identity: identity, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- runner.Run(ctx, o, c.Config, zaptest.NewLogger(t).Named(identity)) }()
	t.Cleanup(d.stop)
	return d
}

func (d *decider) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, what)
}

func TestScalesWithLoadThroughRealPipeline(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	_, file, _, _ := runtime.Caller(0)
	require.NoError(t, c.InstallCRD(ctx, filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "qas.dev_queueautoscalers.yaml")))
	db := influxtest.Start(t)
	kube := c.Clientset()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	qaClient := dyn.Resource(controller.GVR).Namespace(ns)

	_, err = kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	fake := &pods{t: t, kube: c, ns: ns, live: map[string]*fakePod{}}
	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	t.Cleanup(func() { stopBG(); bgWG.Wait() })
	bgWG.Add(1)
	go func() {
		defer bgWG.Done()
		for bg.Err() == nil {
			_ = fake.sync(bg)
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// The collector, as deployed: discovery through the API server, scrape, InfluxDB.
	cf, err := collector.Parse([]string{"--influx-url=" + db.URL, "--interval=1s", "--scrape-timeout=900ms", "--cpu=false",
		"--metrics-listen=127.0.0.1:0", "--namespace=" + ns}, func(string) string { return "" })
	require.NoError(t, err)
	bgWG.Add(1)
	go func() { defer bgWG.Done(); _ = collector.Run(bg, cf, c.Config, zap.NewNop()) }()

	_, err = qaClient.Create(ctx, queueAutoscaler(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	deciders := map[string]*decider{"decider-a": startDecider(t, c, db, "decider-a"), "decider-b": startDecider(t, c, db, "decider-b")}

	replicas := func(ctx context.Context) int32 {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return *d.Spec.Replicas
	}
	getQA := func(ctx context.Context) (v1alpha1.QueueAutoscaler, error) {
		var qa v1alpha1.QueueAutoscaler
		obj, err := qaClient.Get(ctx, "web", metav1.GetOptions{})
		if err == nil {
			err = k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &qa)
		}
		return qa, err
	}

	// 1. Load: 40 req/s of 50 ms on pods that serve one at a time is 2 Erlangs: one
	// pod is overloaded; the leader scales up.
	l := &load{}
	l.set(40)
	bgWG.Add(1)
	go func() { defer bgWG.Done(); l.run(bg, fake) }()
	eventually(t, 3*time.Minute, "scale-up under load", func(ctx context.Context) (bool, error) { return replicas(ctx) >= 3, nil })
	upQA, err := getQA(ctx)
	require.NoError(t, err)
	require.NotNil(t, upQA.Status.LastDecision)
	t.Logf("scaled up to %d: last decision at %s: %s %s", replicas(ctx), upQA.Status.LastDecision.Time, upQA.Status.LastDecision.Action, upQA.Status.LastDecision.Reason)

	// Every decision is a point in InfluxDB.
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	eventually(t, 30*time.Second, "horizontal decision in InfluxDB", func(ctx context.Context) (bool, error) {
		res, err := client.QueryAPI("").Query(ctx, fmt.Sprintf(`from(bucket: %q) |> range(start: -1h)
  |> filter(fn: (r) => r._measurement == "qas_decision" and r.queueautoscaler == "web" and r.namespace == %q and r.action == "horizontal" and r._field == "desired_replicas")`, influxtest.Bucket, ns))
		if err != nil {
			return false, nil
		}
		defer res.Close()
		return res.Next(), nil
	})
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Scaled"})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items, "the decision is an Event")

	// 2. Failover: under the same load, stop the leader. The other replica takes the
	// lease and goes on from the engine memory the first one left on the resource
	// (the stabilisation window and rate-limit budget), instead of starting afresh and
	// repeating its actions. (Whether it then scales is the live load's business; the
	// controller tests show with fixed measurements that nothing is repeated.)
	lease, err := kube.CoordinationV1().Leases("default").Get(ctx, "qas-decider-e2e", metav1.GetOptions{})
	require.NoError(t, err)
	leaderID := *lease.Spec.HolderIdentity
	deciders[leaderID].stop()
	failover := time.Now()
	eventually(t, time.Minute, "the standby takes over", func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases("default").Get(ctx, "qas-decider-e2e", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != leaderID, nil
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

	// 3. InfluxDB down: no measurements, so the leader holds.
	db.Stop()
	eventually(t, time.Minute, "holding without measurements", func(ctx context.Context) (bool, error) {
		qa, err := getQA(ctx)
		if err != nil {
			return false, nil
		}
		for _, cnd := range qa.Status.Conditions {
			if cnd.Type == "ScalingActive" && cnd.Status == metav1.ConditionFalse && cnd.Reason == "Holding" {
				return true, nil
			}
		}
		return false, nil
	})
	held := replicas(ctx)
	time.Sleep(6 * time.Second) // three more cycles without data, under load
	require.Equal(t, held, replicas(ctx), "never scale on missing data")
	db.Restart()

	// 4. The load ends: back down to the minimum.
	l.set(0)
	eventually(t, 3*time.Minute, "scale-down after the load", func(ctx context.Context) (bool, error) { return replicas(ctx) == 1, nil })
	downQA, err := getQA(ctx)
	require.NoError(t, err)
	t.Logf("scaled down: %s", downQA.Status.LastDecision.Reason)
}
