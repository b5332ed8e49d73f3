package v1alpha1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Options{}) }

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

var qaGVR = v1alpha1.GroupVersion.WithResource(v1alpha1.Resource)

// installCRD applies config/crd to the shared cluster and waits until it is served.
func installCRD(t *testing.T) dynamic.Interface {
	c := kubetest.Shared(t)
	ctx := context.Background()
	require.NoError(t, c.InstallCRD(ctx, filepath.Join(repoRoot(t), "config", "crd", "qas.dev_queueautoscalers.yaml")))
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	return dyn
}

func qa(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func validSpec() map[string]any {
	return map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    int64(2), "maxReplicas": int64(50),
		"target": map[string]any{"latency": "200ms", "percentile": 95.0},
	}
}

func TestCRDAcceptsValidAndDefaults(t *testing.T) {
	dyn := installCRD(t)
	ns := kubetest.Shared(t).Namespace(t)
	spec := validSpec()
	delete(spec, "minReplicas")
	spec["migration"] = map[string]any{"enabled": true}
	spec["burst"] = map[string]any{"rise": 5.0}
	got, err := dyn.Resource(qaGVR).Namespace(ns).Create(context.Background(), qa("ok", spec), metav1.CreateOptions{})
	require.NoError(t, err)
	var typed v1alpha1.QueueAutoscaler
	raw, _ := json.Marshal(got.Object)
	require.NoError(t, json.Unmarshal(raw, &typed))
	require.Equal(t, int32(1), typed.Spec.MinReplicas, "minReplicas defaults to 1")
	require.Equal(t, 0.1, typed.Spec.Tolerance)
	require.Equal(t, "random", typed.Spec.Routing, "routing defaults to a Service's")
	require.Empty(t, typed.Spec.Model, "the model defaults from the routing, in the decider")
	require.Equal(t, &v1alpha1.MigrationSpec{Enabled: true, NodeThreshold: 0.85, Mover: "own", Cooldown: "5m"}, typed.Spec.Migration)
	require.Equal(t, "2m", typed.Spec.MaxDataAge, "maxDataAge defaults to the engine's 2 minutes")
	require.Equal(t, &v1alpha1.BurstSpec{Rise: 5, Every: "1h"}, typed.Spec.Burst, "burst.every defaults to the engine's hour")
	ds, err := resources.Spec(typed.Spec)
	require.NoError(t, err, "what the apiserver accepts, the decider accepts")
	require.Equal(t, time.Hour, ds.Burst.Every)
}

// TestCRDAcceptsValidVariants: the CEL rules that reject bad quantities and API
// versions accept every form users write.
func TestCRDAcceptsValidVariants(t *testing.T) {
	dyn := installCRD(t)
	ns := kubetest.Shared(t).Namespace(t)
	for i, mutate := range []func(map[string]any){
		func(s map[string]any) {
			s["scaleTargetRef"] = map[string]any{"apiVersion": "v1", "kind": "ReplicationController", "name": "rc"}
		},
		func(s map[string]any) {
			s["scaleTargetRef"] = map[string]any{"apiVersion": "example.qas.dev/v1beta1", "kind": "Widget", "name": "w"}
		},
		func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "minCPU": "100m", "maxCPU": int64(2), "podOverheadCPU": int64(0)}
		},
		func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "cooldown": "1h30m"}
		},
		func(s map[string]any) { s["maxDataAge"] = "30s" },
		func(s map[string]any) { s["burst"] = map[string]any{"rise": 1.5, "every": "30m"} },
		func(s map[string]any) { s["burst"] = map[string]any{"rise": int64(100), "every": "720h"} },
		func(s map[string]any) { s["maxDataAge"] = "1h" },
		func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "minCPU": "0.25", "maxCPU": "1500m", "podOverheadCPU": "50m"}
		},
	} {
		spec := validSpec()
		mutate(spec)
		_, err := dyn.Resource(qaGVR).Namespace(ns).Create(context.Background(), qa(fmt.Sprintf("ok-%d", i), spec), metav1.CreateOptions{})
		require.NoError(t, err, "variant %d: %v", i, spec)
	}
}

func TestCRDRejectsInvalidWithClearMessages(t *testing.T) {
	dyn := installCRD(t)
	ns := kubetest.Shared(t).Namespace(t)
	tests := []struct {
		name    string
		mutate  func(map[string]any)
		wantMsg string
	}{
		{"min above max", func(s map[string]any) { s["minReplicas"] = int64(60) }, "minReplicas must not exceed maxReplicas"},
		{"max zero", func(s map[string]any) { s["maxReplicas"] = int64(0) }, "spec.maxReplicas: Invalid value: 0: spec.maxReplicas in body should be greater than or equal to 1"},
		{"percentile 100", func(s map[string]any) { s["target"].(map[string]any)["percentile"] = 100.0 }, "target.percentile must be greater than 0 and less than 100"},
		{"percentile 0", func(s map[string]any) { s["target"].(map[string]any)["percentile"] = 0.0 }, "target.percentile must be greater than 0 and less than 100"},
		{"zero latency", func(s map[string]any) { s["target"].(map[string]any)["latency"] = "0s" }, "target.latency must be a positive duration"},
		{"latency not a duration", func(s map[string]any) { s["target"].(map[string]any)["latency"] = "fast" }, "spec.target.latency: Invalid value: \"fast\""},
		{"missing target", func(s map[string]any) { delete(s, "target") }, "spec.target: Required value"},
		{"vertical min above max", func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "minCPU": "2", "maxCPU": "500m"}
		}, "vertical.minCPU must not exceed vertical.maxCPU"},
		{"node threshold above 1", func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "nodeThreshold": 1.5}
		}, "migration.nodeThreshold must be in (0, 1]"},
		{"unknown mover", func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "mover": "anyone"}
		}, `spec.migration.mover: Unsupported value: "anyone"`},
		{"max data age too short", func(s map[string]any) { s["maxDataAge"] = "1s" }, "maxDataAge must be between 5s and 1h"},
		{"max data age too long", func(s map[string]any) { s["maxDataAge"] = "2h" }, "maxDataAge must be between 5s and 1h"},
		{"max data age not a duration", func(s map[string]any) { s["maxDataAge"] = "stale" }, `spec.maxDataAge: Invalid value: "stale"`},
		{"cooldown too short", func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "cooldown": "10s"}
		}, "migration.cooldown must be between 1m and 24h"},
		{"cooldown too long", func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "cooldown": "25h"}
		}, "migration.cooldown must be between 1m and 24h"},
		{"cooldown not a duration", func(s map[string]any) {
			s["migration"] = map[string]any{"enabled": true, "cooldown": "soon"}
		}, `spec.migration.cooldown: Invalid value: "soon"`},
		{"negative minCPU", func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "minCPU": "-100m", "maxCPU": "2"}
		}, "vertical.minCPU must be a positive CPU quantity"},
		{"zero maxCPU", func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "maxCPU": int64(0)}
		}, "vertical.maxCPU must be a positive CPU quantity"},
		{"negative maxCPU", func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "maxCPU": "-2"}
		}, "vertical.maxCPU must be a positive CPU quantity"},
		{"negative podOverheadCPU", func(s map[string]any) {
			s["vertical"] = map[string]any{"enabled": true, "podOverheadCPU": "-1"}
		}, "vertical.podOverheadCPU must not be negative"},
		{"malformed apiVersion", func(s map[string]any) {
			s["scaleTargetRef"].(map[string]any)["apiVersion"] = "apps/v1/extra"
		}, "scaleTargetRef.apiVersion must be group/version (e.g. apps/v1) or a core version (v1)"},
		{"apiVersion with spaces", func(s map[string]any) {
			s["scaleTargetRef"].(map[string]any)["apiVersion"] = "Apps / V1"
		}, "scaleTargetRef.apiVersion must be group/version (e.g. apps/v1) or a core version (v1)"},
		{"apiVersion without version", func(s map[string]any) {
			s["scaleTargetRef"].(map[string]any)["apiVersion"] = "apps/"
		}, "scaleTargetRef.apiVersion must be group/version (e.g. apps/v1) or a core version (v1)"},
		{"no rise", func(s map[string]any) { s["burst"] = map[string]any{"rise": 1.0} }, "spec.burst.rise: Invalid value: 1: spec.burst.rise in body should be greater than 1"},
		{"rise above 100", func(s map[string]any) { s["burst"] = map[string]any{"rise": 101.0} }, "spec.burst.rise in body should be less than or equal to 100"},
		{"rise missing", func(s map[string]any) { s["burst"] = map[string]any{"every": "1h"} }, "spec.burst.rise: Required value"},
		{"burst too often", func(s map[string]any) { s["burst"] = map[string]any{"rise": 3.0, "every": "30s"} }, "burst.every must be between 1m and 720h"},
		{"burst not a duration", func(s map[string]any) { s["burst"] = map[string]any{"rise": 3.0, "every": "monthly"} }, `spec.burst.every: Invalid value: "monthly"`},
		{"burst with a mean target", func(s map[string]any) {
			delete(s["target"].(map[string]any), "percentile")
			s["burst"] = map[string]any{"rise": 3.0}
		}, "burst needs target.percentile"},
		{"bad policy", func(s map[string]any) {
			s["behavior"] = map[string]any{"scaleUp": map[string]any{"policies": []any{map[string]any{"type": "Pods", "value": int64(0), "periodSeconds": int64(15)}}}}
		}, "spec.behavior.scaleUp.policies[0].value"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := validSpec()
			tt.mutate(spec)
			_, err := dyn.Resource(qaGVR).Namespace(ns).Create(context.Background(), qa("bad-"+string(rune('a'+i)), spec), metav1.CreateOptions{})
			require.Error(t, err)
			require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			require.Contains(t, err.Error(), tt.wantMsg)
		})
	}
}

func TestCRDPrinterColumnsAndStatus(t *testing.T) {
	dyn := installCRD(t)
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	created, err := dyn.Resource(qaGVR).Namespace(ns).Create(ctx, qa("cols", validSpec()), metav1.CreateOptions{})
	require.NoError(t, err)

	// Status is a subresource: the main endpoint ignores it, /status sets it.
	require.NoError(t, unstructured.SetNestedField(created.Object, "Deployment/web", "status", "reference"))
	require.NoError(t, unstructured.SetNestedField(created.Object, "p95<200ms", "status", "targetSummary"))
	require.NoError(t, unstructured.SetNestedField(created.Object, "180ms", "status", "measuredLatency"))
	require.NoError(t, unstructured.SetNestedField(created.Object, int64(3), "status", "currentReplicas"))
	_, err = dyn.Resource(qaGVR).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)

	// What kubectl get asks for: a server-side Table.
	body, err := c.Clientset().Discovery().RESTClient().Get().
		AbsPath("/apis/qas.dev/v1alpha1/namespaces", ns, "queueautoscalers").
		SetHeader("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1").DoRaw(ctx)
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(body, &table))
	require.Len(t, table.Rows, 1)
	var names []string
	cells := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		cells[col.Name] = table.Rows[0].Cells[i]
		if col.Priority == 0 {
			names = append(names, col.Name)
		}
	}
	// The default view reads like kubectl get hpa; -o wide adds Modelled and Action.
	require.Equal(t, []string{"Name", "Reference", "Target", "Latency", "MinPods", "MaxPods", "Replicas", "Age"}, names)
	require.Equal(t, map[string]any{
		"Name": "cols", "Reference": "Deployment/web", "Target": "p95<200ms", "Latency": "180ms",
		"Modelled": nil, "MinPods": float64(2), "MaxPods": float64(50), "Replicas": float64(3), "Action": nil,
	}, withoutAge(cells))
}

// TestGeneratedFilesUpToDate runs hack/generate.sh (what `make generate` runs) on a
// scratch copy of the repository and compares every file with the checked-in one, so
// the test and the script cannot drift: run `make generate` after changing the types
// or config/rbac.
func TestGeneratedFilesUpToDate(t *testing.T) {
	testenv.Tool(t, "QAS_CONTROLLER_GEN") // the script uses the binary env.sh provides
	root := repoRoot(t)
	tmp := t.TempDir()
	require.NoError(t, copyTree(root, tmp))
	cmd := exec.Command("bash", filepath.Join(root, "hack", "generate.sh"), tmp)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/generate.sh: %s", out)
	var stale []string
	require.NoError(t, filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tmp, path)
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil || !bytes.Equal(want, got) {
			stale = append(stale, rel)
		}
		return nil
	}))
	require.Empty(t, stale, "out of date: run make generate")
}

// copyTree copies the repository's files (not .git, bin or other build output) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() || rel == ".git" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
}

func withoutAge(cells map[string]any) map[string]any {
	delete(cells, "Age")
	return cells
}
