package app

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	// Compression scales every time constant: simulated as the same system in trace time.
	require.Contains(t, out, "compression 4× with init times, periods and windows scaled with it")
	require.Contains(t, out, "conditions: ")
	require.Contains(t, out, "service exp:200ms, target 800ms")
	for _, p := range []string{"qas", "hpa", "kpa", "oracle", "static:2"} {
		require.Contains(t, out, "\n"+p+" ")
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, "scaled", doc["compression_mode"])
	require.Equal(t, "random", doc["routing"])
	require.Equal(t, "counts", doc["scaling"])
	for _, k := range []string{"trace", "window", "scale", "compression", "seed", "discipline", "policies", "conditions"} {
		require.Contains(t, doc, k)
	}
	pols := doc["policies"].([]any)
	require.Len(t, pols, 5)
	for _, p := range pols {
		m := p.(map[string]any)
		for _, k := range []string{"name", "requests", "requests_over_target_pct", "minutes_over_target_pct", "late_per_minute", "pod_seconds",
			"cpu_core_seconds", "actions", "latency_seconds", "spec", "spec_requested_vs_running"} {
			require.Contains(t, m, k)
		}
		require.Positive(t, m["requests"].(float64))
		late := 0.0
		for _, n := range m["late_per_minute"].([]any) {
			late += n.(float64)
		}
		require.LessOrEqual(t, late, m["requests"].(float64)*m["requests_over_target_pct"].(float64)/100+0.5,
			"the late requests by minute are among the run's late requests")
		for _, k := range []string{"p50", "p95", "p99"} {
			require.Contains(t, m["latency_seconds"].(map[string]any), k)
		}
		for _, k := range []string{"theta_u", "theta_o", "tau_u", "tau_o", "instability", "jitter"} {
			require.Contains(t, m["spec"].(map[string]any), k)
		}
	}
	h, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Equal(t, 2+2*5+1, strings.Count(string(h), "<svg"), "rate, actions, a pods and a latency chart per policy, the summary")
	oracles := doc["oracles"].([]any)
	require.Len(t, oracles, 1)
	oracle := oracles[0].(map[string]any)
	for _, k := range []string{"policy", "routing", "window_seconds", "headroom", "budget_pct", "met", "runs", "candidates"} {
		require.Contains(t, oracle, k)
	}
	require.Equal(t, "oracle", oracle["policy"])
	require.Equal(t, "random", oracle["routing"], "the oracle is routed as qas and the HPA are")
	for _, c := range oracle["candidates"].([]any) {
		require.Equal(t, "random", c.(map[string]any)["routing"], "the oracle searches the run's data plane only")
	}
	for _, p := range pols {
		m := p.(map[string]any)
		want := "random"
		if m["name"] == "kpa" {
			want = "pooled while the activator is in the path, else random"
		}
		require.Equal(t, want, m["routing"], "%s's data plane", m["name"])
	}
	require.Contains(t, out, "oracle: clairvoyant, the cheapest of 36 simulated schedules that meets the SLO, routed random: ")
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
	require.NotContains(t, doc, "oracles")
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

// TestSimulateBothOracles: oracle-pooled is selectable beside oracle; the
// JSON and the output say which routing each used, and oracle-pooled, which
// may also use the activator, costs no more than oracle.
func TestSimulateBothOracles(t *testing.T) {
	js := filepath.Join(t.TempDir(), "o.json")
	code, out, stderr := runSim(t, "--trace", "pattern:flash-crowd", "--compress", "4", "--slo", "200ms",
		"--service", "exp:50ms", "--init", "20s", "--policies", "oracle-pooled,oracle", "--json", js)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc struct {
		Policies []struct {
			Name           string  `json:"name"`
			Routing        string  `json:"routing"`
			CPUCoreSeconds float64 `json:"cpu_core_seconds"`
		} `json:"policies"`
		Oracles []struct {
			Policy     string `json:"policy"`
			Routing    string `json:"routing"`
			Met        bool   `json:"met"`
			Runs       int    `json:"runs"`
			Candidates []struct {
				Routing string `json:"routing"`
			} `json:"candidates"`
		} `json:"oracles"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Policies, 2)
	require.Len(t, doc.Oracles, 2)
	for i, want := range []struct {
		name     string
		runs     int
		routings []string
	}{
		{name: "oracle-pooled", runs: 72, routings: []string{"random", "pooled"}},
		{name: "oracle", runs: 36, routings: []string{"random"}},
	} {
		o, p := doc.Oracles[i], doc.Policies[i]
		require.Equal(t, want.name, o.Policy)
		require.Equal(t, want.name, p.Name)
		require.Equal(t, o.Routing, p.Routing, "the policy's row says the routing its search chose")
		require.True(t, o.Met)
		require.Equal(t, want.runs, o.Runs)
		seen := map[string]bool{}
		for _, c := range o.Candidates {
			seen[c.Routing] = true
		}
		require.Len(t, seen, len(want.routings))
		for _, r := range want.routings {
			require.True(t, seen[r], "%s searched %s routing", o.Policy, r)
		}
		require.Contains(t, out, fmt.Sprintf("%s: clairvoyant, the cheapest of %d simulated schedules", o.Policy, o.Runs))
		require.Contains(t, out, "routed "+o.Routing+": ")
	}
	require.Equal(t, "random", doc.Oracles[1].Routing)
	require.LessOrEqual(t, doc.Policies[0].CPUCoreSeconds, doc.Policies[1].CPUCoreSeconds)
}

// TestSimulateMeanTargetAndTraceOnlyCompression: --percentile mean runs a
// mean-latency target (percentile 0 in the JSON, "mean ≤" in the
// conditions); --compress-mode trace-only says it favours some policies;
// --routing and --scaling reach the JSON.
func TestSimulateMeanTargetAndTraceOnlyCompression(t *testing.T) {
	js := filepath.Join(t.TempDir(), "o.json")
	code, out, stderr := runSim(t, "--trace", "pattern:increase-decrease", "--compress", "4", "--compress-mode", "trace-only",
		"--slo", "200ms", "--percentile", "mean", "--service", "exp:50ms", "--init", "20s", "--routing", "leastRequest",
		"--scaling", "poisson", "--policies", "qas,oracle", "--json", js)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "compression 4× of the trace only: init times, sync periods and windows stay in simulated seconds, which favours some policies")
	require.Contains(t, out, "routing leastRequest; mean ≤ 200ms")
	require.Contains(t, out, "Poisson at the 60 s centred mean")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, 0.0, doc["percentile"])
	require.Equal(t, "trace-only", doc["compression_mode"])
	require.Equal(t, "leastRequest", doc["routing"])
	require.Equal(t, "poisson", doc["scaling"])
	require.NotContains(t, doc, "onset_bound", "a mean target has no late budget to bound")
	require.NotContains(t, out, "onset bound:")
	for _, bad := range [][]string{{"--percentile", "median"}, {"--routing", "roundRobin"}, {"--scaling", "double"}, {"--compress", "2", "--compress-mode", "fast"}} {
		code, _, stderr := runSim(t, append([]string{"--trace", "pattern:flash-crowd", "--slo", "200ms"}, bad...)...)
		require.Equal(t, 2, code, bad)
		require.Contains(t, stderr, "invalid "+bad[len(bad)-2], bad)
	}
}

// TestSimulateHelpNamesTheOracles: --help lists every yardstick and says
// what each is and on which data plane.
func TestSimulateHelpNamesTheOracles(t *testing.T) {
	code, out, _ := runSim(t, "--help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "oracle, oracle-reactive, lower-bound, oracle-pooled, oracle-reactive-pooled, lower-bound-pooled, yardsticks")
	require.Contains(t, out, "oracle (clairvoyant) and oracle-reactive (knows the present only) are the cheapest schedules that meet the SLO on the run's data plane (--routing)")
	require.Contains(t, out, "the -pooled ones may also use a pooled queue (an activator), the kpa's yardsticks")
	require.Contains(t, out, "-routing string")
	require.Contains(t, out, "or mean (seed 003's mean-latency target)")
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
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--burst-rise", "1"}, code: 2, contains: "invalid --burst-rise: must be in (1, 100]"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--burst-rise", "NaN"}, code: 2, contains: "--burst-rise"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--burst-rise", "3", "--percentile", "mean"}, code: 2, contains: "needs a percentile target"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--burst-rise", "3", "--burst-every", "30s"}, code: 2, contains: "invalid --burst-every: must be between 1m0s and 720h0m0s (0 means 1h0m0s), got 30s"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--hop", "-1ms"}, code: 2, contains: "invalid --hop: must be between 0 and 1s, got -1ms"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--hop", "2s"}, code: 2, contains: "invalid --hop: must be between 0 and 1s, got 2s"},
		{args: []string{"--trace", "pattern:flash-crowd", "--slo", "200ms", "--advert", "0s"}, code: 2, contains: "invalid --advert: must be positive, got 0s"},
		{args: []string{"--trace", "pattern:bursts", "--slo", "200ms", "--window", "1h:2h", "--history", "-1m"}, code: 2, contains: "--history"},
		{args: []string{"--trace", "pattern:bursts", "--slo", "200ms", "--window", "0s:1h", "--history", "1h"}, code: 2, contains: "--history"},
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

// TestSimulateHistory: --history gives qas the trace before the window as the
// workload's past, as InfluxDB would hold it: the conditions say how much,
// qas decides otherwise for having seen the first hour's bursts, and the
// policies that read no history (the HPA, the oracles) run exactly as from a
// cold start.
func TestSimulateHistory(t *testing.T) {
	run := func(history string) (string, map[string]map[string]any) {
		return simRun(t, "--trace", "pattern:mmpp", "--window", "1h:1h20m", "--history", history, "--scale", "20",
			"--slo", "200ms", "--service", "exp:50ms", "--init", "2m", "--policies", "qas,hpa,oracle")
	}
	coldOut, cold := run("0s")
	warmOut, warm := run("1h")
	// The onset bound reads the history as the run's past: the first hour's
	// 5× bursts are no rise to a run that has seen them.
	for _, o := range []string{coldOut, warmOut} {
		require.Contains(t, o, "onset bound: the largest rise over the run's past is ×")
	}
	require.Greater(t, cold["bound"]["jump"].(float64), warm["bound"]["jump"].(float64))
	require.Greater(t, warm["bound"]["calm_pods"].(float64), cold["bound"]["calm_pods"].(float64))
	require.NotContains(t, coldOut, "history before it")
	require.Contains(t, warmOut, "with 3600 simulated s of history before it")
	for _, p := range []string{"hpa", "oracle"} {
		require.Equal(t, cold[p]["pod_seconds"], warm[p]["pod_seconds"], p)
		require.Equal(t, cold[p]["requests_over_target_pct"], warm[p]["requests_over_target_pct"], p)
	}
	// MMPP's first hour holds 5× bursts: having seen them, qas keeps more
	// capacity through the quiet twenty minutes that follow.
	require.Greater(t, warm["qas"]["pod_seconds"].(float64), cold["qas"]["pod_seconds"].(float64))
}

// TestSimulateDeclaredRise: MMPP's first 20 minutes from a cold start, at
// ×20 with a 2-minute init: its first 5× rise comes at minute 4 with nothing
// in the history. Told of it (--burst-rise 5), qas holds pods before it and
// puts fewer requests late, for more pod-seconds; the onset bound says why.
func TestSimulateDeclaredRise(t *testing.T) {
	run := func(extra ...string) map[string]any {
		_, by := simRun(t, append([]string{"--trace", "pattern:mmpp", "--window", "0s:20m", "--scale", "20", "--seed", "3",
			"--slo", "200ms", "--service", "exp:50ms", "--init", "2m", "--policies", "qas"}, extra...)...)
		by["qas"]["bound"] = by["bound"]
		return by["qas"]
	}
	plain, told := run(), run("--burst-rise", "5", "--burst-every", "1h")
	bound := plain["bound"].(map[string]any)
	require.Greater(t, bound["pods"].(float64), bound["calm_pods"].(float64), "the first rise needs pods held before it")
	require.Greater(t, told["pod_seconds"].(float64), plain["pod_seconds"].(float64))
	require.Less(t, told["requests_over_target_pct"].(float64), plain["requests_over_target_pct"].(float64))
}

// simRun runs simulate with --json and returns its stdout and the policies
// of the JSON by name, with the onset bound under "bound".
func simRun(t *testing.T, args ...string) (string, map[string]map[string]any) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "o.json")
	code, out, stderr := runSim(t, append(args, "--json", js)...)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc struct {
		Policies   []map[string]any `json:"policies"`
		OnsetBound map[string]any   `json:"onset_bound"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	by := map[string]map[string]any{"bound": doc.OnsetBound}
	for _, p := range doc.Policies {
		by[p["name"].(string)] = p
	}
	return out, by
}

// TestSimulateHop: --hop is the latency each overflowed request pays on its
// way through the front: on a trace whose burst fills the pods' slots, a
// longer hop makes those requests (and so the mean) slower, the run's
// conditions say which hop ran, and random routing, which hands nothing off,
// neither names a hop nor changes with it.
func TestSimulateHop(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "burst.rps")
	var b strings.Builder
	for i := 0; i < 90; i++ {
		rate := 24
		if i >= 30 && i < 60 {
			rate = 72
		}
		fmt.Fprintf(&b, "%d\n", rate)
	}
	require.NoError(t, os.WriteFile(tr, []byte(b.String()), 0o644))
	run := func(routing, hop string) (string, float64) {
		out, by := simRun(t, "--trace", tr, "--policies", "static:4", "--initial-replicas", "4", "--routing", routing,
			"--service", "exp:50ms", "--slo", "200ms", "--scaling", "poisson", "--poisson-window", "1s", "--hop", hop)
		return out, by["static:4"]["mean_latency_seconds"].(float64)
	}
	out0, mean0 := run("overflow", "0s")
	require.Contains(t, out0, "routing overflow;")
	require.Contains(t, out0, "; extra hop 0s, advertisements and front checks every 1s")
	out50, mean50 := run("overflow", "50ms")
	require.Contains(t, out50, "; extra hop 50ms, advertisements and front checks every 1s")
	require.Greater(t, mean50, mean0+0.01, "two 50 ms hops on the overflowed requests")

	outR0, meanR0 := run("random", "0s")
	outR50, meanR50 := run("random", "50ms")
	require.NotContains(t, outR0, "extra hop")
	require.NotContains(t, outR50, "extra hop")
	require.Equal(t, meanR0, meanR50, "random routing takes no extra hop")
}
