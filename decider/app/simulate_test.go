package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runSim(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := MainEnv(append([]string{"simulate"}, args...), Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestSimulateJSONShape(t *testing.T) {
	dir := t.TempDir()
	js, html := filepath.Join(dir, "o.json"), filepath.Join(dir, "o.html")
	code, out, stderr := runSim(t, "--trace", "pattern:flash-crowd", "--compress", "4", "--slo", "200ms",
		"--service", "exp:50ms", "--init", "20s", "--policies", "qas,hpa,kpa,oracle,static:2", "--json", js, "--report", html)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr, "quiet when not on a terminal")
	require.Contains(t, out, "compression 4 trace s per simulated s")
	for _, p := range []string{"qas", "hpa", "kpa", "oracle", "static:2"} {
		require.Contains(t, out, "\n"+p+" ")
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	for _, k := range []string{"trace", "window", "scale", "compression", "seed", "discipline", "policies"} {
		require.Contains(t, doc, k)
	}
	pols := doc["policies"].([]any)
	require.Len(t, pols, 5)
	for _, p := range pols {
		m := p.(map[string]any)
		for _, k := range []string{"name", "requests", "requests_over_target_pct", "minutes_over_target_pct", "pod_seconds",
			"cpu_core_seconds", "actions", "latency_seconds", "spec", "spec_requested_vs_running"} {
			require.Contains(t, m, k)
		}
		require.Positive(t, m["requests"].(float64))
		for _, k := range []string{"p50", "p95", "p99"} {
			require.Contains(t, m["latency_seconds"].(map[string]any), k)
		}
		for _, k := range []string{"theta_u", "theta_o", "tau_u", "tau_o", "instability", "jitter"} {
			require.Contains(t, m["spec"].(map[string]any), k)
		}
	}
	h, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Equal(t, 5, strings.Count(string(h), "<svg"))
	oracle := doc["oracle"].(map[string]any)
	for _, k := range []string{"routing", "window_seconds", "headroom", "budget_pct", "met", "runs", "candidates"} {
		require.Contains(t, oracle, k)
	}
	require.Contains(t, out, "oracle: the cheapest of")
	require.NotContains(t, doc, "seed000", "only with predictive-hpa and hpa-cooldown")
}

// TestSimulatePolicyList: spaces around names are ignored; a name given twice
// or an empty one is an error naming the flag.
func TestSimulatePolicyList(t *testing.T) {
	js := filepath.Join(t.TempDir(), "o.json")
	code, out, stderr := runSim(t, "--trace", "pattern:flash-crowd", "--compress", "8", "--slo", "1s", "--service", "exp:250ms",
		"--init", "135s", "--policies", " predictive-hpa , hpa-cooldown,static:3 ", "--json", js)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "seed 000 statistic (predictive-hpa − hpa-cooldown")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Contains(t, doc, "seed000")
	require.NotContains(t, doc, "oracle")
	names := []string{}
	for _, p := range doc["policies"].([]any) {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"predictive-hpa", "hpa-cooldown", "static:3"}, names)
	for _, tc := range []struct{ policies, contains string }{
		{policies: "qas, qas", contains: `"qas" is listed twice`},
		{policies: "qas,,hpa", contains: "empty name"},
		{policies: "qas,magic", contains: "unknown policy"},
	} {
		code, _, stderr := runSim(t, "--trace", "pattern:flash-crowd", "--slo", "200ms", "--policies", tc.policies)
		require.Equal(t, 2, code, tc.policies)
		require.Contains(t, stderr, "--policies")
		require.Contains(t, stderr, tc.contains)
	}
}

func TestSimulateBadFlags(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.rps")
	require.NoError(t, os.WriteFile(bad, []byte("1\n2\nthree\n"), 0o644))
	for _, tc := range []struct {
		args     []string
		code     int
		contains string
	}{
		{args: []string{"--slo", "200ms"}, code: 2, contains: "--trace"},
		{args: []string{"--trace", "pattern:flash-crowd"}, code: 2, contains: "--slo"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--percentile", "100"}, code: 2, contains: "--percentile"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--window", "8h:2h"}, code: 2, contains: "--window"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--service", "lognormal:50ms"}, code: 2, contains: "--service"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--init", "soon"}, code: 2, contains: "--init"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--policies", "qas,magic"}, code: 2, contains: "--policies"},
		{args: []string{"--trace", "pattern:nope", "--slo", "200ms"}, code: 2, contains: "--trace"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--compress", "0"}, code: 2, contains: "--compress"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--scale", "-1"}, code: 2, contains: "--scale"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--vertical"}, code: 2, contains: "--vertical"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--cpu-bound", "2"}, code: 2, contains: "--cpu-bound"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--theta", "1"}, code: 2, contains: "--theta"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--nodes", "2", "--background", "1,2,3"}, code: 2, contains: "--background"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--nodes", "2", "--background", "-1"}, code: 2, contains: "--background"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--migration"}, code: 2, contains: "--migration"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--sharing"}, code: 2, contains: "--concurrency"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--alg1-period", "0s"}, code: 2, contains: "--alg1-period"},
		{args: []string{"--trace", bad, "--slo", "200ms"}, code: 1, contains: "line 3"},
		{args: []string{"--trace", filepath.Join(t.TempDir(), "missing"), "--slo", "200ms"}, code: 1, contains: "no such file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runSim(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.contains)
		})
	}
}
