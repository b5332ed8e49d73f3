package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Full()) }

// repoRoot is the repository's top directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "qas") }

// helmCmd runs the real helm ($QAS_HELM) offline: its cache, config and data live in
// a temporary directory, so nothing is fetched or read from the user's setup.
type helmCmd struct {
	bin        string
	home       string
	kubeconfig string
}

func newHelm(t testing.TB) *helmCmd {
	t.Helper()
	bin := testenv.Tool(t, "QAS_HELM")
	return &helmCmd{bin: bin, home: t.TempDir()}
}

// run returns helm's stdout, and an error carrying its stderr when it fails.
func (h *helmCmd) run(args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
		"HELM_NO_PLUGINS=1",
	)
	if h.kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+h.kubeconfig)
	} else {
		// Rendering must not depend on a cluster.
		cmd.Env = append(cmd.Env, "KUBECONFIG="+filepath.Join(h.home, "no-cluster"))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{args: args, err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	args   []string
	err    error
	stderr string
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.stderr
}

// valuesFile writes a values file for helm's -f (which splits its argument at
// commas, so the path must not contain the test's name).
func valuesFile(t testing.TB, yaml string) string {
	t.Helper()
	f, err := os.CreateTemp("", "qas-values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString(yaml); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// rendered is the output of helm template, parsed.
type rendered struct {
	objs []*unstructured.Unstructured
}

func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) kinds() map[string]int {
	m := map[string]int{}
	for _, o := range r.objs {
		m[o.GetKind()]++
	}
	return m
}

// template renders the chart as release "rel" in namespace "qas-system" with the
// given values (YAML; empty = defaults).
func (h *helmCmd) template(t testing.TB, values string, extra ...string) rendered {
	t.Helper()
	args := []string{"template", "rel", chartDir(t), "--namespace", "qas-system", "--include-crds"}
	if values != "" {
		args = append(args, "-f", valuesFile(t, values))
	}
	return h.render(t, append(args, extra...)...)
}

// render runs helm with args (a command printing manifests: template, get manifest)
// and parses its output; either failing fails the test.
func (h *helmCmd) render(t testing.TB, args ...string) rendered {
	t.Helper()
	out, err := h.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatalf("parse helm %s output: %v", args[0], err)
	}
	return rendered{objs: objs}
}

// parseManifests splits a multi-document YAML stream into objects.
func parseManifests(s string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
