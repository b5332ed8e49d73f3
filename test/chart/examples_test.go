package chart

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// TestExampleManifestsValid creates every object of examples/manifests with a
// server-side dry run on a real apiserver with the QueueAutoscaler CRD installed: the
// apiserver's schema, CEL rules and defaulting accept them.
func TestExampleManifestsValid(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCRD(ctx, filepath.Join(repoRoot(t), "config", "crd", "qas.dev_queueautoscalers.yaml")); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.Config)))
	kinds := map[string]bool{}
	for _, o := range exampleObjects(t) {
		gvk := o.GroupVersionKind()
		kinds[gvk.Kind] = true
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %s: %v", o.file, gvk, err)
			continue
		}
		if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, o.Unstructured, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s: %s %s: %v", o.file, gvk.Kind, o.GetName(), err)
		}
	}
	for _, k := range []string{"Deployment", "Service", "QueueAutoscaler", "Job"} {
		if !kinds[k] {
			t.Errorf("examples/manifests has no %s", k)
		}
	}
}

// exampleObject is one object of examples/manifests and the file it is in.
type exampleObject struct {
	file string // the file's base name
	*unstructured.Unstructured
}

// exampleObjects returns every object of examples/manifests, file by file.
func exampleObjects(t *testing.T) []exampleObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "examples", "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests (%v)", err)
	}
	var out []exampleObject
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseManifests(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		for _, o := range objs {
			out = append(out, exampleObject{file: filepath.Base(f), Unstructured: o})
		}
	}
	return out
}

// exampleContainers returns every container of the example manifests' pod templates.
func exampleContainers(t *testing.T) map[string]corev1.Container {
	t.Helper()
	out := map[string]corev1.Container{}
	for _, o := range exampleObjects(t) {
		var spec *corev1.PodSpec
		switch o.GetKind() {
		case "Deployment":
			spec = &convert[appsv1.Deployment](t, o.Unstructured).Spec.Template.Spec
		case "Job":
			spec = &convert[batchv1.Job](t, o.Unstructured).Spec.Template.Spec
		default:
			continue
		}
		for _, c := range spec.Containers {
			out[o.GetKind()+"/"+o.GetName()+"/"+c.Name] = c
		}
	}
	return out
}

// TestExampleImages: the examples run QAS's own images at the chart's appVersion, and
// each command they run from the decider image is built into it by Dockerfile.decider.
func TestExampleImages(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion %q: %v", chart.AppVersion, err)
	}
	stages := parseDockerfile(t, filepath.Join(repoRoot(t), "Dockerfile.decider"))
	built := strings.Join(stages[0].all("RUN"), " ")
	checked := 0
	for where, c := range exampleContainers(t) {
		repo, tag, _ := strings.Cut(c.Image, ":")
		if !strings.HasPrefix(repo, "ghcr.io/qas-dev/") {
			t.Errorf("%s: image %s is not one of QAS's", where, c.Image)
			continue
		}
		if tag != chart.AppVersion {
			t.Errorf("%s: image %s, want tag %s (the chart's appVersion)", where, c.Image, chart.AppVersion)
		}
		if repo == "ghcr.io/qas-dev/qas-decider" {
			bin, ok := strings.CutPrefix(c.Command[0], "/usr/local/bin/")
			if len(c.Command) != 1 || !ok || !strings.Contains(built, "/cmd/"+bin) {
				t.Errorf("%s runs %v, which Dockerfile.decider does not build into /usr/local/bin", where, c.Command)
			}
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("only %d example containers", checked)
	}
}

// TestExampleLoadgenJobRuns runs qas-loadgen with the arguments of the example Job,
// changing only what the cluster provides: the Service's address (a local example
// app) and the mounted trace (a short one, in the same gzip format).
func TestExampleLoadgenJobRuns(t *testing.T) {
	c, ok := exampleContainers(t)["Job/loadgen/loadgen"]
	if !ok {
		t.Fatal("examples/manifests has no Job loadgen")
	}
	bin := filepath.Join(binaries.Dir(t), "qas-loadgen")
	var hits atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/work" && r.URL.Query().Get("cpu") != "" {
			hits.Add(1)
		}
	}))
	defer app.Close()
	tracePath := filepath.Join(t.TempDir(), "trace.rps.gz")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte("2\n0\n3\n1\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tracePath, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range c.Args {
		switch name, _, _ := strings.Cut(a, "="); name {
		case "--target":
			a = "--target=" + app.URL
		case "--trace":
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return strings.HasPrefix(strings.TrimPrefix(a, "--trace="), m.MountPath+"/")
			}) {
				t.Fatalf("%s does not read the mounted trace", a)
			}
			a = "--trace=" + tracePath
		}
		args = append(args, a)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qas-loadgen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if hits.Load() == 0 || !strings.Contains(string(out), fmt.Sprintf("sent %d in", hits.Load())) {
		t.Fatalf("the app got %d requests; qas-loadgen said:\n%s", hits.Load(), out)
	}
}

// TestGrafanaValues: examples/grafana-values.yaml, which the walkthrough installs
// Grafana with, matches the chart's defaults for release qas in qas-system: the
// sidecar's label is the dashboards ConfigMap's, and the data source is Flux on the
// URL and bucket the decider and collector are given.
func TestGrafanaValues(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "grafana-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Sidecar struct {
			Dashboards struct {
				Enabled         bool   `json:"enabled"`
				Label           string `json:"label"`
				LabelValue      string `json:"labelValue"`
				SearchNamespace string `json:"searchNamespace"`
			} `json:"dashboards"`
		} `json:"sidecar"`
		Datasources struct {
			File struct {
				APIVersion  int `json:"apiVersion"`
				Datasources []struct {
					Type     string `json:"type"`
					Access   string `json:"access"`
					URL      string `json:"url"`
					JSONData struct {
						Version       string `json:"version"`
						DefaultBucket string `json:"defaultBucket"`
					} `json:"jsonData"`
				} `json:"datasources"`
			} `json:"datasources.yaml"`
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("grafana-values.yaml: %v", err)
	}
	h := newHelm(t)
	r := h.render(t, "template", "qas", chartDir(t), "--namespace", "qas-system")
	cm := r.find("ConfigMap", "qas-dashboards")
	if cm == nil {
		t.Fatal("no dashboards ConfigMap for release qas")
	}
	d := v.Sidecar.Dashboards
	if !d.Enabled || cm.GetLabels()[d.Label] != d.LabelValue || (d.SearchNamespace != "ALL" && d.SearchNamespace != cm.GetNamespace()) {
		t.Errorf("sidecar %+v does not load ConfigMap %s/%s with labels %v", d, cm.GetNamespace(), cm.GetName(), cm.GetLabels())
	}
	decider := container(t, convert[appsv1.Deployment](t, r.find("Deployment", "qas-decider")), "decider")
	if len(v.Datasources.File.Datasources) != 1 {
		t.Fatalf("want one data source, got %+v", v.Datasources.File)
	}
	ds := v.Datasources.File.Datasources[0]
	if ds.Type != "influxdb" || ds.Access != "proxy" || ds.JSONData.Version != "Flux" || v.Datasources.File.APIVersion != 1 {
		t.Errorf("data source %+v, want an InfluxDB data source with query language Flux", ds)
	}
	if !hasArg(decider, "--influx-url="+ds.URL) || !hasArg(decider, "--influx-bucket="+ds.JSONData.DefaultBucket) {
		t.Errorf("data source URL %s bucket %s; the chart's decider is given %v", ds.URL, ds.JSONData.DefaultBucket, decider.Args)
	}
}
