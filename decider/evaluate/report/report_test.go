package report

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/internal/testenv"
)

var reportPolicies = []string{"qas", "hpa", "kpa", "yardsticks"}

func comparison(t *testing.T) Input {
	t.Helper()
	svc, err := sim.ParseDist("exp:50ms")
	require.NoError(t, err)
	init, err := sim.ParseDist("20s")
	require.NoError(t, err)
	rates := make([]float64, 1200)
	for i := range rates {
		rates[i] = 30 + 25*math.Sin(float64(i)/120)
	}
	cfg := sim.Config{Rates: rates, Service: svc, Init: init, Concurrency: 1, CPU: 0.5, Target: 0.2, Percentile: 95, Seed: 1}
	c, err := sim.Compare(cfg, reportPolicies, policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}, nil)
	require.NoError(t, err)
	return Input{Title: "test <report>", Description: "sine", Rates: rates, Target: 0.2, Percentile: 95, Comparison: c}
}

// TestWriteIsSelfContained: the one-run report has the rate and actions
// charts, a pods and a latency small multiple per policy, and the summary;
// each row names its data plane and its yardstick and shows its cost over
// that oracle's; the KPA is held to the pooled oracle, qas and the HPA to
// the Service's; each small multiple draws its floor lines; the summary has
// one point per policy that is not itself a clairvoyant oracle.
func TestWriteIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	in := comparison(t)
	require.NoError(t, Write(&b, in))
	html := b.String()
	n := len(in.Comparison.Summaries)
	require.Equal(t, 9, n)
	require.Equal(t, 2+2*n+1, strings.Count(html, "<svg"))
	require.Contains(t, html, "test &lt;report&gt;", "the title is escaped")
	require.NotRegexp(t, `(src|href)="(https?:)?//`, html, "nothing is loaded from elsewhere")
	for i, s := range in.Comparison.Summaries {
		o, lb := sim.YardstickOf(s.Name)
		ratio := "—"
		if r := in.Comparison.CostRatio(i); !math.IsNaN(r) {
			ratio = fmt.Sprintf("%.2f", r)
		}
		require.Regexp(t, fmt.Sprintf(`<tr><td>%s</td><td>%s</td>(<td>[^<]*</td>){9}<td>%s</td><td>%s</td>`,
			regexp.QuoteMeta(s.Name), regexp.QuoteMeta(s.Routing), regexp.QuoteMeta(ratio), o), html)
		pods := regexp.MustCompile(`<svg id="c0-pods-` + regexp.QuoteMeta(s.Name) + `"[^>]*>.*?</svg>`).FindString(html)
		require.NotEmpty(t, pods, s.Name)
		if s.Name != o {
			require.Contains(t, pods, `data-name="`+o+`"`, "%s's floor line", s.Name)
		}
		if s.Name != lb {
			require.Contains(t, pods, `data-name="`+lb+`"`, "%s's lower bound", s.Name)
		}
		require.Contains(t, html, `id="c0-latency-`+s.Name+`"`)
	}
	kpa := in.Comparison.Index("kpa")
	require.InDelta(t, in.Comparison.Summaries[kpa].CPUCoreSeconds/in.Comparison.Summaries[in.Comparison.Index("oracle-pooled")].CPUCoreSeconds,
		in.Comparison.CostRatio(kpa), 1e-12, "the KPA is held to the pooled oracle")
	qas := in.Comparison.Index("qas")
	require.InDelta(t, in.Comparison.Summaries[qas].CPUCoreSeconds/in.Comparison.Summaries[in.Comparison.Index("oracle")].CPUCoreSeconds,
		in.Comparison.CostRatio(qas), 1e-12)
	require.Equal(t, n-2, strings.Count(html, `<circle class="point"`), "every policy but the two clairvoyant oracles")
	require.Len(t, in.Comparison.Oracles, 6)
	for _, o := range in.Comparison.Oracles {
		require.Contains(t, html, fmt.Sprintf("<p class=\"oracle\">%s: ", o.Policy))
	}
	require.Contains(t, html, "oracle: the clairvoyant oracle (knows the future rates and every pod&#39;s init time), the cheapest of 36 simulated schedules")
	require.Contains(t, html, "lower-bound: the lower bound (clairvoyant, pods Ready at once: no init cost)")
	require.Error(t, Write(&b, Input{}), "no results")
}

// TestMatrixReport: one point per policy per cell in the summary, a table
// per cell with its conditions, small multiples for the first Detail cells.
func TestMatrixReport(t *testing.T) {
	in := comparison(t)
	cells := []Cell{
		{Name: "cell A", Conditions: "sine, seed 1", Rates: in.Rates, Target: 0.2, Percentile: 95, Comparison: in.Comparison},
		{Name: "cell B", Conditions: "sine again", Rates: in.Rates, Target: 0.2, Percentile: 95, Comparison: in.Comparison},
	}
	var b bytes.Buffer
	require.NoError(t, WriteMatrix(&b, MatrixInput{Title: "matrix", Description: "two cells", Cells: cells, Detail: 1}))
	html := b.String()
	n := len(in.Comparison.Summaries)
	require.Equal(t, 2*(n-2), strings.Count(html, `<circle class="point"`))
	require.Equal(t, 2, strings.Count(html, `<table class="metrics">`))
	require.Contains(t, html, `<p class="cond">sine again</p>`)
	require.Equal(t, 2+2*n+1, strings.Count(html, "<svg"), "charts for the first cell only")
	require.Error(t, WriteMatrix(&b, MatrixInput{}))
	require.Error(t, WriteMatrix(&b, MatrixInput{Cells: []Cell{{Name: "empty"}}}))
}

// TestLogAxis: the latency small multiples use a logarithmic axis, so a
// value ten times another sits a fixed distance above it however large.
func TestLogAxis(t *testing.T) {
	a := axis{log: true, lo: 0.01, hi: 100}
	require.InDelta(t, 0.25, a.frac(0.1), 1e-12)
	require.InDelta(t, 0.5, a.frac(1), 1e-12)
	require.InDelta(t, 1, a.frac(1000), 1e-12, "capped at the top")
	require.InDelta(t, 0, a.frac(0), 1e-12, "below the axis at the bottom")
	require.InDelta(t, 1, a.at(0.5), 1e-12)
}

// TestActionsChartAgreesWithTable: the actions chart ends at the table's
// count for every policy, the first change from the initial replicas
// included.
func TestActionsChartAgreesWithTable(t *testing.T) {
	in := comparison(t)
	series := actionSeries(in.Comparison, map[string]string{})
	first := 0
	for i, s := range series {
		r := in.Comparison.Results[i]
		require.Equal(t, float64(in.Comparison.Summaries[i].Actions), s.Y[len(s.Y)-1], s.Name)
		if r.Desired[0] != r.Initial {
			first++
			require.Equal(t, 1.0, s.Y[0], "%s changed its count in the first second", s.Name)
		}
	}
	// A hand-built run that changes its count in its first second: the old
	// chart, which compared each second with the previous one only, started
	// at 0 and ended at 1.
	r := &sim.Result{Policy: "scripted", Initial: 3, Desired: []int{5, 5, 4, 4}, Actions: 2}
	y := actionSeries(&sim.Comparison{Results: []*sim.Result{r}}, map[string]string{})[0].Y
	require.Equal(t, []float64{1, 1, 2, 2}, y)
	t.Logf("%d policies changed their count in the first second", first)
}

// probe measures every chart and line in the real browser and writes the
// results into the DOM, which --dump-dom then prints.
const probe = `<script>
window.addEventListener('load', function () {
  var out = [];
  document.querySelectorAll('svg.chart').forEach(function (s) {
    var r = s.getBoundingClientRect();
    var lines = s.querySelectorAll('polyline.series, circle.point');
    var drawn = 0;
    lines.forEach(function (l) {
      var b = l.getBBox();
      if (l.tagName === 'circle' ? (b.width > 0 && b.height > 0) : (b.width > 0 && l.getTotalLength() > 0)) drawn++;
    });
    out.push(s.id + ':' + Math.round(r.width) + 'x' + Math.round(r.height) + ':' + lines.length + ':' + drawn);
  });
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = out.join(' ');
  document.body.appendChild(pre);
});
</script>`

func TestRendersInChromium(t *testing.T) {
	chromium := testenv.Tool(t, "QAS_CHROMIUM")
	var b bytes.Buffer
	in := comparison(t)
	require.NoError(t, Write(&b, in))
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	html := strings.Replace(b.String(), "</body>", probe+"</body>", 1)
	require.NoError(t, os.WriteFile(page, []byte(html), 0o644))
	cmd := exec.CommandContext(context.Background(), chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--virtual-time-budget=5000", "--dump-dom", "file://"+page)
	out, err := cmd.Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`<pre id="probe">([^<]*)</pre>`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "the probe ran: %s", truncate(string(out)))
	charts := strings.Fields(m[1])
	n := len(in.Comparison.Summaries)
	require.Len(t, charts, 2+2*n+1)
	for _, c := range charts {
		f := strings.Split(c, ":")
		require.Len(t, f, 4, c)
		size := strings.Split(f[1], "x")
		w, _ := strconv.Atoi(size[0])
		h, _ := strconv.Atoi(size[1])
		switch {
		case f[0] == "summary":
			require.Equal(t, []int{900, 420}, []int{w, h}, c)
		case strings.Contains(f[0], "-pods-") || strings.Contains(f[0], "-latency-"):
			require.Equal(t, []int{440, 170}, []int{w, h}, "a small multiple: %s", c)
		default:
			require.Equal(t, []int{900, 260}, []int{w, h}, c)
		}
		lines, _ := strconv.Atoi(f[2])
		drawn, _ := strconv.Atoi(f[3])
		require.Positive(t, lines, c)
		require.Equal(t, lines, drawn, "every line of %s has a non-empty box", f[0])
	}
}

func truncate(s string) string {
	if len(s) > 500 {
		return s[:500]
	}
	return s
}
