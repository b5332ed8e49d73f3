package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/examples/app"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func startProxy(t *testing.T) (serving, statsURL string) {
	upstream := httptest.NewServer(app.Handler())
	t.Cleanup(upstream.Close)
	srv, err := server.Listen(server.Config{Upstream: upstream.Listener.Addr().String(), UpstreamTimeout: 10 * time.Second},
		server.Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"}, measure.New(nil, 0, 0), zap.NewNop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // waits for the end; the error is the cancellation
	return "http://" + srv.Addr(), "http://" + srv.AdminAddr() + "/stats"
}

func metric(t *testing.T, url, name string) string {
	resp, err := http.Get(url)
	if err != nil {
		return "" // not listening yet
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimPrefix(line, name+" ")
		}
	}
	return ""
}

// TestRunAgainstRealComponents runs the collector against a real kube-apiserver (pods
// discovered through their labels, workload through ReplicaSet→Deployment), real
// qas-proxies under load and a real InfluxDB that is killed and restarted mid-run:
// nothing is dropped (the outage is well within the buffer), and the data written
// during the outage is readable afterwards.
func TestRunAgainstRealComponents(t *testing.T) {
	db := influxtest.Start(t)
	c := kubetest.StartT(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kube := c.Clientset()
	ns := "shop"
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	labels := map[string]string{sidecar.InjectLabel: sidecar.InjectValue}
	_, err = kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9", Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: &yes}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var serving []string
	for i := range 2 {
		s, st := startProxy(t)
		serving = append(serving, s)
		p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-7d9-%d", i), Labels: labels,
				Annotations:     map[string]string{sidecar.StatsURLAnnotation: st},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9", UID: "rs-uid", Controller: &yes}}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "10.0.0.1"
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	f, err := Parse([]string{"--influx-url=" + db.URL, "--interval=500ms", "--scrape-timeout=400ms", "--cpu=false",
		"--metrics-listen=" + metricsAddr, "--namespace=" + ns}, func(string) string { return "" })
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, f, c.Config, zap.New(core)) }()

	// Steady load: one request to each pod every 20 ms.
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for loadCtx.Err() == nil {
			for _, s := range serving {
				if resp, err := http.Get(s + "/work?sleep=2ms"); err == nil {
					resp.Body.Close()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	metricsURL := "http://" + metricsAddr + "/metrics"
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for cond() == false {
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("points written", func() bool {
		v := metric(t, metricsURL, "qas_collector_points_written_total")
		return v != "" && v != "0"
	})

	db.Stop()
	outageStart := time.Now()
	waitFor("a failed write", func() bool {
		v := metric(t, metricsURL, "qas_collector_points_retried_total")
		return v != "" && v != "0"
	})
	time.Sleep(2 * time.Second) // several cycles while InfluxDB is down
	outageEnd := time.Now()
	db.Restart()
	stopLoad()
	<-loadDone
	waitFor("the buffer to drain", func() bool { return metric(t, metricsURL, "qas_collector_points_buffered") == "0" })
	for _, reason := range []string{influx.DropBufferFull, influx.DropInvalid, influx.DropRefused, influx.DropClosed} {
		require.Equal(t, "0", metric(t, metricsURL, `qas_collector_points_dropped_total{reason="`+reason+`"}`), reason)
	}
	stop()
	require.NoError(t, <-done)
	require.NotZero(t, logs.Len())

	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	st := &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	// The points of the outage were buffered and written after the restart.
	mid := outageStart.Add(outageEnd.Sub(outageStart) / 2)
	snap, err := st.Snapshot(ctx, store.Query{Namespace: ns, Workload: "web", Now: mid, Window: mid.Sub(outageStart)})
	require.NoError(t, err, "workload points from the outage")
	require.NotEmpty(t, snap.ArrivalRates)
	snap, err = st.Snapshot(ctx, store.Query{Namespace: ns, Workload: "web", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 2)
	require.Equal(t, "node-1", snap.Pods[0].Node)
	// Load ran until after the outage; every interval up to its end saw arrivals.
	checked := 0
	for _, s := range snap.ArrivalRates[1:] {
		if s.Time.After(outageEnd) {
			break
		}
		require.Positive(t, s.Rate, "interval ending %s", s.Time)
		checked++
	}
	require.Greater(t, checked, 3)
}
