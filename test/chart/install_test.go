package chart

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/cpu"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

var qaGVR = schema.GroupVersionResource{Group: "qas.dev", Version: "v1alpha1", Resource: "queueautoscalers"}

// installValues make the chart's pods schedulable on kwok's fake nodes and give the
// InfluxDB StatefulSet a volume from the storage class the test provides.
const installValues = `
tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
influxdb:
  internal:
    persistence: {enabled: true, size: 1Gi, storageClass: qas-chart-test, keep: %t}
`

// TestInstallDecideUninstall installs the chart with `helm install --wait` into a real
// control plane (kwok runs the pods), runs the real `qas-decider run` locally with the
// arguments and environment of the chart's decider Deployment, as the chart's decider
// ServiceAccount (so the chart's RBAC is what it gets), against a real InfluxDB that
// has no database yet (the decider creates it), checks a QueueAutoscaler gets a status
// from it, then uninstalls and sweeps the cluster: nothing new may remain but the CRD
// (Helm never deletes crds/) and, when influxdb.internal.persistence.keep is set, the
// InfluxDB volume claim; and no node may keep the decider's migration taint.
func TestInstallDecideUninstall(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%t", keep), func(t *testing.T) { installDecideUninstall(t, keep) })
	}
}

func installDecideUninstall(t *testing.T, keep bool) {
	c := kubetest.Shared(t)
	cs := c.Clientset()
	ns, appNS := c.Namespace(t), c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	persistentVolume(ctx, t, c)
	rel := installRelease(ctx, t, c, ns, fmt.Sprintf(installValues, keep))
	created := rel.h.render(t, "get", "manifest", "rel", "--namespace", ns)
	for _, name := range []string{"rel-qas-decider", "rel-qas-collector", "rel-qas-webhook"} {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.Status.ReadyReplicas != *d.Spec.Replicas {
			t.Fatalf("deployment %s after helm install --wait: %v ready %d", name, err, d.Status.ReadyReplicas)
		}
	}
	pvcName := "data-rel-qas-influxdb-0"
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName, metav1.GetOptions{}); err != nil {
		t.Fatalf("InfluxDB volume claim: %v", err)
	}

	// A workload and its autoscaler.
	createWorkload(ctx, t, c, appNS)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	qa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": "demo", "namespace": appNS},
		"spec": map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "demo"},
			"minReplicas":    int64(1), "maxReplicas": int64(5),
			"target": map[string]any{"latency": "200ms", "percentile": int64(95)},
		},
	}}
	if _, err := dyn.Resource(qaGVR).Namespace(appNS).Create(ctx, qa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The real decider as the chart configures it, as the chart's ServiceAccount, with
	// leader election on the chart's Lease; the chart's own decider pods are kwok's
	// and run nothing. Its InfluxDB starts without the database.
	influx := influxtest.StartWith(t, influxtest.Options{Empty: true})
	sa, err := c.ServiceAccountConfig(ctx, ns, "rel-qas-decider")
	if err != nil {
		t.Fatal(err)
	}
	const podName = "rel-qas-decider-5d8c7b9f4-chart"
	bin, args, env := renderedCommand(ctx, t, c, created, "rel-qas-decider", "decider",
		outsideCluster{Kubeconfig: writeKubeconfig(t, sa, c.CACert), InfluxURL: influx.URL, PodName: podName})
	decider := startProcess(t, bin, args, env)
	var status map[string]any
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(qaGVR).Namespace(appNS).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, _, _ = unstructured.NestedMap(got.Object, "status")
		return readyCondition(got) == "True", nil
	})
	if err != nil {
		t.Fatalf("the QueueAutoscaler got no Ready condition from qas-decider run: %v (status %v)", err, status)
	}
	if ref := status["reference"]; ref != "Deployment/demo" {
		t.Errorf("status.reference = %v, want Deployment/demo", ref)
	}
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "rel-qas-decider", metav1.GetOptions{})
	if err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != podName {
		t.Errorf("lease rel-qas-decider: %v, holder %v; want the local decider (POD_NAME %s) to lead", err, lease.Spec.HolderIdentity, podName)
	}
	t.Logf("status from the decider: %v", status)
	checkDashboardsOnRealData(ctx, t, influx.URL, appNS)
	decider.Stop(stopGrace)
	collectorRunsAsItsServiceAccount(ctx, t, c, created, ns, influx.URL)
	upgradeKeepsRuntimeState(ctx, t, c, rel)

	// Uninstall: nothing new remains but the CRD and what the user asked to keep.
	rel.uninstall(ctx, t, func(ref objectRef) bool {
		return keptCRD(ref) || // Helm never deletes crds/
			keep && ref == objectRef{Resource: "v1/persistentvolumeclaims", Namespace: ns, Name: pvcName} // influxdb.internal.persistence.keep
	})
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		Get(ctx, "queueautoscalers.qas.dev", metav1.GetOptions{}); err != nil {
		t.Errorf("the CRD must survive helm uninstall (Helm keeps crds/): %v", err)
	}
	_, pvcErr := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName, metav1.GetOptions{})
	if kept := pvcErr == nil; kept != keep {
		t.Errorf("InfluxDB volume claim after uninstall with keep=%t: %v", keep, pvcErr)
	}
	noHotTaint(ctx, t, c)
}

// collectorRunsAsItsServiceAccount runs the real qas-collector as the chart configures
// it, as the chart's collector ServiceAccount: it starts collecting only once its pod
// and ReplicaSet informers have synced, which the chart's RBAC must allow.
func collectorRunsAsItsServiceAccount(ctx context.Context, t *testing.T, c *kubetest.Cluster, manifest rendered, ns, influxURL string) {
	t.Helper()
	sa, err := c.ServiceAccountConfig(ctx, ns, "rel-qas-collector")
	if err != nil {
		t.Fatal(err)
	}
	bin, args, env := renderedCommand(ctx, t, c, manifest, "rel-qas-collector", "collector",
		outsideCluster{Kubeconfig: writeKubeconfig(t, sa, c.CACert), InfluxURL: influxURL, PodName: "rel-qas-collector-6f7d8c-chart"})
	p := startProcess(t, bin, args, env)
	defer p.Stop(stopGrace)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("qas-collector exited: %w", err)
		}
		return strings.Contains(p.Output(), `"msg":"collecting"`), nil
	})
	if err != nil || strings.Contains(p.Output(), "forbidden") {
		t.Fatalf("qas-collector as rel-qas-collector: %v (its output follows)", err)
	}
}

// upgradeKeepsRuntimeState: what the webhook and the decider write into objects the
// chart created (the certificate Secret's data, the caBundle, the Lease's holder) must
// survive `helm upgrade`, since the chart never renders those fields.
func upgradeKeepsRuntimeState(ctx context.Context, t *testing.T, c *kubetest.Cluster, rel *release) {
	t.Helper()
	ns := rel.ns
	cs := c.Clientset()
	// What the webhook's certificate manager does (decider/certs), with the admin client.
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "rel-qas-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key"), "ca.crt": []byte("ca")}
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "rel-qas-inject", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwc.Webhooks[0].ClientConfig.CABundle = c.CACert
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rel.upgrade(t, "--set", "decider.interval=20s")
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "rel-qas-decider", metav1.GetOptions{})
	if err != nil || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--interval=20s") {
		t.Fatalf("upgrade did not apply: %v", err)
	}
	sec, err = cs.CoreV1().Secrets(ns).Get(ctx, "rel-qas-webhook-tls", metav1.GetOptions{})
	if err != nil || string(sec.Data["tls.crt"]) != "cert" {
		t.Errorf("helm upgrade wiped the webhook certificate: %v %v", err, sec.Data)
	}
	mwc, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "rel-qas-inject", metav1.GetOptions{})
	if err != nil || !bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, c.CACert) {
		t.Errorf("helm upgrade wiped the caBundle: %v", err)
	}
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "rel-qas-decider", metav1.GetOptions{})
	if err != nil || lease.Spec.LeaseDurationSeconds == nil { // set by the decider, never by the chart
		t.Errorf("helm upgrade wiped the leader Lease: %v %+v", err, lease.Spec)
	}
}

// persistentVolume provides a volume of the storage class installValues asks for (the
// control plane has no provisioner); it is deleted after the test.
func persistentVolume(ctx context.Context, t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "qas-chart-test-"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "qas-chart-test",
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: t.TempDir()}},
		},
	}
	created, err := c.Clientset().CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Clientset().CoreV1().PersistentVolumes().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
}

func createWorkload(ctx context.Context, t *testing.T, c *kubetest.Cluster, ns string) {
	t.Helper()
	d := kubetest.Deployment(ns, "demo", 1, corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "qas-example-app",
		Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		Resources: kubetest.CPU("250m", ""),
	}}})
	if _, err := c.Clientset().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes a kubeconfig that authenticates with cfg's bearer token.
func writeKubeconfig(t *testing.T, cfg *rest.Config, ca []byte) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// stopGrace is how long a QAS binary may take to exit after SIGTERM before it is
// killed.
const stopGrace = 30 * time.Second

// startProcess runs bin with args and env (added to this process's) until the test
// ends, or until the caller stops it; its output is logged if the test fails.
func startProcess(t *testing.T, bin string, args, env []string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(filepath.Base(bin), bin, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(stopGrace)
		if t.Failed() {
			t.Logf("%s %s output:\n%s", p.Name, strings.Join(args, " "), tail(p.Output(), 60))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func readyCondition(qa *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(qa.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// checkDashboardsOnRealData runs every dashboard query, expanded as Grafana would for
// the test's workload, on the real InfluxDB the decider writes its decisions to: each
// must compile and run on InfluxDB 1.8's Flux, and the decision panels must show the
// decider's decisions.
func checkDashboardsOnRealData(ctx context.Context, t *testing.T, influxURL, ns string) {
	t.Helper()
	vars := map[string][]string{"bucket": one(influxtest.Bucket), "namespace": one(ns), "workload": one("demo"), "queueautoscaler": one("demo"), "node": one("kwok-node-1"), "nodes": one("kwok-node-1")}
	queries := dashboardQueries(t)
	// Decisions reach InfluxDB through the decider's buffered writer, which creates the
	// database first (until then, queries fail: "no database").
	var table string
	var queryErr error
	// The decider holds (no measurements yet): its decisions are "none", which the
	// Replicas panel draws and the Decisions table and annotation leave out.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for where, q := range queries {
			if strings.Contains(where, `"Replicas" A`) {
				table, queryErr = fluxQuery(ctx, influxURL, grafanaExpand(q, vars))
			}
		}
		return queryErr == nil && strings.Contains(table, "desired_replicas"), nil
	})
	if err != nil {
		t.Fatalf("the Replicas panel shows no decision of the decider: %v (last query: %v)\n%s", err, queryErr, table)
	}
	writeCollectorPoints(ctx, t, influxURL, ns)
	if len(queries) < 10 {
		t.Fatalf("only %d dashboard queries", len(queries))
	}
	// Variables derived from other variables, as Grafana computes them: the workload's
	// nodes (its pod ran on kwok-node-1; kwok-node-2 has no pod of it) and the
	// QueueAutoscalers of the workload (none for a workload that has none).
	variable := func(name string, vars map[string][]string) []string {
		t.Helper()
		out, err := fluxQuery(ctx, influxURL, grafanaExpand(queries["qas-workload.json variable "+name], vars))
		if err != nil {
			t.Fatalf("variable %s: %v", name, err)
		}
		return csvColumn(t, out, "_value")
	}
	if got := variable("nodes", vars); !slices.Equal(got, []string{"kwok-node-1"}) {
		t.Errorf("variable nodes = %v, want the node of the workload's pod only [kwok-node-1]", got)
	}
	if got := variable("queueautoscaler", vars); !slices.Equal(got, []string{"demo"}) {
		t.Errorf("variable queueautoscaler for workload demo = %v, want [demo]", got)
	}
	other := maps.Clone(vars)
	other["workload"] = one("other")
	if got := variable("queueautoscaler", other); len(got) != 0 {
		t.Errorf("variable queueautoscaler for workload other = %v: QueueAutoscalers of another workload offered", got)
	}
	t.Logf("running %d dashboard queries on InfluxDB", len(queries))
	for where, q := range queries {
		out, err := fluxQuery(ctx, influxURL, grafanaExpand(q, vars))
		switch {
		case err != nil:
			t.Errorf("%s: %v", where, err)
		case strings.Contains(where, "annotation") || strings.Contains(where, `"Decisions"`):
			// Only "none" decisions so far: these leave them out (TestDashboardsOverSevenDays
			// checks them with decisions that act).
			if dataRows(out) != 0 {
				t.Errorf("%s: shows decisions to do nothing:\n%s", where, out)
			}
		case dataRows(out) == 0:
			t.Errorf("%s: no data:\n%s\n%s", where, grafanaExpand(q, vars), out)
		case strings.Contains(where, "variable queueautoscaler") && !strings.Contains(out, "demo"):
			t.Errorf("%s: QueueAutoscaler demo not offered:\n%s", where, out)
		case strings.Contains(where, `"Replicas" A`) && !strings.Contains(out, "desired_replicas"):
			t.Errorf("%s: no desired_replicas series:\n%s", where, out)
		case strings.Contains(where, "qas-workload.json panel") && strings.Contains(where, "Node CPU") &&
			(!strings.Contains(out, "kwok-node-1") || strings.Contains(out, "kwok-node-2")):
			t.Errorf("%s: want kwok-node-1, where the workload runs, and not kwok-node-2:\n%s", where, out)
		}
	}
}

// csvColumn returns the values of column name in the data rows of an annotated Flux
// CSV response (every table).
func csvColumn(t *testing.T, out, name string) []string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	var values []string
	col := -1
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return values
		}
		if err != nil {
			t.Fatalf("flux CSV: %v\n%s", err, out)
		}
		switch {
		case len(rec) == 0 || strings.HasPrefix(rec[0], "#") || (len(rec) == 1 && rec[0] == ""):
			col = -1 // annotations and the blank line between tables
		case col < 0:
			col = slices.Index(rec, name)
			if col < 0 {
				t.Fatalf("flux CSV has no column %s: %v", name, rec)
			}
		default:
			values = append(values, rec[col])
		}
	}
}

// writeCollectorPoints writes one cycle of the collector's measurements for the test's
// workload with the collector's own point builders and writer, so that every panel has
// data of the types the collector writes (the workload's with the pooled data plane's
// fields, for the pooled panels, and with the arrival rate's variability), and one
// decision of the batch model with the decider's own point builder.
func writeCollectorPoints(ctx context.Context, t *testing.T, influxURL, ns string) {
	t.Helper()
	w, err := influx.NewWriter(influx.WriterConfig{URL: influxURL, Bucket: influxtest.Bucket}, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m := aggregate.Metrics{Time: now, ArrivalRate: 42, ServiceMean: 0.05, ServiceSCV: 1, InFlightMean: 2.1, BusyRatio: 0.8,
		LatencyP50: 0.04, LatencyP95: 0.15, LatencyP99: 0.3, Completions: 420, Pods: 1}
	pod := pipeline.PodPoint(scrape.Target{Namespace: ns, Workload: "demo", Pod: "demo-1", Node: "kwok-node-1"}, m)
	pod.AddField("cpu_usage_cores", 0.2)
	pod.AddField("cpu_request_cores", 0.25)
	pod.AddField("cpu_limit_cores", 0.0)
	// The workload's arrivals varied from second to second (cv² measured), and a
	// decision, built as the decider builds it, that averaged over the seconds' rates,
	// compared the late shares and weighed a scale-down over more than an hour of
	// history: the decider under test holds (no measurements yet), so its own
	// decisions have none of these (a level of 0 is not drawn, nor is a margin's).
	wl := withPooling(m, 0.5)
	if wl.ArrivalRateSums, err = ratevar.Of([]int64{40, 44, 38, 47, 41, 36, 45}); err != nil {
		t.Fatal(err)
	}
	if wl.ArrivalRateCV2, err = ratevar.CV2(wl.ArrivalRateSums); err != nil {
		t.Fatal(err)
	}
	batch := decide.Decision{Time: now, Action: decide.ActionNone, DesiredReplicas: 1, Explanation: decide.Explanation{
		CurrentReplicas: 1, ArrivalRate: 42, ServiceTime: 0.05, Target: 0.2, Reason: "modelled latency within tolerance",
		RateCV2: 0.4, ArrivalRateLevel: 40, LevelWindow: 45 * time.Second, MeasuredLateShare: 0.04, ModelledLateShare: 0.05,
		TransientLateShare: 0.003, LatencyBias: 1.2, EffectivePercentile: 95.3,
		DownLateShare: 0.042, RecentJumps: 225, RecentMarginReplicas: 1, Depth: 0.5, DepthJumps: 713, DepthMarginReplicas: 2}}
	w.Write(pod, pipeline.WorkloadPoint(ns, "demo", wl), store.DecisionPoint(ns, "demo", "demo", batch, false),
		cpu.NodePoint(cpu.NodeCPU{Name: "kwok-node-1", Time: now, Usage: 3.5, Allocatable: 16}),
		cpu.NodePoint(cpu.NodeCPU{Name: "kwok-node-2", Time: now, Usage: 9, Allocatable: 16})) // runs none of the workload's pods
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if written, _, dropped := w.Counts(); written != 5 || dropped != 0 {
		t.Fatalf("wrote %v points, dropped %v", written, dropped)
	}
}

// dataRows counts the data rows of an annotated Flux CSV response.
func dataRows(csv string) int {
	n := 0
	for _, line := range strings.Split(csv, "\n") {
		if strings.HasPrefix(line, ",") && !strings.HasPrefix(line, ",result,table") {
			n++
		}
	}
	return n
}

// fluxQuery runs a Flux query on InfluxDB's /api/v2/query and returns the CSV.
func fluxQuery(ctx context.Context, influxURL, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, influxURL+"/api/v2/query", strings.NewReader(q))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/vnd.flux")
	req.Header.Set("Accept", "application/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	// Errors come as a non-200 status or, once streaming began, as an "error" table.
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(string(body), "error") || strings.Contains(string(body), "\nerror\n") {
		return "", fmt.Errorf("%s: %s\n%s", resp.Status, body, q)
	}
	return string(body), nil
}
