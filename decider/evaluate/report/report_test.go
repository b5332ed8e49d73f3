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
	c, err := sim.Compare(cfg, []string{"qas", "hpa", "oracle", "oracle-pooled"}, policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}, nil)
	require.NoError(t, err)
	return Input{Title: "test <report>", Description: "sine", Rates: rates, Target: 0.2, Percentile: 95, Comparison: c}
}

func TestWriteIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	in := comparison(t)
	require.NoError(t, Write(&b, in))
	html := b.String()
	require.Equal(t, 5, strings.Count(html, "<svg"))
	require.Contains(t, html, "test &lt;report&gt;", "the title is escaped")
	require.NotRegexp(t, `(src|href)="(https?:)?//`, html, "nothing is loaded from elsewhere")
	for _, p := range []string{"qas", "hpa"} {
		require.Regexp(t, fmt.Sprintf(`<tr><td>%s</td>(<td>[^<]*</td>){11}<td></td>`, p), html, "no oracle routing for %s", p)
	}
	require.Len(t, in.Comparison.Oracles, 2)
	for i, o := range in.Comparison.Oracles {
		// Each oracle's row shows its routing, and its paragraph says how it
		// was found.
		require.Equal(t, o.Policy, in.Comparison.Summaries[2+i].Name)
		require.Regexp(t, fmt.Sprintf(`<tr><td>%s</td>(<td>[^<]*</td>){11}<td>%s</td>`, o.Policy, o.Routing), html)
		require.Contains(t, html, fmt.Sprintf("%s is the cheapest of %d simulated schedules", o.Policy, o.Runs))
		require.Contains(t, html, "requests through the "+o.Routing+", ")
	}
	require.Equal(t, "service", in.Comparison.Oracles[0].Routing, "the oracle is routed through the Service")
	require.Contains(t, html, "oracle is the cheapest of 36 simulated schedules with requests routed at random through a Service")
	require.Contains(t, html, "oracle-pooled is the cheapest of 72 simulated schedules with requests through a Service or a capacity-aware activator")
	require.Error(t, Write(&b, Input{}), "no results")
}

// TestActionsChartAgreesWithTable: the actions chart ends at the table's
// count for every policy, the first change from the initial replicas
// included.
func TestActionsChartAgreesWithTable(t *testing.T) {
	in := comparison(t)
	series := actionSeries(in.Comparison)
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
	y := actionSeries(&sim.Comparison{Results: []*sim.Result{r}})[0].Y
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
    var lines = s.querySelectorAll('polyline.series');
    var drawn = 0;
    lines.forEach(function (l) { var b = l.getBBox(); if (b.width > 0 && l.getTotalLength() > 0) drawn++; });
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
	require.NoError(t, Write(&b, comparison(t)))
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
	require.Len(t, charts, 5)
	for _, c := range charts {
		f := strings.Split(c, ":")
		require.Len(t, f, 4, c)
		size := strings.Split(f[1], "x")
		w, _ := strconv.Atoi(size[0])
		h, _ := strconv.Atoi(size[1])
		require.Equal(t, 900, w, c)
		require.Equal(t, 260, h, c)
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
