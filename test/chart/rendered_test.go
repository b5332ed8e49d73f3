package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// outsideCluster is what a chart container gets from the cluster that a process on
// the test machine must be given instead.
type outsideCluster struct {
	Kubeconfig string // the ServiceAccount's credentials (in a pod: the mounted token)
	// InfluxURL replaces the in-cluster InfluxDB Service's URL the chart renders.
	InfluxURL string
	// PodName is what the downward API's metadata.name gives.
	PodName string
}

// renderedCommand returns the binary, arguments and environment the installed chart
// gives container in Deployment name (from its manifest, as `helm get manifest`
// prints it), changing only what exists only inside a cluster: the in-cluster
// InfluxDB URL, listen addresses (on free loopback ports instead), the downward API,
// Secrets (read from the cluster), and a --kubeconfig for the in-cluster credentials.
// Anything else it cannot reproduce fails the test, so the process runs the chart's
// real configuration.
func renderedCommand(ctx context.Context, t *testing.T, c *kubetest.Cluster, manifest []*unstructured.Unstructured, deployment, container string, out outsideCluster) (bin string, args, env []string) {
	t.Helper()
	var d *appsv1.Deployment
	for _, o := range manifest {
		if o.GetKind() == "Deployment" && o.GetName() == deployment {
			d = convert[appsv1.Deployment](t, o)
		}
	}
	if d == nil {
		t.Fatalf("the release has no Deployment %s", deployment)
	}
	ns := d.Namespace
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name != container {
			continue
		}
		if len(ct.Command) != 1 {
			t.Fatalf("%s/%s: command %v, want one binary", deployment, container, ct.Command)
		}
		bin = filepath.Join(buildBinaries(t), filepath.Base(ct.Command[0]))
		inClusterInflux := fmt.Sprintf("http://rel-qas-influxdb.%s.svc:8086", ns)
		for _, a := range ct.Args {
			name, value, _ := strings.Cut(a, "=")
			switch name {
			case "--influx-url":
				if value != inClusterInflux {
					t.Fatalf("%s/%s: --influx-url=%s, want the in-cluster Service %s", deployment, container, value, inClusterInflux)
				}
				a = "--influx-url=" + out.InfluxURL
			case "--metrics-listen", "--listen":
				if !strings.HasPrefix(value, ":") {
					t.Fatalf("%s/%s: %s, want all interfaces (:port) in a pod", deployment, container, a)
				}
				a = fmt.Sprintf("%s=127.0.0.1:%d", name, testenv.FreePort(t))
			case "--kubeconfig":
				t.Fatalf("%s/%s: the chart passes %s; a pod uses its ServiceAccount", deployment, container, a)
			}
			args = append(args, a)
		}
		args = append(args, "--kubeconfig="+out.Kubeconfig)
		for _, e := range ct.Env {
			switch {
			case e.ValueFrom == nil:
				env = append(env, e.Name+"="+e.Value)
			case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env = append(env, e.Name+"="+out.PodName)
			case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
				env = append(env, e.Name+"="+ns)
			case e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				sec, err := c.Clientset().CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("%s/%s: env %s from Secret %s: %v", deployment, container, e.Name, ref.Name, err)
				}
				env = append(env, e.Name+"="+string(sec.Data[ref.Key]))
			default:
				t.Fatalf("%s/%s: env %s = %+v cannot be reproduced outside a cluster", deployment, container, e.Name, e.ValueFrom)
			}
		}
		return bin, args, env
	}
	t.Fatalf("Deployment %s has no container %s", deployment, container)
	return "", nil, nil
}
