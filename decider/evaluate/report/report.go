// Package report writes a self-contained HTML report of a simulation: inline
// SVG line charts (arrival rate and forecast, Ready replicas against the
// oracle's demand, CPU requested and used, latency per minute against the
// target, cumulative scaling actions) and the
// metrics table. It needs no script, stylesheet or font from elsewhere.
package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/qas-dev/qas/decider/evaluate/sim"
)

// Input is what the report shows.
type Input struct {
	Title, Description string
	Rates              []float64
	Target, Percentile float64
	Comparison         *sim.Comparison
}

// series is one line of a chart.
type series struct {
	Name  string
	Color string
	Y     []float64
	Dash  bool
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

const (
	width, height = 900.0, 260.0
	padL, padR    = 60.0, 150.0
	padT, padB    = 20.0, 30.0
	maxPoints     = 600
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

// chart renders a line chart as an SVG element; xUnit labels the x axis. A
// positive yCap caps the y axis (values above it are drawn at the top).
func chart(id, title, yLabel, xUnit string, xMax, yCap float64, lines []series) template.HTML {
	for i := range lines {
		lines[i].Y = downsample(lines[i].Y)
	}
	yMax := 0.0
	for _, l := range lines {
		for _, v := range l.Y {
			if !math.IsInf(v, 0) && !math.IsNaN(v) {
				yMax = math.Max(yMax, v)
			}
		}
	}
	if yMax == 0 {
		yMax = 1
	}
	yMax *= 1.05
	if yCap > 0 && yMax > yCap {
		yMax = yCap
	}
	pw, ph := width-padL-padR, height-padT-padB
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`,
		id, width, height, width, height, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="14" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		y := padT + ph - ph*float64(i)/4
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%s</text>`, padL-4, y+3, tick(v))
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%s</text>`, padL+pw*float64(i)/4, height-padB+14, tick(xMax*float64(i)/4))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%s</text>`, padL+pw/2, height-2, xUnit)
	fmt.Fprintf(&b, `<text x="12" y="%g" font-size="10" transform="rotate(-90 12 %g)" text-anchor="middle">%s</text>`, padT+ph/2, padT+ph/2, template.HTMLEscapeString(yLabel))
	for i, l := range lines {
		y := l.Y
		if len(y) == 0 {
			continue
		}
		var pts strings.Builder
		for j, v := range y {
			if math.IsInf(v, 0) || math.IsNaN(v) {
				v = yMax
			}
			x := padL + pw*float64(j)/math.Max(1, float64(len(y)-1))
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, padT+ph-ph*math.Min(v, yMax)/yMax)
		}
		dash := ""
		if l.Dash {
			dash = ` stroke-dasharray="5,3"`
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.3"%s points="%s"/>`,
			template.HTMLEscapeString(l.Name), l.Color, dash, strings.TrimSpace(pts.String()))
		ly := padT + 12 + 14*float64(i)
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`, width-padR+8, width-padR+24, ly-4, ly-4, l.Color, dash)
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11">%s</text>`, width-padR+28, ly, template.HTMLEscapeString(l.Name))
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

var page = template.Must(template.New("r").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;margin:20px;max-width:960px}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th:first-child,td:first-child{text-align:left}</style>
</head><body>
<h1>{{.Title}}</h1>
<p>{{.Description}}. Latency target {{.Target}} s at p{{.Percentile}}. Demand (the SPEC RG demand curve) is, for each second, the fewest pods the oracle's sizing rule says meet the target at that second's true arrival rate; supply is Ready pods.</p>
{{range .Comparison.Oracles}}<p class="oracle">{{.Policy}} is the cheapest of {{.Runs}} simulated schedules {{if eq .Policy "oracle-pooled"}}with requests through a Service or a capacity-aware activator in front of the pods (as Knative's){{else}}with requests routed at random through a Service, as for qas and the HPA,{{end}} that {{if .Met}}meet{{else}}come closest to{{end}} the SLO (at most {{printf "%.2f" .BudgetPct}} % of requests over the target): requests through the {{.Routing}}, {{printf "%.3f" .Headroom}} × the true rate's {{.Window}} s centred mean.</p>
{{end}}
{{range .Charts}}<div>{{.}}</div>
{{end}}
<h2>Metrics</h2>
<table id="metrics"><tr><th>policy</th><th>requests</th><th>&gt;T %</th><th>minutes &gt;T %</th><th>p50 s</th><th>p95 s</th><th>p99 s</th><th>pod-s</th><th>CPU core-s</th><th>actions</th><th>resizes</th><th>migrations</th><th>oracle routing</th><th>θU %</th><th>θO %</th><th>τU %</th><th>τO %</th><th>instability %</th><th>jitter /min</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.Requests}}</td><td>{{printf "%.2f" .RequestsOverTargetPct}}</td><td>{{printf "%.1f" .MinutesOverTargetPct}}</td><td>{{printf "%.3f" .Latency.P50}}</td><td>{{printf "%.3f" .Latency.P95}}</td><td>{{printf "%.3f" .Latency.P99}}</td><td>{{printf "%.0f" .PodSeconds}}</td><td>{{printf "%.0f" .CPUCoreSeconds}}</td><td>{{.Actions}}</td><td>{{.Resizes}}</td><td>{{.Migrations}}</td><td>{{.Routing}}</td><td>{{printf "%.1f" .Spec.ThetaU}}</td><td>{{printf "%.1f" .Spec.ThetaO}}</td><td>{{printf "%.1f" .Spec.TauU}}</td><td>{{printf "%.1f" .Spec.TauO}}</td><td>{{printf "%.1f" .Spec.Instability}}</td><td>{{printf "%.2f" .Spec.Jitter}}</td></tr>
{{end}}</table>
</body></html>
`))

// Write renders the report.
func Write(w io.Writer, in Input) error {
	c := in.Comparison
	if c == nil || len(c.Results) == 0 {
		return fmt.Errorf("report: no results to show")
	}
	n := float64(len(in.Rates))
	rate := []series{{Name: "arrival rate", Color: "#333", Y: in.Rates}}
	reps := []series{{Name: "demand (oracle)", Color: "#000", Y: ints(c.Demand), Dash: true}}
	var cpu, lat []series
	for i, r := range c.Results {
		col := palette[i%len(palette)]
		hasForecast := false
		for _, f := range r.Forecast {
			if f > 0 {
				hasForecast = true
				break
			}
		}
		// An oracle's sizing rate is its schedule's, not a forecast.
		if hasForecast && c.Summaries[i].Routing == "" {
			rate = append(rate, series{Name: r.Policy + " sizing λ", Color: col, Y: r.Forecast, Dash: true})
		}
		reps = append(reps, series{Name: r.Policy, Color: col, Y: ints(r.Ready)})
		cpu = append(cpu, series{Name: r.Policy + " requested", Color: col, Y: r.CPURequestedPerSecond},
			series{Name: r.Policy + " used", Color: col, Y: r.CPUUsed, Dash: true})
		lat = append(lat, series{Name: r.Policy, Color: col, Y: r.MinuteLatency})
	}
	tl := make([]float64, len(c.Results[0].MinuteLatency))
	for i := range tl {
		tl[i] = in.Target
	}
	lat = append(lat, series{Name: "target", Color: "#000", Y: tl, Dash: true})
	charts := []template.HTML{
		chart("rate", "Arrival rate and sizing rate", "requests/s", "simulated seconds", n, 0, rate),
		chart("replicas", "Ready replicas against demand", "pods", "simulated seconds", n, 0, reps),
		chart("cpu", "CPU requested (the cost) and used, per policy", "cores", "simulated seconds", n, 0, cpu),
		chart("latency", fmt.Sprintf("Latency p%g per minute against the target (axis capped at 10× the target)", in.Percentile),
			"seconds", "simulated minutes", float64(len(tl)), 10*in.Target, lat),
		chart("actions", "Scaling actions (changes of desired replicas) per policy", "actions so far", "simulated seconds", n, 0, actionSeries(c)),
	}
	return page.Execute(w, struct {
		Input
		Charts []template.HTML
		Rows   []sim.Summary
	}{in, charts, c.Summaries})
}

func actionSeries(c *sim.Comparison) []series {
	var out []series
	for i, r := range c.Results {
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
		out = append(out, series{Name: r.Policy, Color: palette[i%len(palette)], Y: y})
	}
	return out
}
