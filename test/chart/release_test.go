package chart

import (
	"context"
	"testing"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// release is the chart installed as release "rel" in a namespace of a real control
// plane, with a sweep snapshot taken before the install, so that uninstall can name
// whatever the release leaves behind.
type release struct {
	h      *helmCmd
	ns     string
	values string // the values file helm install was given
	sweep  *sweep
	before map[objectRef]bool
}

// installRelease snapshots the cluster (newSweep), then installs the chart as release
// rel in ns with `helm install --wait` and the values (YAML).
func installRelease(ctx context.Context, t *testing.T, c *kubetest.Cluster, ns, values string) *release {
	t.Helper()
	r := &release{h: newHelm(t), ns: ns, values: valuesFile(t, values), sweep: newSweep(ctx, t, c, "rel", ns)}
	var err error
	if r.before, err = r.sweep.snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	r.h.kubeconfig = c.Kubeconfig
	if out, err := r.h.run("install", "rel", chartDir(t), "--namespace", ns, "--wait", "--timeout", "3m", "-f", r.values); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// upgrade runs `helm upgrade --wait` with the install's values and further arguments
// (--set ...).
func (r *release) upgrade(t *testing.T, args ...string) {
	t.Helper()
	args = append([]string{"upgrade", "rel", chartDir(t), "--namespace", r.ns, "--wait", "--timeout", "2m", "-f", r.values}, args...)
	if out, err := r.h.run(args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// uninstall runs `helm uninstall --wait` and fails naming whatever the release left
// behind that keep does not allow (sweep.leftovers).
func (r *release) uninstall(ctx context.Context, t *testing.T, keep func(objectRef) bool) {
	t.Helper()
	if out, err := r.h.run("uninstall", "rel", "--namespace", r.ns, "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r.sweep.leftovers(ctx, t, r.before, keep)
}
