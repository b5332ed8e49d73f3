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

func runEval(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := MainEnv(append([]string{"evaluate"}, args...), Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func sharedNASA(t *testing.T) string {
	p := filepath.Join("..", "..", "..", "shared", "traces", "nasa-1995-07-08.rps.gz")
	if v := os.Getenv("QAS_SHARED"); v != "" {
		p = filepath.Join(v, "traces", "nasa-1995-07-08.rps.gz")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the shared NASA trace is needed: %v", err)
	}
	return p
}

// TestEvaluateDemoCell: one cell of the demo writes the Markdown table, the
// JSON (headline and cells, each with its conditions and every yardstick)
// and the HTML report, prints the headline, and reports progress per cell
// off a terminal.
func TestEvaluateDemoCell(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runEval(t, "--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min", "--detail", "1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "the demo (a taste of the evaluation matrix): 1 cells, every one in real time (no compression)")
	require.Contains(t, out, "## Headline (1 cells)")
	require.Contains(t, out, "| kpa-delay | ")
	require.Contains(t, out, "## Goals (issues #15 and #20): qas")
	require.Contains(t, out, "| ≤ 1.10 × the reactive oracle, random (median) | ")
	require.Contains(t, stderr, "evaluate: 1/1 cells (nasa-2jul-10h-30min-x50 / lognormal-cv1.2-init45s / random / seed 1)")
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "real time; routing random; p95 ≤ 200ms; service lognormal:50ms,cv=1.2; init const:45s")
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var doc struct {
		Cells    int `json:"cells"`
		Headline []struct {
			Policy string   `json:"policy"`
			Cost   *float64 `json:"cost_over_oracle_median"`
		} `json:"headline"`
		Goals *struct {
			Policy string `json:"policy"`
			Cells  int    `json:"cells"`
			Planes []struct {
				Routing  string   `json:"routing"`
				Reactive *float64 `json:"cost_over_reactive_oracle_median"`
				Pooled   *float64 `json:"cost_over_oracle_pooled_median"`
			} `json:"planes"`
			KPA *struct {
				Pairs int `json:"pairs"`
			} `json:"kpa"`
		} `json:"goals"`
		Results []struct {
			Cell       string `json:"cell"`
			Conditions string `json:"conditions"`
			Policies   []struct {
				Name string `json:"name"`
			} `json:"policies"`
			Yardsticks []struct {
				Policy string `json:"policy"`
			} `json:"yardsticks"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, 1, doc.Cells)
	require.Len(t, doc.Results, 1)
	require.Len(t, doc.Results[0].Yardsticks, 6)
	require.Len(t, doc.Results[0].Policies, 5+6)
	require.NotNil(t, doc.Goals)
	require.Equal(t, "qas", doc.Goals.Policy)
	require.Equal(t, 1, doc.Goals.Cells)
	require.Len(t, doc.Goals.Planes, 1)
	require.Equal(t, "random", doc.Goals.Planes[0].Routing)
	require.NotNil(t, doc.Goals.Planes[0].Reactive)
	require.Nil(t, doc.Goals.Planes[0].Pooled, "a Service does not pool: null, not NaN")
	require.NotNil(t, doc.Goals.KPA, "both KPAs ran")
	for _, h := range doc.Headline {
		require.NotNil(t, h.Cost, h.Policy)
		if h.Policy == "oracle" {
			require.InDelta(t, 1, *h.Cost, 1e-12)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	require.Equal(t, 9, strings.Count(string(html), `<circle class="point"`), "the 11 rows but the two clairvoyant oracles")
}

// TestEvaluateSeeds: --seeds runs each cell with seeds 1 to N, says so in
// the conditions, and the seeds draw different runs of the same cell.
func TestEvaluateSeeds(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runEval(t, "--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min", "--detail", "0", "--seeds", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "the demo (a taste of the evaluation matrix), seeds 1–2 in every cell: 2 cells")
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var doc struct {
		Results []struct {
			Cell     string `json:"cell"`
			Policies []struct {
				Name     string `json:"name"`
				Requests int64  `json:"requests"`
			} `json:"policies"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Results, 2)
	require.Equal(t, "nasa-2jul-10h-30min-x50 / lognormal-cv1.2-init45s / random / seed 1", doc.Results[0].Cell)
	require.Equal(t, "nasa-2jul-10h-30min-x50 / lognormal-cv1.2-init45s / random / seed 2", doc.Results[1].Cell)
	require.Equal(t, "qas", doc.Results[0].Policies[0].Name)
	require.NotEqual(t, doc.Results[0].Policies[0].Requests, doc.Results[1].Policies[0].Requests, "seed 2 draws other arrivals")
}

// TestEvaluateOtherSLO: --slo, --percentile and --concurrency set every
// cell's SLO and pods, the conditions say so, and the SLO's budget is the
// percentile's: at p99 a cell meets it with at most 1 % of its requests late.
func TestEvaluateOtherSLO(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runEval(t, "--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min", "--detail", "0",
		"--slo", "500ms", "--percentile", "99", "--concurrency", "2")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "; p99 ≤ 500ms, k = 2, 0.5-core pods")
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var doc struct {
		Results []struct {
			Conditions string `json:"conditions"`
			Policies   []struct {
				Name string  `json:"name"`
				Late float64 `json:"requests_over_target_pct"`
			} `json:"policies"`
			Yardsticks []struct {
				Policy string  `json:"policy"`
				Budget float64 `json:"budget_pct"`
			} `json:"yardsticks"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Results, 1)
	r := doc.Results[0]
	require.Contains(t, r.Conditions, "p99 ≤ 500ms")
	require.Contains(t, r.Conditions, "k = 2")
	for _, y := range r.Yardsticks {
		require.InDelta(t, 1, y.Budget, 1e-9, y.Policy)
	}
	for _, p := range r.Policies {
		if p.Name == "oracle" || p.Name == "oracle-reactive" {
			require.LessOrEqual(t, p.Late, 1.0, "%s meets the p99 target's 1 %% budget", p.Name)
		}
	}

	// The mean: no percentile, so no onset bound.
	code, out, stderr = runEval(t, "--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min", "--detail", "0",
		"--slo", "100ms", "--percentile", "mean")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "; mean ≤ 100ms, k = 1")
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "mean ≤ 100ms")
	require.NotContains(t, string(md), "Onset bound:")
}

// TestEvaluateDeclaredRise: --burst-rise tells qas of a rise in every cell;
// the conditions say so, and qas then holds more pods than without it (the
// yardsticks are the same in both runs: they do not read it).
func TestEvaluateDeclaredRise(t *testing.T) {
	run := func(extra ...string) (string, map[string]float64) {
		dir := t.TempDir()
		args := append([]string{"--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min", "--detail", "0"}, extra...)
		code, out, stderr := runEval(t, args...)
		require.Equal(t, 0, code, stderr)
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		require.NoError(t, err)
		var doc struct {
			Results []struct {
				Policies []struct {
					Name       string  `json:"name"`
					PodSeconds float64 `json:"pod_seconds"`
				} `json:"policies"`
			} `json:"results"`
		}
		require.NoError(t, json.Unmarshal(b, &doc))
		pods := map[string]float64{}
		for _, p := range doc.Results[0].Policies {
			pods[p.Name] = p.PodSeconds
		}
		return out, pods
	}
	plainOut, plain := run()
	toldOut, told := run("--burst-rise", "3", "--burst-every", "30m")
	require.NotContains(t, plainOut, "spec.burst")
	require.Contains(t, toldOut, "qas told of a rise ×3 that may come every 30m0s without warning (spec.burst)")
	require.Greater(t, told["qas"], plain["qas"])
	require.Equal(t, plain["oracle"], told["oracle"])
	require.Equal(t, plain["hpa"], told["hpa"])
}

// TestEvaluatePoolingCell: one cell of --pooling writes the comparison
// against oracle-pooled, with its hop and advertisement period, to
// results.md and results.json.
func TestEvaluatePoolingCell(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := runEval(t, "--pooling", "--nasa", sharedNASA(t), "--out", dir, "--only", "flash-crowd-x5 / lognormal-cv1.2-init45s / peer / seed 1",
		"--hop", "2ms", "--advert", "500ms")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "the pooled data planes' comparison (docs/pooling.md): 1 cells")
	require.Contains(t, out, "extra hop 2ms, advertisements and front checks every 500ms")
	require.Contains(t, out, "four yardsticks: the clairvoyant and the reactive oracle on the cell's data plane")
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "## Pooled data planes against oracle-pooled")
	require.Contains(t, string(md), "| peer | qas | ")
	require.Contains(t, string(md), "| peer | oracle-reactive-pooled | ")
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var doc struct {
		Pooling []struct {
			Routing string `json:"routing"`
			Policy  string `json:"policy"`
			// ÷ the reactive oracle of its data plane.
			Reactive *float64 `json:"cost_over_reactive_oracle_median"`
		} `json:"pooling"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.Pooling, 6)
	require.Equal(t, "peer", doc.Pooling[0].Routing)
	for _, row := range doc.Pooling {
		require.NotNil(t, row.Reactive, row.Policy)
		require.Positive(t, *row.Reactive, row.Policy)
		if row.Policy == "oracle-reactive" || row.Policy == "oracle-reactive-pooled" {
			require.InDelta(t, 1, *row.Reactive, 1e-12, "each reactive oracle is its own plane's")
		}
	}
}

func TestEvaluateBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "invalid --nasa: is required (but with --held-out)"},
		{[]string{"--nasa", "/nonexistent/nasa.gz"}, "nasa"},
		{[]string{"--nasa", "NASA", "--workers", "-1"}, "invalid --workers: must not be negative"},
		{[]string{"--nasa", "NASA", "--only", "no such cell"}, `no cell's name contains "no such cell"`},
		{[]string{"--nasa", "NASA", "--seeds", "-1"}, "invalid --seeds: must be between 0 (the matrix's own) and 100, got -1"},
		{[]string{"--nasa", "NASA", "--seeds", "101"}, "invalid --seeds: must be between 0 (the matrix's own) and 100, got 101"},
		{[]string{"--nasa", "NASA", "--seeds", "2", "--only", "seed 3"}, `no cell's name contains "seed 3"`},
		{[]string{"--nasa", "NASA", "--pooling", "--hop", "-1ms"}, "invalid --hop: must be between 0 and 1s, got -1ms"},
		{[]string{"--nasa", "NASA", "--pooling", "--advert", "0s"}, "invalid --advert: must be positive, got 0s"},
		{[]string{"--nasa", "NASA", "--pooling", "--demo"}, "invalid --pooling: excludes --demo"},
		{[]string{"--held-out", "--demo"}, "invalid --held-out: excludes --demo and --pooling"},
		{[]string{"--held-out", "--pooling"}, "invalid --held-out: excludes --demo and --pooling"},
		{[]string{"--held-out", "--nasa", "/nonexistent/nasa.gz"}, "invalid --nasa"},
		{[]string{"--held-out", "--only", "nasa"}, `no cell's name contains "nasa"`},
		{[]string{"--nasa", "NASA", "--burst-rise", "0.5"}, "invalid --burst-rise: must be in (1, 100]"},
		{[]string{"--nasa", "NASA", "--burst-rise", "3", "--burst-every", "0s"}, "invalid --burst-every: must be between 1m0s and 720h0m0s, got 0s"},
		{[]string{"--nasa", "NASA", "--slo", "0s"}, "invalid --slo: must be a positive duration such as 200ms, got 0s"},
		{[]string{"--nasa", "NASA", "--slo", "-5ms"}, "invalid --slo: must be a positive duration such as 200ms, got -5ms"},
		{[]string{"--nasa", "NASA", "--percentile", "100"}, `invalid --percentile: must be in (0,100) or mean, got "100"`},
		{[]string{"--nasa", "NASA", "--percentile", "NaN"}, `invalid --percentile: must be in (0,100) or mean, got "NaN"`},
		{[]string{"--nasa", "NASA", "--percentile", "p95"}, `invalid --percentile: must be in (0,100) or mean, got "p95"`},
		{[]string{"--nasa", "NASA", "--concurrency", "0"}, "invalid --concurrency: must be at least 1, got 0"},
	} {
		for i, a := range tc.args {
			if a == "NASA" {
				tc.args[i] = sharedNASA(t)
			}
		}
		code, _, stderr := runEval(t, tc.args...)
		require.Equal(t, 2, code, tc.args)
		require.Contains(t, stderr, tc.want)
	}
}
