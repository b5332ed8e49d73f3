package chart

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// sizingFields are the fields, by measurement, that say why QAS sized as it did
// (issue #15, docs/model.md section 2c): the arrival rate's variability from second to
// second (measured and as the engine averaged it), λ's level and its window, and the
// closed loop's late shares, its correction and the percentile it sized for.
var sizingFields = map[string][]string{
	influx.Workload: {influx.FieldArrivalRateCV2},
	influx.Decision: {"rate_cv2", "arrival_rate_level", "level_window_seconds",
		"measured_late_share", "modelled_late_share", "transient_late_share", "latency_bias", "effective_percentile"},
}

// drawnWhenPositive are the sizing fields the dashboard draws only when above 0: for
// them 0 means "not used" (the level is the cycle's λ; no percentile target), not a
// value, and a 0 on the λ panel would read as no traffic.
var drawnWhenPositive = []string{"arrival_rate_level", "level_window_seconds", "effective_percentile"}

// sizingTargets returns the queries of the workload dashboard's panels that read a
// sizing field, by where they are, with the measurement and the fields each reads.
func sizingTargets(t *testing.T) (queries map[string]string, measurement map[string]string, reads map[string][]string) {
	t.Helper()
	d, ok := loadDashboards(t)["qas-workload.json"]
	if !ok {
		t.Fatal("no qas-workload.json")
	}
	queries, measurement, reads = map[string]string{}, map[string]string{}, map[string][]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			refs, err := parseFlux(tg.Query)
			if err != nil || len(refs.measurements) != 1 {
				continue
			}
			m := refs.measurements[0]
			if !slices.ContainsFunc(refs.fields, func(f string) bool { return slices.Contains(sizingFields[m], f) }) {
				continue
			}
			where := fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID)
			queries[where], measurement[where], reads[where] = tg.Query, m, refs.fields
		}
	}
	return queries, measurement, reads
}

// TestDashboardsShowTheSizingFields checks that the workload dashboard shows each field
// that says why QAS sized as it did, once, in a query of its measurement that filters
// on the chosen workload (and, for decisions, the chosen QueueAutoscaler), and that
// these fields are the schema's (a misspelling here would make the check vacuous).
func TestDashboardsShowTheSizingFields(t *testing.T) {
	for m, fs := range sizingFields {
		decl, ok := influx.Lookup(m)
		if !ok {
			t.Fatalf("measurement %s is not in internal/influx.Schema", m)
		}
		for _, f := range fs {
			if !decl.Declares(f) {
				t.Errorf("%s.%s is not declared in internal/influx.Schema", m, f)
			}
		}
	}
	queries, measurement, reads := sizingTargets(t)
	shown := map[string]string{}
	for where, fs := range reads {
		q, m := queries[where], measurement[where]
		filter := `r.namespace == "${namespace}" and r.workload == "${workload}"`
		if m == influx.Decision {
			filter += ` and r.queueautoscaler == "${queueautoscaler}"`
		}
		if !strings.Contains(q, filter) {
			t.Errorf("%s does not filter on %s:\n%s", where, filter, q)
		}
		// The pooled row draws measured_late_share again, beside the fronts' expiries'
		// late share that floors it (TestDashboardsShowTheExpiryFields checks it there).
		besideExpiries := m == influx.Decision && slices.Contains(fs, "expired_late_share")
		for _, f := range fs {
			key := m + "." + f
			if prev, dup := shown[key]; dup && !besideExpiries {
				t.Errorf("%s and %s both show %s", where, prev, key)
			}
			if !besideExpiries {
				shown[key] = where
			}
			positive := strings.Contains(q, "r._value > 0.0")
			if slices.Contains(drawnWhenPositive, f) != positive {
				t.Errorf("%s: %s drawn only when positive: %v, want %v", where, f, positive, !positive)
			}
		}
	}
	for m, fs := range sizingFields {
		for _, f := range fs {
			if _, ok := shown[m+"."+f]; !ok {
				t.Errorf("no panel of qas-workload.json shows %s.%s", m, f)
			}
		}
	}
}

// sizingCounts is a series of per-second arrival counts for interval i of a workload
// (base) whose cv² differs from every other interval's and workload's: constant
// counts (i = 0) measure a slightly negative cv² (the estimate is unbiased), and
// unknown seconds (idle) none at all.
func sizingCounts(base int64, i int, idle bool) []int64 {
	counts := make([]int64, 32)
	for s := range counts {
		switch {
		case idle:
			counts[s] = ratevar.Missing
		case s%2 == 1:
			counts[s] = base + int64(3*i)
		default:
			counts[s] = base
		}
	}
	return counts
}

// sizingWorkload is the collector's workload metrics of interval i with the arrival
// rate's variability of sizingCounts.
func sizingWorkload(t *testing.T, at time.Time, base int64, i int, idle bool) aggregate.Metrics {
	t.Helper()
	sums, err := ratevar.Of(sizingCounts(base, i, idle))
	if err != nil {
		t.Fatal(err)
	}
	m := aggregate.Metrics{Time: at, ArrivalRate: float64(base), ServiceMean: 0.05, ServiceSCV: 1, Pods: 2, ArrivalRateSums: sums}
	if m.ArrivalRateCV2Valid() {
		if m.ArrivalRateCV2, err = ratevar.CV2(sums); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// sizingDecision is a decision of interval i whose sizing fields all differ from each
// other's and from those of other intervals and autoscalers (base). With plain, the
// rate was too steady for the mixture (no level: 0) and the target a mean latency (no
// percentile: 0), so neither is drawn.
func sizingDecision(at time.Time, base float64, i int, plain bool) decide.Decision {
	v := func(k int) float64 { return base + float64(100*k+i) + 0.25 }
	x := decide.Explanation{CurrentReplicas: 4, ArrivalRate: v(0), ForecastArrivalRate: v(1), ServiceTime: 0.05,
		Latency: 0.12, MeasuredLatency: 0.13, Target: 0.2, Lead: 20 * time.Second, Normalized: 0.6,
		RateCV2: v(2) / 1e3, ArrivalRateLevel: v(3), LevelWindow: time.Duration(v(4)) * time.Second,
		MeasuredLateShare: v(5) / 1e4, ModelledLateShare: v(6) / 1e4, TransientLateShare: v(7) / 1e5,
		LatencyBias: v(8) / 1e3, EffectivePercentile: 95 + v(9)/1e4, Reason: "modelled latency within tolerance"}
	if plain {
		x.ArrivalRateLevel, x.LevelWindow, x.EffectivePercentile = 0, 0, 0
	}
	return decide.Decision{Time: at, Action: decide.ActionNone, DesiredReplicas: 4, Explanation: x}
}

// TestSizingPanelsShowWhatQASWrote writes, with the collector's and the decider's own
// point builders and the project's writer, ten one-minute intervals of what says why
// QAS sized as it did to a real InfluxDB 1.8 (workloads web and api, each with its
// QueueAutoscaler, and a second QueueAutoscaler naming web), and runs every panel query
// that reads a sizing field as Grafana expands it for web and its QueueAutoscaler: each
// field's series is exactly the values written for them, in time order, except that an
// interval without a measured cv² draws no cv² and a level, level window or percentile
// of 0 (not used) draws no point. The same query with the field's name misspelt shows
// nothing, so a misspelling cannot pass.
func TestSizingPanelsShowWhatQASWrote(t *testing.T) {
	queries, measurement, reads := sizingTargets(t)
	if len(queries) == 0 {
		t.Fatal("no panel reads a sizing field")
	}
	// Points at the middle of each minute: with a window period of 1m each window holds
	// exactly one.
	start := time.Now().Truncate(time.Minute).Add(-12*time.Minute + 30*time.Second)
	const idle, plain = 3, 6
	wrote := map[string][]float64{} // measurement.field of web (its QueueAutoscaler web) → values in time order
	record := func(pt *write.Point) {
		for _, f := range pt.FieldList() {
			x, ok := fieldFloat(f.Value)
			if !ok {
				continue // the reason, dry_run
			}
			key := pt.Name() + "." + f.Key
			wrote[key] = append(wrote[key], x)
		}
	}
	var pts []*write.Point
	for i := range 10 {
		at := start.Add(time.Duration(i) * time.Minute)
		web := pipeline.WorkloadPoint("shop", "web", sizingWorkload(t, at, 40, i, i == idle))
		webDecision := store.DecisionPoint("shop", "web", "web", sizingDecision(at, 0, i, i == plain), false)
		record(web)
		record(webDecision)
		pts = append(pts, web, webDecision,
			pipeline.WorkloadPoint("shop", "api", sizingWorkload(t, at, 900, i, false)),
			store.DecisionPoint("shop", "api", "api", sizingDecision(at, 5000, i, false), false),
			// Another QueueAutoscaler naming web (a migration between two): the
			// panels show the chosen one's decisions only.
			store.DecisionPoint("shop", "web-canary", "web", sizingDecision(at, 9000, i, false), false))
	}
	db, ctx := influxWith(t, pts)
	if n := len(wrote[influx.Workload+"."+influx.FieldArrivalRateCV2]); n != 9 {
		t.Fatalf("the collector wrote %d values of arrival_rate_cv2, want 9 (none for the interval without pairs)", n)
	}
	if cv2 := wrote[influx.Workload+"."+influx.FieldArrivalRateCV2][0]; cv2 >= 0 {
		t.Fatalf("constant counts measured cv² %v, want slightly negative", cv2)
	}

	vars := map[string][]string{"bucket": one(influxtest.Bucket), "namespace": one("shop"), "workload": one("web"), "queueautoscaler": one("web")}
	run := func(where, q string) (map[string][]float64, bool) {
		out, err := fluxQuery(ctx, db.URL, grafanaExpandRange(q, vars, "-1h", "now()", "1m"))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			return nil, false
		}
		got := map[string][]float64{}
		for _, frame := range fluxFrames(t, out) {
			for _, row := range frame {
				if wl, ok := row["workload"]; ok && wl != "web" {
					t.Errorf("%s: shows a row of workload %s", where, wl)
				}
				x, err := strconv.ParseFloat(row["_value"], 64)
				if err != nil {
					t.Fatalf("%s: _value of %v: %v", where, row, err)
				}
				got[row["_field"]] = append(got[row["_field"]], x)
			}
		}
		return got, true
	}
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		got, ok := run(where, queries[where])
		if !ok {
			continue
		}
		for _, f := range reads[where] {
			want := wrote[measurement[where]+"."+f]
			if len(want) == 0 {
				t.Fatalf("%s reads %s.%s, which QAS did not write", where, measurement[where], f)
			}
			if slices.Contains(drawnWhenPositive, f) {
				want = slices.DeleteFunc(slices.Clone(want), func(x float64) bool { return x <= 0 })
				if len(want) != 9 {
					t.Fatalf("%s: %d positive values written, want 9 (none in the plain interval)", f, len(want))
				}
			}
			if !equalFloats(got[f], want) {
				t.Errorf("%s: %s shows %v, QAS wrote %v\n%s", where, f, got[f], want, queries[where])
			}

			misspelt := strings.ReplaceAll(queries[where], `r._field == "`+f+`"`, `r._field == "`+f+`s"`)
			if misspelt == queries[where] {
				t.Fatalf("%s: no r._field == %q to misspell", where, f)
			}
			if bad, ok := run(where+" misspelt", misspelt); ok && len(bad[f])+len(bad[f+"s"]) > 0 {
				t.Errorf("%s: with %s misspelt the panel still shows %v", where, f, bad)
			}
		}
		if extra := slices.DeleteFunc(slices.Collect(maps.Keys(got)), func(f string) bool { return slices.Contains(reads[where], f) }); len(extra) > 0 {
			t.Errorf("%s: shows fields %v it does not name", where, extra)
		}
	}
}
