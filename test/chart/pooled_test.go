package chart

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"go.uber.org/zap/zaptest"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// pooledWorkloadFields returns the qas_workload fields the collector writes only for a
// pooled workload (routing: pooled, issue #20): those of its point builder for a pooled
// interval that a non-pooled interval lacks.
func pooledWorkloadFields(t *testing.T) []string {
	t.Helper()
	fields := func(pt *write.Point) map[string]bool {
		out := map[string]bool{}
		for _, f := range pt.FieldList() {
			out[f.Key] = true
		}
		return out
	}
	plain := fields(pipeline.WorkloadPoint("ns", "w", aggregate.Metrics{Time: time.Now()}))
	var pooled []string
	for f := range fields(pipeline.WorkloadPoint("ns", "w", aggregate.Metrics{Time: time.Now(), Pooled: true})) {
		if !plain[f] {
			pooled = append(pooled, f)
		}
	}
	slices.Sort(pooled)
	if len(pooled) < 10 {
		t.Fatalf("the collector writes only %d pooled fields %v: has the pooled point changed?", len(pooled), pooled)
	}
	return pooled
}

// pooledPanelTargets returns the queries of the workload dashboard's panels that read a
// pooled field, by where they are, and the pooled fields each reads.
func pooledPanelTargets(t *testing.T) (queries map[string]string, reads map[string][]string) {
	t.Helper()
	d, ok := loadDashboards(t)["qas-workload.json"]
	if !ok {
		t.Fatal("no qas-workload.json")
	}
	pooled := pooledWorkloadFields(t)
	queries, reads = map[string]string{}, map[string][]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			refs, err := parseFlux(tg.Query)
			if err != nil || !slices.Equal(refs.measurements, []string{influx.Workload}) {
				continue
			}
			var fs []string
			for _, f := range refs.fields {
				if slices.Contains(pooled, f) {
					fs = append(fs, f)
				}
			}
			if len(fs) == 0 {
				continue
			}
			if len(fs) != len(refs.fields) {
				t.Errorf("panel %d %q %s mixes pooled fields %v with others %v: a non-pooled workload would show a half panel",
					p.ID, p.Title, tg.RefID, fs, refs.fields)
			}
			where := fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID)
			queries[where], reads[where] = tg.Query, fs
		}
	}
	return queries, reads
}

// TestDashboardsShowThePooledFields checks that the workload dashboard shows every field
// the collector writes for a pooled workload (the overflow share and outcomes, pulls,
// the drain's pushes, the front's queue, wait, refusals, expiries and what the senders
// did with them, failures, the overflow decision time), each
// field once, in a query of qas_workload that filters on the chosen workload.
func TestDashboardsShowThePooledFields(t *testing.T) {
	queries, reads := pooledPanelTargets(t)
	shown := map[string]string{}
	for where, fs := range reads {
		q := queries[where]
		if !strings.Contains(q, `r.namespace == "${namespace}" and r.workload == "${workload}"`) {
			t.Errorf("%s does not filter on the chosen namespace and workload:\n%s", where, q)
		}
		for _, f := range fs {
			if prev, dup := shown[f]; dup {
				t.Errorf("%s and %s both show %s", where, prev, f)
			}
			shown[f] = where
		}
	}
	for _, f := range pooledWorkloadFields(t) {
		if _, ok := shown[f]; !ok {
			t.Errorf("no panel of qas-workload.json shows the pooled field %s", f)
		}
	}
}

// pooledMetrics is one pooled interval whose fields all differ from each other and
// from those of other intervals (i) and workloads (base), so that a panel showing the
// wrong field, interval or workload shows a wrong number. With idle, nothing went
// through the front: the histograms observed nothing and their percentiles are 0.
func pooledMetrics(at time.Time, base float64, i int, idle bool) aggregate.Metrics {
	v := func(k int) float64 { return base + float64(100*k+i) + 0.25 }
	m := aggregate.Metrics{Time: at, Pooled: true, ArrivalRate: v(0), ServiceMean: 0.05, ServiceSCV: 1, InFlightMean: 2,
		LatencyP50: 0.04, LatencyP95: 0.1, LatencyP99: 0.2, Pods: 3,
		OverflowRate: v(1), OverflowRefusedRate: v(2), OverflowFailedRate: v(3), PulledRate: v(4), FrontFailureRate: v(5),
		OverflowShare:    (base/1000 + float64(i) + 1) / 100,
		FrontQueueLength: v(6), FrontWaitingPulls: v(7), FrontAcceptedRate: v(8), FrontRefusedFullRate: v(9),
		FrontUnauthenticatedRate: v(10), FrontExpiredRate: v(11), Fronts: int(base/1000) + i + 1,
		OverflowDecisionP50: v(12) / 1e6, OverflowDecisionP95: v(13) / 1e6,
		FrontQueueWaitP50: v(14) / 1e3, FrontQueueWaitP95: v(15) / 1e3,
		DrainPushedRate: v(16), DrainKeptRate: v(17), ExpiredRequeuedRate: v(18), ExpiredRelayedRate: v(19)}
	if idle {
		m.OverflowDecisionP50, m.OverflowDecisionP95, m.FrontQueueWaitP50, m.FrontQueueWaitP95 = 0, 0, 0, 0
	}
	return m
}

// TestPooledPanelsShowWhatTheCollectorWrote writes, with the collector's own point
// builder and writer, ten one-minute intervals of two pooled workloads and one that
// does not pool to a real InfluxDB 1.8, and runs every pooled panel's query as Grafana
// expands it: each field's series is exactly the values written for the chosen
// workload, in time order, except that an interval whose histograms observed nothing
// draws no percentile (not a 0 s decision or wait); the workload that does not pool
// shows no data and no error.
func TestPooledPanelsShowWhatTheCollectorWrote(t *testing.T) {
	queries, reads := pooledPanelTargets(t)
	if len(queries) == 0 {
		t.Fatal("no pooled panel")
	}
	// Points at the middle of each minute: with a window period of 1m each window holds
	// exactly one, as Grafana's aggregateWindow would draw it at its own resolution.
	start := time.Now().Truncate(time.Minute).Add(-12*time.Minute + 30*time.Second)
	const idle = 3
	wrote := map[string][]float64{} // field of workload web → values in time order
	var pts []*write.Point
	for i := range 10 {
		at := start.Add(time.Duration(i) * time.Minute)
		web := pipeline.WorkloadPoint("shop", "web", pooledMetrics(at, 0, i, i == idle))
		for _, f := range web.FieldList() {
			x, ok := fieldFloat(f.Value)
			if !ok {
				t.Fatalf("field %s of type %T", f.Key, f.Value)
			}
			wrote[f.Key] = append(wrote[f.Key], x)
		}
		pts = append(pts, web,
			pipeline.WorkloadPoint("shop", "api", pooledMetrics(at, 5000, i, false)),
			pipeline.WorkloadPoint("shop", "plain", aggregate.Metrics{Time: at, ArrivalRate: 10, ServiceMean: 0.05, Pods: 2}))
	}
	db, ctx := influxWith(t, pts)

	vars := map[string][]string{"bucket": one(influxtest.Bucket), "namespace": one("shop"), "workload": one("web")}
	plain := maps.Clone(vars)
	plain["workload"] = one("plain")
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		q := grafanaExpandRange(queries[where], vars, "-1h", "now()", "1m")
		out, err := fluxQuery(ctx, db.URL, q)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		got, others := map[string][]float64{}, map[string]int{}
		for _, frame := range fluxFrames(t, out) {
			for _, row := range frame {
				if row["workload"] != "web" || row["namespace"] != "shop" {
					others[row["namespace"]+"/"+row["workload"]]++
					continue
				}
				x, err := strconv.ParseFloat(row["_value"], 64)
				if err != nil {
					t.Fatalf("%s: _value of %v: %v", where, row, err)
				}
				got[row["_field"]] = append(got[row["_field"]], x)
			}
		}
		if len(others) > 0 {
			t.Errorf("%s: shows rows of other workloads %v", where, others)
		}
		for _, f := range reads[where] {
			want := wrote[f]
			if len(want) != 10 {
				t.Fatalf("the collector wrote %d values of %s, want 10", len(want), f)
			}
			if strings.Contains(f, "_p50_") || strings.Contains(f, "_p95_") {
				want = slices.Delete(slices.Clone(want), idle, idle+1)
			}
			if !equalFloats(got[f], want) {
				t.Errorf("%s: %s shows %v, the collector wrote %v\n%s", where, f, got[f], want, q)
			}
		}
		if extra := slices.DeleteFunc(slices.Collect(maps.Keys(got)), func(f string) bool { return slices.Contains(reads[where], f) }); len(extra) > 0 {
			t.Errorf("%s: shows fields %v it does not name", where, extra)
		}

		out, err = fluxQuery(ctx, db.URL, grafanaExpandRange(queries[where], plain, "-1h", "now()", "1m"))
		if err != nil {
			t.Errorf("%s for a workload that does not pool: %v", where, err)
		} else if n := dataRows(out); n != 0 {
			t.Errorf("%s for a workload that does not pool: %d rows\n%s", where, n, out)
		}
	}
}

// influxWith starts a real InfluxDB and writes pts to it through the project's
// writer, failing unless every point was written; ctx bounds the test's queries.
func influxWith(t *testing.T, pts []*write.Point) (*influxtest.Server, context.Context) {
	t.Helper()
	db := influxtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket}, nil, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(pts...)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if written, _, dropped := w.Counts(); written != float64(len(pts)) || dropped != 0 {
		t.Fatalf("wrote %v of %d points, dropped %v", written, len(pts), dropped)
	}
	return db, ctx
}

// fieldFloat is a numeric field's value as written (a float or an integer);
// false for another type.
func fieldFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// equalFloats compares as InfluxDB returns a float64 (its shortest representation) and
// the mean of one value: equal to a relative 1e-12.
func equalFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Abs(x-y) <= 1e-12*math.Max(math.Abs(x), math.Abs(y)) })
}

// withPooling adds to m the pooled data plane's fields of an interval at the given load
// (≥ 0: the share of arrivals that overflowed, as a fraction of ten), so that the tests
// that run every panel on real data have data for the pooled panels too.
func withPooling(m aggregate.Metrics, load float64) aggregate.Metrics {
	m.Pooled, m.Fronts = true, 2
	m.OverflowShare = math.Min(1, load/10)
	m.OverflowRate = m.OverflowShare * m.ArrivalRate
	m.OverflowRefusedRate, m.OverflowFailedRate = m.OverflowRate/20, m.OverflowRate/50
	m.PulledRate, m.FrontAcceptedRate = m.OverflowRate, m.OverflowRate
	m.FrontFailureRate, m.FrontRefusedFullRate, m.FrontUnauthenticatedRate, m.FrontExpiredRate = 0.01, m.OverflowRefusedRate, 0.02, 0.03
	m.FrontQueueLength, m.FrontWaitingPulls = math.Round(5*load), math.Round(3*(2-min(load, 2)))
	m.OverflowDecisionP50, m.OverflowDecisionP95 = 0.0004, 0.0009
	m.FrontQueueWaitP50, m.FrontQueueWaitP95 = 0.01*load, 0.03*load
	// Pods drain now and then (a rollout, a scale-down), and the front gives back
	// the odd request it held too long.
	m.DrainPushedRate, m.DrainKeptRate = m.OverflowRate/40, m.OverflowRate/200
	m.ExpiredRequeuedRate, m.ExpiredRelayedRate = m.FrontExpiredRate*0.8, m.FrontExpiredRate*0.2
	return m
}
