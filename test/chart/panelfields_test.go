package chart

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// The panel tests that check a set of fields, by measurement, is shown on the workload
// dashboard (the sizing row's, the pooled row's expiries) share these helpers.

// requireDeclared fails unless every field of fields is declared in
// internal/influx.Schema: a misspelling in a test's list would make its checks vacuous.
func requireDeclared(t *testing.T, fields map[string][]string) {
	t.Helper()
	for m, fs := range fields {
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
}

// fieldTargets returns the queries of the workload dashboard's panels that read one of
// fields, by where they are, with the measurement and the fields each reads. With row
// set, only the panels of the row whose title starts with it (below its row panel and
// above the next row, if any).
func fieldTargets(t *testing.T, fields map[string][]string, row string) (queries, measurement map[string]string, reads map[string][]string) {
	t.Helper()
	d, ok := loadDashboards(t)["qas-workload.json"]
	if !ok {
		t.Fatal("no qas-workload.json")
	}
	ps := allPanels(d.Panels)
	top, bottom := -1, int(^uint(0)>>1)
	if row != "" {
		for _, p := range ps {
			if p.Type == "row" && strings.HasPrefix(p.Title, row) {
				top = p.GridPos.Y
			}
		}
		if top < 0 {
			t.Fatalf("no row %q in qas-workload.json", row)
		}
		for _, p := range ps {
			if p.Type == "row" && p.GridPos.Y > top {
				bottom = min(bottom, p.GridPos.Y)
			}
		}
	}
	queries, measurement, reads = map[string]string{}, map[string]string{}, map[string][]string{}
	for _, p := range ps {
		if row != "" && (p.Type == "row" || p.GridPos.Y <= top || p.GridPos.Y >= bottom) {
			continue
		}
		for _, tg := range p.Targets {
			refs, err := parseFlux(tg.Query)
			if err != nil || len(refs.measurements) != 1 {
				continue
			}
			m := refs.measurements[0]
			if !slices.ContainsFunc(refs.fields, func(f string) bool { return slices.Contains(fields[m], f) }) {
				continue
			}
			where := fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID)
			queries[where], measurement[where], reads[where] = tg.Query, m, refs.fields
		}
	}
	return queries, measurement, reads
}

// checkChosenFilter fails unless q, a query of measurement m, filters on the chosen
// namespace and workload and, for decisions, the chosen QueueAutoscaler.
func checkChosenFilter(t *testing.T, where, q, m string) {
	t.Helper()
	filter := `r.namespace == "${namespace}" and r.workload == "${workload}"`
	if m == influx.Decision {
		filter += ` and r.queueautoscaler == "${queueautoscaler}"`
	}
	if !strings.Contains(q, filter) {
		t.Errorf("%s does not filter on %s:\n%s", where, filter, q)
	}
}

// recordFields appends pt's numeric fields (not the reason or dry_run) to into, keyed
// measurement.field, in the order the points are written.
func recordFields(into map[string][]float64, pt *write.Point) {
	for _, f := range pt.FieldList() {
		if x, ok := fieldFloat(f.Value); ok {
			into[pt.Name()+"."+f.Key] = append(into[pt.Name()+"."+f.Key], x)
		}
	}
}

// panelSeries runs q, over the last hour at a 1m window, as Grafana expands it for
// workload in namespace shop and the QueueAutoscaler of the same name, and returns each
// field's values in time order. A row of another namespace, workload or QueueAutoscaler
// fails the test; false when the query failed (reported).
func panelSeries(t *testing.T, ctx context.Context, db *influxtest.Server, where, q, workload string) (map[string][]float64, bool) {
	t.Helper()
	vars := map[string][]string{"bucket": one(influxtest.Bucket), "namespace": one("shop"), "workload": one(workload),
		"queueautoscaler": one(workload)}
	out, err := fluxQuery(ctx, db.URL, grafanaExpandRange(q, vars, "-1h", "now()", "1m"))
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil, false
	}
	got := map[string][]float64{}
	for _, frame := range fluxFrames(t, out) {
		for _, row := range frame {
			for tag, want := range map[string]string{"namespace": "shop", "workload": workload, "queueautoscaler": workload} {
				if v, ok := row[tag]; ok && v != want {
					t.Errorf("%s: shows a row of %s %s", where, tag, v)
				}
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

// checkPanelShows fails unless got, what the panel query q (where) showed for the
// chosen workload, is exactly want for each field it reads (want returns the values
// written for a field), names no other field, and shows nothing of a field once its
// name is misspelt in q, so that a misspelling cannot pass.
func checkPanelShows(t *testing.T, ctx context.Context, db *influxtest.Server, where, q string, reads []string, got map[string][]float64, want func(f string) []float64) {
	t.Helper()
	for _, f := range reads {
		w := want(f)
		if !equalFloats(got[f], w) {
			t.Errorf("%s: %s shows %v, QAS wrote %v\n%s", where, f, got[f], w, q)
		}
		misspelt := strings.ReplaceAll(q, `r._field == "`+f+`"`, `r._field == "`+f+`s"`)
		if misspelt == q {
			t.Fatalf("%s: no r._field == %q to misspell", where, f)
		}
		if bad, ok := panelSeries(t, ctx, db, where+" misspelt", misspelt, "web"); ok && len(bad[f])+len(bad[f+"s"]) > 0 {
			t.Errorf("%s: with %s misspelt the panel still shows %v", where, f, bad)
		}
	}
	if extra := slices.DeleteFunc(slices.Collect(maps.Keys(got)), func(f string) bool { return slices.Contains(reads, f) }); len(extra) > 0 {
		t.Errorf("%s: shows fields %v it does not name", where, extra)
	}
}
