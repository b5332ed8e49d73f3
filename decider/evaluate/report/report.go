// Package report writes a self-contained HTML report of a simulation or of a
// matrix of simulations: inline SVG charts and the metrics tables, with no
// script, stylesheet or font from elsewhere.
//
// For one run (Write): the arrival rate and the rates policies sized for;
// one small chart per policy of the pods it paid for each second (its
// pod-seconds per second) against the floor lines of its own data plane (the
// clairvoyant oracle and the lower bound), so one policy's spikes do not
// flatten the others; one small chart per policy of its latency per minute
// on a logarithmic axis against the target; the cumulative scaling actions;
// a summary of late requests against pod-seconds ÷ the oracle's; the
// metrics table. For a matrix (WriteMatrix): the summary chart with one
// point per policy per cell, a table per cell, and the small multiples of
// the first cells.
package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/qas-dev/qas/decider/evaluate/sim"
)

// Input is what a one-run report shows.
type Input struct {
	Title, Description string
	Rates              []float64
	// Target is seconds; Percentile is in (0,100), or 0 for a mean target.
	Target, Percentile float64
	Comparison         *sim.Comparison
}

// Cell is one cell of a matrix: a workload and setting, run with every policy.
type Cell struct {
	// Name identifies the cell; Conditions say every condition its figures
	// hold under (trace, window, scale, compression, routing, service, init,
	// target, seed).
	Name, Conditions string
	Rates            []float64
	Target           float64
	Percentile       float64
	Comparison       *sim.Comparison
}

// MatrixInput is what a matrix report shows.
type MatrixInput struct {
	Title, Description string
	Cells              []Cell
	// Detail is how many cells, from the first, get their small multiples.
	Detail int
}

// series is one line of a chart.
type series struct {
	Name  string
	Color string
	Y     []float64
	Dash  string // stroke-dasharray, empty for a solid line
	Width float64
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
	"#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"}

const (
	maxPoints = 400
	dashed    = "5,3"
	dotted    = "2,2"
)

// box is a chart's geometry.
type box struct {
	w, h, padL, padR, padT, padB float64
}

var (
	wide  = box{900, 260, 60, 150, 20, 30}
	small = box{440, 170, 50, 10, 20, 30}
)

// downsample keeps at most maxPoints by averaging groups of consecutive points
// (a mean keeps rates and counts comparable across series of different noise).
func downsample(y []float64) []float64 {
	if len(y) <= maxPoints {
		return y
	}
	g := int(math.Ceil(float64(len(y)) / maxPoints))
	out := make([]float64, 0, maxPoints)
	for i := 0; i < len(y); i += g {
		grp := y[i:min(i+g, len(y))]
		m := 0.0
		for _, v := range grp {
			if math.IsInf(v, 0) || math.IsNaN(v) {
				m = math.Inf(1)
				break
			}
			m += v
		}
		out = append(out, m/float64(len(grp)))
	}
	return out
}

// tick formats an axis value: whole numbers from 1,000 up, else 3 digits.
func tick(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// axis maps values to the chart's height: linear from 0, or logarithmic
// between lo and hi.
type axis struct {
	log    bool
	lo, hi float64
}

func (a axis) frac(v float64) float64 {
	if a.log {
		v = math.Max(v, a.lo)
		return math.Min(1, math.Log(v/a.lo)/math.Log(a.hi/a.lo))
	}
	return math.Min(1, math.Max(0, v/a.hi))
}

func (a axis) at(f float64) float64 {
	if a.log {
		return a.lo * math.Pow(a.hi/a.lo, f)
	}
	return a.hi * f
}

// chartOpts are a chart's options.
type chartOpts struct {
	id, title, yLabel, xUnit string
	xMax                     float64
	// yCap caps a linear axis; logY draws the y axis logarithmically from
	// yLo (values below are drawn at the bottom).
	yCap     float64
	logY     bool
	yLo      float64
	legend   bool
	class    string
	geometry box
}

// chart renders a line chart as an SVG element.
func chart(o chartOpts, lines []series) template.HTML {
	g := o.geometry
	for i := range lines {
		lines[i].Y = downsample(lines[i].Y)
	}
	yMax, yMin := 0.0, math.Inf(1)
	for _, l := range lines {
		for _, v := range l.Y {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				yMax = math.Max(yMax, v)
				if v > 0 {
					yMin = math.Min(yMin, v)
				}
			}
		}
	}
	if yMax == 0 {
		yMax = 1
	}
	ax := axis{hi: yMax * 1.05}
	if o.yCap > 0 && ax.hi > o.yCap {
		ax.hi = o.yCap
	}
	if o.logY {
		lo := o.yLo
		if lo <= 0 {
			lo = math.Min(yMin, yMax/10)
		}
		ax = axis{log: true, lo: lo, hi: math.Max(yMax*1.2, lo*10)}
		if o.yCap > 0 && ax.hi > o.yCap {
			ax.hi = o.yCap
		}
	}
	pw, ph := g.w-g.padL-g.padR, g.h-g.padT-g.padB
	class := "chart"
	if o.class != "" {
		class += " " + o.class
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="%s" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`,
		template.HTMLEscapeString(o.id), class, g.w, g.h, g.w, g.h, template.HTMLEscapeString(o.title))
	fmt.Fprintf(&b, `<text x="%g" y="14" font-size="12" font-weight="bold">%s</text>`, g.padL, template.HTMLEscapeString(o.title))
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`, g.padL, g.padT, pw, ph)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		y := g.padT + ph - ph*f
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%s</text>`, g.padL-4, y+3, tick(ax.at(f)))
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%s</text>`, g.padL+pw*f, g.h-g.padB+14, tick(o.xMax*f))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%s</text>`, g.padL+pw/2, g.h-2, o.xUnit)
	fmt.Fprintf(&b, `<text x="10" y="%g" font-size="10" transform="rotate(-90 10 %g)" text-anchor="middle">%s</text>`, g.padT+ph/2, g.padT+ph/2, template.HTMLEscapeString(o.yLabel))
	for i, l := range lines {
		y := l.Y
		if len(y) == 0 {
			continue
		}
		var pts strings.Builder
		for j, v := range y {
			f := 1.0
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				f = ax.frac(v)
			}
			x := g.padL + pw*float64(j)/math.Max(1, float64(len(y)-1))
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, g.padT+ph-ph*f)
		}
		dash := ""
		if l.Dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.Dash)
		}
		wd := l.Width
		if wd == 0 {
			wd = 1.3
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="%g"%s points="%s"/>`,
			template.HTMLEscapeString(l.Name), l.Color, wd, dash, strings.TrimSpace(pts.String()))
		if o.legend {
			ly := g.padT + 12 + 14*float64(i)
			fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`, g.w-g.padR+8, g.w-g.padR+24, ly-4, ly-4, l.Color, dash)
			fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11">%s</text>`, g.w-g.padR+28, ly, template.HTMLEscapeString(l.Name))
		} else {
			// The small multiples name their lines under the title.
			lx := g.padL + 6 + 140*float64(i)
			fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`, lx, lx+14, g.padT+10, g.padT+10, l.Color, dash)
			fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10">%s</text>`, lx+18, g.padT+13, template.HTMLEscapeString(l.Name))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// point is one dot of the summary chart.
type point struct {
	Policy, Cell string
	X, Y         float64
}

// scatter renders the summary chart: late % against pod-seconds ÷ the
// oracle of the policy's data plane, x logarithmic, one colour per policy,
// with the oracle's cost (x = 1) and the SLO's budget as guides.
func scatter(id string, pts []point, budgetPct float64, colors map[string]string, order []string) template.HTML {
	g := box{900, 420, 60, 190, 24, 36}
	pw, ph := g.w-g.padL-g.padR, g.h-g.padT-g.padB
	xLo, xHi, yHi := 0.5, 2.0, math.Max(2*budgetPct, 1)
	for _, p := range pts {
		if p.X > 0 && !math.IsInf(p.X, 0) {
			xLo, xHi = math.Min(xLo, p.X), math.Max(xHi, p.X)
		}
		yHi = math.Max(yHi, p.Y)
	}
	xLo, xHi, yHi = xLo/1.1, xHi*1.1, yHi*1.05
	xs := axis{log: true, lo: xLo, hi: xHi}
	ys := axis{hi: yHi}
	px := func(x float64) float64 { return g.padL + pw*xs.frac(x) }
	py := func(y float64) float64 { return g.padT + ph - ph*ys.frac(y) }
	var b strings.Builder
	title := "Late requests against cost: one point per policy per cell"
	fmt.Fprintf(&b, `<svg id="%s" class="chart summary" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`,
		id, g.w, g.h, g.w, g.h, title)
	fmt.Fprintf(&b, `<text x="%g" y="14" font-size="13" font-weight="bold">%s</text>`, g.padL, title)
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`, g.padL, g.padT, pw, ph)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%s</text>`, g.padL-4, g.padT+ph-ph*f+3, tick(ys.at(f)))
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%s</text>`, g.padL+pw*f, g.h-g.padB+14, tick(xs.at(f)))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">CPU-core-seconds ÷ the clairvoyant oracle's of the same data plane (log)</text>`, g.padL+pw/2, g.h-4)
	fmt.Fprintf(&b, `<text x="10" y="%g" font-size="10" transform="rotate(-90 10 %g)" text-anchor="middle">requests over the target, %%</text>`, g.padT+ph/2, g.padT+ph/2)
	fmt.Fprintf(&b, `<line class="guide" x1="%.1f" x2="%.1f" y1="%g" y2="%g" stroke="#000" stroke-dasharray="4,3"/>`, px(1), px(1), g.padT, g.padT+ph)
	if budgetPct > 0 {
		fmt.Fprintf(&b, `<line class="guide" x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="4,3"/>`, g.padL, g.padL+pw, py(budgetPct), py(budgetPct))
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" font-size="10">SLO budget %.2g %%</text>`, g.padL+4, py(budgetPct)-3, budgetPct)
	}
	for _, p := range pts {
		if math.IsNaN(p.X) || p.X <= 0 {
			continue
		}
		fmt.Fprintf(&b, `<circle class="point" data-policy="%s" cx="%.1f" cy="%.1f" r="3.5" fill="%s" fill-opacity="0.75"><title>%s, %s: %.2f × the oracle, %.2f %% late</title></circle>`,
			template.HTMLEscapeString(p.Policy), px(p.X), py(p.Y), colors[p.Policy], template.HTMLEscapeString(p.Policy), template.HTMLEscapeString(p.Cell), p.X, p.Y)
	}
	for i, name := range order {
		ly := g.padT + 12 + 14*float64(i)
		fmt.Fprintf(&b, `<circle cx="%g" cy="%g" r="4" fill="%s"/>`, g.w-g.padR+16, ly-4, colors[name])
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11">%s</text>`, g.w-g.padR+26, ly, template.HTMLEscapeString(name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func ints(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// row is one line of a metrics table.
type row struct {
	sim.Summary
	// Ratio is CPU-core-seconds ÷ the oracle of its data plane's (NaN: none ran).
	Ratio  float64
	Oracle string
}

// table is one cell's metrics.
type table struct {
	ID, Name, Conditions string
	Rows                 []row
}

// detail is one cell's charts.
type detail struct {
	Name   string
	Wide   []template.HTML
	Pods   []template.HTML
	Lat    []template.HTML
	Search []sim.OracleSearch
}

var page = template.Must(template.New("r").Funcs(template.FuncMap{
	"ratio": func(x float64) string {
		if math.IsNaN(x) {
			return "—"
		}
		return fmt.Sprintf("%.2f", x)
	},
	"kind": func(o sim.OracleSearch) string {
		switch {
		case o.ZeroInit:
			return "the lower bound (clairvoyant, pods Ready at once: no init cost)"
		case o.Reactive:
			return "the reactive oracle (knows the present rate at once, not the future; pods take their init time)"
		}
		return "the clairvoyant oracle (knows the future rates and every pod's init time)"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;margin:20px;max-width:1100px}table{border-collapse:collapse;font-size:12px;margin-bottom:16px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th:first-child,td:first-child{text-align:left}.grid{display:flex;flex-wrap:wrap;gap:8px}p.cond{font-size:12px;color:#333}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>{{.Description}}</p>
<p>Each policy is held to the yardsticks of its own data plane: policies routed at random through a Service (or by least request) to the oracle and lower bound of that plane; the KPA, whose activator pools the pods' queues while it is in the path, to the pooled ones. The oracle's pod-seconds per second are each policy's floor line; the lower bound (pods Ready at once) is how close the oracle is to the physical limit.</p>
<h2>Summary</h2>
{{.Summary}}
{{range .Details}}<h2>{{.Name}}</h2>
{{range .Search}}<p class="oracle">{{.Policy}}: {{kind .}}, the cheapest of {{.Runs}} simulated schedules that {{if .Met}}meet{{else}}come closest to{{end}} the SLO, routed {{.Routing}}: {{printf "%.3f" .Headroom}} × the true rate's {{.Window}} s {{if .Reactive}}trailing{{else}}centred{{end}} mean.</p>
{{end}}{{range .Wide}}<div>{{.}}</div>
{{end}}<h3>Pods paid for, per policy, against its data plane's floor</h3>
<div class="grid">{{range .Pods}}{{.}}{{end}}</div>
<h3>Latency per minute, per policy (logarithmic axis)</h3>
<div class="grid">{{range .Lat}}{{.}}{{end}}</div>
{{end}}<h2>Metrics</h2>
{{range .Tables}}<h3 id="{{.ID}}">{{.Name}}</h3><p class="cond">{{.Conditions}}</p>
<table class="metrics"><tr><th>policy</th><th>data plane</th><th>requests</th><th>&gt;T %</th><th>minutes &gt;T %</th><th>mean s</th><th>p50 s</th><th>p95 s</th><th>p99 s</th><th>pod-s</th><th>CPU core-s</th><th>÷ oracle</th><th>yardstick</th><th>actions</th><th>resizes</th><th>migrations</th><th>θU %</th><th>θO %</th><th>τU %</th><th>τO %</th><th>instability %</th><th>jitter /min</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Routing}}</td><td>{{.Requests}}</td><td>{{printf "%.2f" .RequestsOverTargetPct}}</td><td>{{printf "%.1f" .MinutesOverTargetPct}}</td><td>{{printf "%.3f" .MeanLatency}}</td><td>{{printf "%.3f" .Latency.P50}}</td><td>{{printf "%.3f" .Latency.P95}}</td><td>{{printf "%.3f" .Latency.P99}}</td><td>{{printf "%.0f" .PodSeconds}}</td><td>{{printf "%.0f" .CPUCoreSeconds}}</td><td>{{ratio .Ratio}}</td><td>{{.Oracle}}</td><td>{{.Actions}}</td><td>{{.Resizes}}</td><td>{{.Migrations}}</td><td>{{printf "%.1f" .Spec.ThetaU}}</td><td>{{printf "%.1f" .Spec.ThetaO}}</td><td>{{printf "%.1f" .Spec.TauU}}</td><td>{{printf "%.1f" .Spec.TauO}}</td><td>{{printf "%.1f" .Spec.Instability}}</td><td>{{printf "%.2f" .Spec.Jitter}}</td></tr>
{{end}}</table>
{{end}}</body></html>
`))

// Write renders the report of one run.
func Write(w io.Writer, in Input) error {
	if in.Comparison == nil || len(in.Comparison.Results) == 0 {
		return fmt.Errorf("report: no results to show")
	}
	return WriteMatrix(w, MatrixInput{Title: in.Title, Description: in.Description, Detail: 1,
		Cells: []Cell{{Name: "Charts", Conditions: in.Description, Rates: in.Rates, Target: in.Target, Percentile: in.Percentile, Comparison: in.Comparison}}})
}

// WriteMatrix renders the report of a matrix of runs.
func WriteMatrix(w io.Writer, in MatrixInput) error {
	if len(in.Cells) == 0 {
		return fmt.Errorf("report: no cells to show")
	}
	colors := map[string]string{}
	var order []string
	var pts []point
	var tables []table
	budget := 0.0
	for ci, c := range in.Cells {
		cmp := c.Comparison
		if cmp == nil || len(cmp.Results) == 0 {
			return fmt.Errorf("report: cell %q has no results", c.Name)
		}
		if c.Percentile > 0 {
			budget = 100 - c.Percentile
		}
		t := table{ID: fmt.Sprintf("cell-%d", ci), Name: c.Name, Conditions: c.Conditions}
		for i, s := range cmp.Summaries {
			if _, ok := colors[s.Name]; !ok {
				colors[s.Name] = palette[len(order)%len(palette)]
				order = append(order, s.Name)
			}
			o, _ := sim.YardstickOf(s.Name)
			r := row{Summary: s, Ratio: cmp.CostRatio(i), Oracle: o}
			t.Rows = append(t.Rows, r)
			if !math.IsNaN(r.Ratio) && s.Name != o {
				pts = append(pts, point{Policy: s.Name, Cell: c.Name, X: r.Ratio, Y: s.RequestsOverTargetPct})
			}
		}
		tables = append(tables, t)
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].Policy < pts[j].Policy })
	var details []detail
	for ci := 0; ci < min(in.Detail, len(in.Cells)); ci++ {
		details = append(details, cellDetail(ci, in.Cells[ci], colors))
	}
	return page.Execute(w, struct {
		Title, Description string
		Summary            template.HTML
		Details            []detail
		Tables             []table
	}{in.Title, in.Description, scatter("summary", pts, budget, colors, order), details, tables})
}

// cellDetail draws one cell's charts.
func cellDetail(ci int, c Cell, colors map[string]string) detail {
	cmp := c.Comparison
	n := float64(len(c.Rates))
	id := func(s string) string { return fmt.Sprintf("c%d-%s", ci, s) }
	rate := []series{{Name: "arrival rate", Color: "#333", Y: c.Rates}}
	for i, r := range cmp.Results {
		hasForecast := false
		for _, f := range r.Forecast {
			if f > 0 {
				hasForecast = true
				break
			}
		}
		// A yardstick's sizing rate is its schedule's, not a forecast.
		if hasForecast && cmp.Index(r.Policy) == i && !isYardstick(r.Policy) {
			rate = append(rate, series{Name: r.Policy + " sizing λ", Color: colors[r.Policy], Y: r.Forecast, Dash: dashed})
		}
	}
	d := detail{Name: c.Name, Search: cmp.Oracles}
	d.Wide = append(d.Wide,
		chart(chartOpts{id: id("rate"), title: "Arrival rate and sizing rate", yLabel: "requests/s", xUnit: "simulated seconds", xMax: n,
			legend: true, geometry: wide}, rate),
		chart(chartOpts{id: id("actions"), title: "Scaling actions (changes of desired replicas) per policy", yLabel: "actions so far",
			xUnit: "simulated seconds", xMax: n, legend: true, geometry: wide}, actionSeries(cmp, colors)))
	pct := "p" + tick(c.Percentile)
	if c.Percentile == 0 {
		pct = "mean"
	}
	for _, r := range cmp.Results {
		o, lb := sim.YardstickOf(r.Policy)
		lines := []series{{Name: r.Policy, Color: colors[r.Policy], Y: ints(r.Existing), Width: 1.5}}
		if j := cmp.Index(o); j >= 0 && o != r.Policy {
			lines = append(lines, series{Name: o, Color: "#000", Y: ints(cmp.Results[j].Existing), Dash: dashed, Width: 1})
		}
		if j := cmp.Index(lb); j >= 0 && lb != r.Policy {
			lines = append(lines, series{Name: lb, Color: "#888", Y: ints(cmp.Results[j].Existing), Dash: dotted, Width: 1})
		}
		d.Pods = append(d.Pods, chart(chartOpts{id: id("pods-" + r.Policy), title: r.Policy + ": pods (pod-seconds per second)", yLabel: "pods",
			xUnit: "simulated seconds", xMax: n, geometry: small, class: "pods"}, lines))
		tl := make([]float64, len(r.MinuteLatency))
		for i := range tl {
			tl[i] = c.Target
		}
		d.Lat = append(d.Lat, chart(chartOpts{id: id("latency-" + r.Policy), title: fmt.Sprintf("%s: latency %s per minute", r.Policy, pct),
			yLabel: "seconds", xUnit: "simulated minutes", xMax: float64(len(tl)), logY: true, yLo: c.Target / 10, geometry: small, class: "latency"},
			[]series{{Name: r.Policy, Color: colors[r.Policy], Y: r.MinuteLatency, Width: 1.5}, {Name: "target", Color: "#000", Y: tl, Dash: dashed, Width: 1}}))
	}
	return d
}

func isYardstick(name string) bool {
	o, lb := sim.YardstickOf(name)
	return name == o || name == lb || strings.HasPrefix(name, "oracle-reactive")
}

func actionSeries(c *sim.Comparison, colors map[string]string) []series {
	var out []series
	for _, r := range c.Results {
		// Count as the table does: every change of the desired count,
		// the first one from the initial replicas included.
		y := make([]float64, len(r.Desired))
		n, prev := 0, r.Initial
		for j, d := range r.Desired {
			if d != prev {
				n++
				prev = d
			}
			y[j] = float64(n)
		}
		col := colors[r.Policy]
		if col == "" {
			col = palette[len(out)%len(palette)]
		}
		out = append(out, series{Name: r.Policy, Color: col, Y: y})
	}
	return out
}
