package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	collectorapp "github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
	proxyapp "github.com/qas-dev/qas/proxy/app"
	"github.com/qas-dev/qas/proxy/sidecar"
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
// real configuration. The container's flags must first pass checkContainer.
func renderedCommand(ctx context.Context, t *testing.T, c *kubetest.Cluster, manifest rendered, deployment, container string, out outsideCluster) (bin string, args, env []string) {
	t.Helper()
	o := manifest.find("Deployment", deployment)
	if o == nil {
		t.Fatalf("the release has no Deployment %s", deployment)
	}
	d := convert[appsv1.Deployment](t, o)
	ns := d.Namespace
	for _, ct := range d.Spec.Template.Spec.Containers {
		if ct.Name != container {
			continue
		}
		if len(ct.Command) != 1 {
			t.Fatalf("%s/%s: command %v, want one binary", deployment, container, ct.Command)
		}
		// The binary's own flag validation first: a failure here is what the pod
		// would crash-loop with.
		if err := checkContainer(ct, ns, &binaryFlags{}); err != nil {
			t.Fatalf("%s/%s: %v", deployment, container, err)
		}
		bin = filepath.Join(binaries.Dir(t), filepath.Base(ct.Command[0]))
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

// binaryFlags is what the binaries make of a render's containers: each command line
// and environment parsed and validated by the binary's own code.
type binaryFlags struct {
	Decider   *runner.Options
	Collector *collectorapp.Flags
	Webhook   *inject.Options
	// Injected is the webhook's sidecar configuration; Sidecar is the container it
	// injects into a pod serving on port "http" 8080, and SidecarFlags that
	// container's arguments as qas-proxy parses them.
	Injected     *inject.Config
	Sidecar      *corev1.Container
	SidecarFlags *proxyapp.Flags
}

// checkContainer does with a chart container's command line and environment what its
// binary does before it starts anything: the binary's own Parse and validation
// (Complete/Validate, the logger's options), returning the first error, which is the
// one the binary would exit with. ns is the pod's namespace (the downward API's);
// Secrets give a placeholder token. For `qas-decider webhook` it also takes the
// sidecar the webhook would inject and parses that container's arguments as
// qas-proxy does. Every container, the sidecar included, must also pass the
// apiserver's rule that a request not exceed its limit. Results go into into.
func checkContainer(ct corev1.Container, ns string, into *binaryFlags) error {
	if err := requestsWithinLimits(ct.Resources); err != nil {
		return fmt.Errorf("container %s: %w", ct.Name, err)
	}
	if len(ct.Command) != 1 {
		return fmt.Errorf("container %s: command %v, want one binary", ct.Name, ct.Command)
	}
	env := map[string]string{}
	for _, e := range ct.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = ct.Name + "-0"
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = ns
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "token-from-" + e.ValueFrom.SecretKeyRef.Name
		default:
			return fmt.Errorf("container %s: env %s = %+v has no stand-in", ct.Name, e.Name, e.ValueFrom)
		}
	}
	getenv := func(k string) string { return env[k] }
	args := ct.Args
	switch bin := filepath.Base(ct.Command[0]); {
	case bin == "qas-collector":
		f, err := collectorapp.Parse(args, getenv)
		if err != nil {
			return err
		}
		if _, err := f.Log.Build(); err != nil {
			return err
		}
		into.Collector = &f
	case bin == "qas-decider" && len(args) > 0 && args[0] == "run":
		var o runner.Options
		if err := cli.Parse(o.FlagSet(), runner.EnvPrefix, args[1:], getenv); err != nil {
			return err
		}
		if err := o.Complete(getenv, func() (string, error) { return "host", nil }); err != nil {
			return err
		}
		if _, err := o.Log.Build(); err != nil {
			return err
		}
		into.Decider = &o
	case bin == "qas-decider" && len(args) > 0 && args[0] == "webhook":
		var o inject.Options
		if err := cli.Parse(o.FlagSet(), inject.EnvPrefix, args[1:], getenv); err != nil {
			return err
		}
		cfg, err := o.Config()
		if err != nil {
			return err
		}
		if _, err := o.Log.Build(); err != nil {
			return err
		}
		into.Webhook, into.Injected = &o, &cfg
		return checkSidecar(cfg, into)
	default:
		return fmt.Errorf("container %s: no parser for %s %v", ct.Name, bin, args)
	}
	return nil
}

// checkSidecar injects cfg's sidecar into a pod that opted in and parses the
// sidecar's arguments as qas-proxy does.
func checkSidecar(cfg inject.Config, into *binaryFlags) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps", Labels: map[string]string{sidecar.InjectLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
	res, err := cfg.Mutate(pod)
	if err != nil {
		return err
	}
	if res.Skip != "" {
		return fmt.Errorf("webhook did not inject: %s", res.Skip)
	}
	for _, op := range res.Patch {
		containers, ok := op.Value.([]corev1.Container)
		if op.Path != "/spec/containers" || !ok {
			continue
		}
		for i := range containers {
			if containers[i].Name != sidecar.ContainerName {
				continue
			}
			sc := containers[i]
			into.Sidecar = &sc
			if err := requestsWithinLimits(sc.Resources); err != nil {
				return fmt.Errorf("injected sidecar: %w", err)
			}
			f, err := proxyapp.Parse(sc.Args, func(string) string { return "" })
			if err != nil {
				return fmt.Errorf("injected sidecar %v: %w", sc.Args, err)
			}
			if _, err := f.Log.Build(); err != nil {
				return fmt.Errorf("injected sidecar: %w", err)
			}
			into.SidecarFlags = &f
			return nil
		}
	}
	return fmt.Errorf("webhook patch %+v has no %s container", res.Patch, sidecar.ContainerName)
}

// requestsWithinLimits is the apiserver's rule for a container's resources: a
// request may not exceed the limit of the same resource.
func requestsWithinLimits(r corev1.ResourceRequirements) error {
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			return fmt.Errorf("requests.%s %s exceeds limits.%s %s", name, req.String(), name, lim.String())
		}
	}
	return nil
}

// checkRendered runs checkContainer on every container of every Deployment in r.
func checkRendered(t *testing.T, r rendered) binaryFlags {
	t.Helper()
	var got binaryFlags
	n := 0
	for _, o := range r.objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := convert[appsv1.Deployment](t, o)
		for _, ct := range d.Spec.Template.Spec.Containers {
			if err := checkContainer(ct, d.Namespace, &got); err != nil {
				t.Errorf("Deployment %s: %v\nargs: %q", d.Name, err, ct.Args)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no Deployment rendered")
	}
	return got
}
