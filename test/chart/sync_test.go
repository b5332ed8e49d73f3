package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	collectorapp "github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/testenv"
)

// TestChartCopiesInSync: the chart holds byte-for-byte copies of the CRD and the
// decider's ClusterRole that `make generate` refreshes (Helm reads only files inside
// the chart), so a regenerated CRD or changed role that was not copied fails here.
func TestChartCopiesInSync(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct{ src, copy string }{
		{"config/crd/qas.dev_queueautoscalers.yaml", "charts/qas/crds/qas.dev_queueautoscalers.yaml"},
		{"config/rbac/decider-clusterrole.yaml", "charts/qas/files/decider-clusterrole.yaml"},
		{"config/rbac/decider-leader-election-role.yaml", "charts/qas/files/decider-leader-election-role.yaml"},
	} {
		t.Run(tc.copy, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(root, tc.src))
			if err != nil {
				t.Fatal(err)
			}
			cp, err := os.ReadFile(filepath.Join(root, tc.copy))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(src, cp) {
				t.Fatalf("%s differs from %s: run make generate (or cp %s %s)", tc.copy, tc.src, tc.src, tc.copy)
			}
		})
	}
}

// TestDeciderRulesMatchConfig: the chart's decider ClusterRole grants exactly the
// rules of config/rbac/decider-clusterrole.yaml, and its leader-election Role, in the
// release namespace and bound to the decider's ServiceAccount, those of
// config/rbac/decider-leader-election-role.yaml with the release's Lease as the
// resource name (decider/e2e records what the decider calls against these files).
func TestDeciderRulesMatchConfig(t *testing.T) {
	var want rbacv1.ClusterRole
	readStrict(t, filepath.Join(repoRoot(t), "config", "rbac", "decider-clusterrole.yaml"), &want)
	var wantRole rbacv1.Role
	readStrict(t, filepath.Join(repoRoot(t), "config", "rbac", "decider-leader-election-role.yaml"), &wantRole)
	named := 0
	for i := range wantRole.Rules {
		if len(wantRole.Rules[i].ResourceNames) > 0 {
			wantRole.Rules[i].ResourceNames = []string{"my-lease"}
			named++
		}
	}
	if named == 0 {
		t.Fatal("config/rbac's leader-election Role names no Lease")
	}
	r := newHelm(t).template(t, "decider: {leaderElection: {id: my-lease}}")
	got := convert[rbacv1.ClusterRole](t, r.find("ClusterRole", "rel-qas-decider"))
	if !reflect.DeepEqual(got.Rules, want.Rules) {
		t.Fatalf("chart rules:\n%+v\nconfig/rbac rules:\n%+v", got.Rules, want.Rules)
	}
	role := convert[rbacv1.Role](t, r.find("Role", "rel-qas-decider-leader-election"))
	if role.Namespace != "qas-system" || !reflect.DeepEqual(role.Rules, wantRole.Rules) {
		t.Fatalf("chart Role in %q:\n%+v\nwant (config/rbac with the release's Lease):\n%+v", role.Namespace, role.Rules, wantRole.Rules)
	}
	rb := convert[rbacv1.RoleBinding](t, r.find("RoleBinding", "rel-qas-decider-leader-election"))
	if rb.Namespace != "qas-system" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Name != "rel-qas-decider" || rb.Subjects[0].Namespace != "qas-system" {
		t.Fatalf("leader-election RoleBinding: %+v", rb)
	}
	d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-election-id=my-lease") {
		t.Fatalf("the decider does not elect on the Lease the Role names: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
}

func readStrict(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestChartVersionsAgree: the images' default tags are the chart's appVersion.
func TestChartVersionsAgree(t *testing.T) {
	var chart struct {
		AppVersion string `json:"appVersion"`
		Version    string `json:"version"`
	}
	var values struct {
		Image   struct{ Tag string } `json:"image"`
		Webhook struct {
			Proxy struct {
				Image struct{ Tag string } `json:"image"`
			} `json:"proxy"`
		} `json:"webhook"`
	}
	for file, v := range map[string]any{"Chart.yaml": &chart, "values.yaml": &values} {
		raw, err := os.ReadFile(filepath.Join(chartDir(t), file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if chart.AppVersion == "" || values.Image.Tag != chart.AppVersion || values.Webhook.Proxy.Image.Tag != chart.AppVersion {
		t.Fatalf("appVersion %q, image.tag %q, webhook.proxy.image.tag %q: they must agree",
			chart.AppVersion, values.Image.Tag, values.Webhook.Proxy.Image.Tag)
	}
}

// binaries are qas-decider, qas-collector and qas-loadgen, built once per test run.
var binaries = &testenv.Commands{Packages: []string{
	"github.com/qas-dev/qas/decider/cmd/qas-decider",
	"github.com/qas-dev/qas/collector/cmd/qas-collector",
	"github.com/qas-dev/qas/examples/loadgen/cmd/qas-loadgen",
}}

// TestChartFlagsExist runs each binary with exactly the arguments the chart gives it
// (and the flags its environment overrides stand for), followed by --help: Go's flag
// parser stops at the first undefined flag or bad value with status 2 and an error;
// only if every flag exists and parses does it reach --help and exit 0.
func TestChartFlagsExist(t *testing.T) {
	bin := binaries.Dir(t)
	h := newHelm(t)
	variants := map[string]string{
		"defaults": "",
		"external+cert-manager": `
influxdb: {mode: external, org: my-org, external: {url: "http://influx:8086", tokenSecret: {name: s, key: k}}}
webhook: {certManager: {enabled: true}}
decider: {dryRun: true}`,
		"no leader election":   `decider: {replicas: 1, leaderElection: {enabled: false}}`,
		"sidecar pull secrets": `webhook: {proxy: {imagePullSecrets: [{name: regcred}], resources: {limits: {cpu: "2"}}}}`,
	}
	for name, values := range variants {
		t.Run(name, func(t *testing.T) {
			r := h.template(t, values)
			checked := 0
			for _, o := range r.objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				for _, c := range convert[appsv1.Deployment](t, o).Spec.Template.Spec.Containers {
					if len(c.Command) != 1 {
						t.Errorf("%s/%s: command %v, want one binary", o.GetName(), c.Name, c.Command)
						continue
					}
					exe := filepath.Join(bin, filepath.Base(c.Command[0]))
					args := append([]string{}, c.Args...)
					prefix := envPrefix(c.Command[0], c.Args)
					for _, e := range c.Env {
						if flag, ok := strings.CutPrefix(e.Name, prefix+"_"); ok {
							args = append(args, "--"+strings.ToLower(strings.ReplaceAll(flag, "_", "-"))+"=x")
						}
					}
					cmd := exec.Command(exe, append(args, "--help")...)
					cmd.Env = []string{"HOME=" + t.TempDir()}
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("%s/%s: %s %s: %v\n%s", o.GetName(), c.Name, filepath.Base(exe), strings.Join(args, " "), err, out)
					}
					// And each flag is documented in the (sub)command's --help.
					documented := map[string]bool{}
					for _, m := range reHelpFlag.FindAllStringSubmatch(string(out), -1) {
						documented[m[1]] = true
					}
					for _, a := range args {
						name, ok := strings.CutPrefix(a, "--")
						if !ok {
							continue
						}
						name, _, _ = strings.Cut(name, "=")
						if !documented[name] {
							t.Errorf("%s/%s: flag --%s is not in %s's --help", o.GetName(), c.Name, name, filepath.Base(exe))
						}
					}
					checked++
				}
			}
			if checked < 2 {
				t.Fatalf("only %d containers checked", checked)
			}
		})
	}
}

// reHelpFlag matches a flag in Go's flag.PrintDefaults output ("  -name type").
var reHelpFlag = regexp.MustCompile(`(?m)^\s+-([a-z0-9][a-z0-9-]*)\b`)

// envPrefix is the environment prefix of a command (internal/cli): QAS_COLLECTOR for
// qas-collector, QAS_DECIDER for `qas-decider run`, QAS_WEBHOOK for `qas-decider webhook`.
func envPrefix(command string, args []string) string {
	switch {
	case strings.HasSuffix(command, "qas-collector"):
		return collectorapp.EnvPrefix
	case len(args) > 0 && args[0] == "webhook":
		return inject.EnvPrefix
	default:
		return runner.EnvPrefix
	}
}
