package chart

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
)

// expiryFields are the fields, by measurement, that the pooled row shows of the
// fronts' expiries (issue #20, docs/model.md section 2b): the requests the fronts gave
// back unseen, split by what their senders did (requeued, relayed), the fronts' own
// expired and refused-full counts, and what the decider made of them: the backlog they
// added and their late share beside the measured one.
var expiryFields = map[string][]string{
	influx.Workload: {influx.FieldExpiredRequeuedRate, influx.FieldExpiredRelayedRate, "front_expired_rate",
		influx.FieldFrontRefusedFullRate},
	influx.Decision: {"backlog_expired", "expired_late_share", "measured_late_share"},
}

// TestDashboardsShowTheExpiryFields checks that the pooled row of the workload
// dashboard shows each expiry field, once, in a query of its measurement that filters
// on the chosen workload (and, for decisions, the chosen QueueAutoscaler), that
// expired_late_share is drawn beside measured_late_share, and that these fields are
// the schema's (a misspelling here would make the check vacuous).
func TestDashboardsShowTheExpiryFields(t *testing.T) {
	requireDeclared(t, expiryFields)
	queries, measurement, reads := fieldTargets(t, expiryFields, "Pooled data plane")
	shown := map[string]string{}
	for where, fs := range reads {
		q, m := queries[where], measurement[where]
		checkChosenFilter(t, where, q, m)
		if strings.Contains(q, "r._value > 0.0") {
			t.Errorf("%s draws only positive values: no expiry is a 0, not a gap", where)
		}
		for _, f := range fs {
			key := m + "." + f
			if prev, dup := shown[key]; dup {
				t.Errorf("%s and %s both show %s", where, prev, key)
			}
			shown[key] = where
		}
	}
	for m, fs := range expiryFields {
		for _, f := range fs {
			if _, ok := shown[m+"."+f]; !ok {
				t.Errorf("no panel of the pooled row shows %s.%s", m, f)
			}
		}
	}
	if a, b := shown[influx.Decision+".expired_late_share"], shown[influx.Decision+".measured_late_share"]; a != "" && a != b {
		t.Errorf("expired_late_share (%s) is not drawn beside measured_late_share (%s)", a, b)
	}
}

// expiryDecision is a decision of interval i whose expiry fields and measured late
// share differ from each other's and from those of other intervals and autoscalers
// (base). With uncompared, the closed loop did not compare the late shares this cycle
// (no modelled share), so the decider writes no measured_late_share.
func expiryDecision(at time.Time, base float64, i int, uncompared bool) decide.Decision {
	v := func(k int) float64 { return base + float64(100*k+i) + 0.25 }
	x := decide.Explanation{CurrentReplicas: 4, ArrivalRate: v(0), ForecastArrivalRate: v(0), ServiceTime: 0.05,
		Latency: 0.12, MeasuredLatency: 0.13, Target: 0.2, Lead: 20 * time.Second, Normalized: 0.6,
		FrontExpiredRate: v(1) / 100, FrontRefusedRate: v(2) / 100, BacklogExpired: v(3),
		ExpiredLateShare: v(4) / 1e5, MeasuredLateShare: v(5) / 1e4, ModelledLateShare: v(6) / 1e4,
		Backlog: v(3) + 1, Reason: "backlog: the fronts' expiries"}
	if uncompared {
		x.ModelledLateShare = 0
	}
	return decide.Decision{Time: at, Action: decide.ActionNone, DesiredReplicas: 4, Explanation: x}
}

// TestExpiryPanelsShowWhatQASWrote writes, with the collector's and the decider's own
// point builders and the project's writer, ten one-minute intervals to a real InfluxDB
// 1.8: two pooled workloads (web, api), each with its QueueAutoscaler, a second
// QueueAutoscaler naming web, and a workload that does not pool (plain) whose decisions
// carry no expiry. It runs every query of the pooled row that reads an expiry field as
// Grafana expands it for web and its QueueAutoscaler: each field's series is exactly
// the values written for them, in time order (measured_late_share only in the cycles
// the loop compared), and nothing of another workload or QueueAutoscaler. For plain
// the qas_workload queries show nothing and the decision queries the zeros the decider
// wrote. The same query with the field's name misspelt shows nothing, so a misspelt
// field cannot pass.
func TestExpiryPanelsShowWhatQASWrote(t *testing.T) {
	queries, measurement, reads := fieldTargets(t, expiryFields, "Pooled data plane")
	if len(queries) == 0 {
		t.Fatal("no panel of the pooled row reads an expiry field")
	}
	// Points at the middle of each minute: with a window period of 1m each window holds
	// exactly one.
	start := time.Now().Truncate(time.Minute).Add(-12*time.Minute + 30*time.Second)
	const uncompared = 4
	wrote := map[string][]float64{}      // measurement.field of web (its QueueAutoscaler web) → values in time order
	wrotePlain := map[string][]float64{} // the same of plain
	var pts []*write.Point
	for i := range 10 {
		at := start.Add(time.Duration(i) * time.Minute)
		web := pipeline.WorkloadPoint("shop", "web", pooledMetrics(at, 0, i, false))
		webDecision := store.DecisionPoint("shop", "web", "web", expiryDecision(at, 0, i, i == uncompared), false)
		plain := store.DecisionPoint("shop", "plain", "plain", decide.Decision{Time: at, Action: decide.ActionNone, DesiredReplicas: 2,
			Explanation: decide.Explanation{CurrentReplicas: 2, ArrivalRate: 10, ServiceTime: 0.05, Target: 0.2,
				MeasuredLateShare: 0.01, ModelledLateShare: 0.02, Reason: "modelled latency within tolerance"}}, false)
		recordFields(wrote, web)
		recordFields(wrote, webDecision)
		recordFields(wrotePlain, plain)
		pts = append(pts, web, webDecision, plain,
			pipeline.WorkloadPoint("shop", "api", pooledMetrics(at, 5000, i, false)),
			store.DecisionPoint("shop", "api", "api", expiryDecision(at, 5000, i, false), false),
			// Another QueueAutoscaler naming web (a migration between two): the
			// panels show the chosen one's decisions only.
			store.DecisionPoint("shop", "web-canary", "web", expiryDecision(at, 9000, i, false), false),
			pipeline.WorkloadPoint("shop", "plain", aggregate.Metrics{Time: at, ArrivalRate: 10, ServiceMean: 0.05, Pods: 2}))
	}
	db, ctx := influxWith(t, pts)
	for m, fs := range expiryFields {
		for _, f := range fs {
			want := 10
			if f == "measured_late_share" {
				want = 9 // not in the cycle the loop did not compare
			}
			if n := len(wrote[m+"."+f]); n != want {
				t.Fatalf("QAS wrote %d values of %s.%s for web, want %d", n, m, f, want)
			}
		}
	}

	for _, where := range slices.Sorted(maps.Keys(queries)) {
		q, m := queries[where], measurement[where]
		got, ok := panelSeries(t, ctx, db, where, q, "web")
		if !ok {
			continue
		}
		for _, f := range reads[where] {
			if len(wrote[m+"."+f]) == 0 {
				t.Fatalf("%s reads %s.%s, which QAS did not write", where, m, f)
			}
		}
		checkPanelShows(t, ctx, db, where, q, reads[where], got, func(f string) []float64 { return wrote[m+"."+f] })

		// The workload that does not pool: no pooled qas_workload field, and the
		// decisions' zeros (and its measured late share) as the decider wrote them.
		got, ok = panelSeries(t, ctx, db, where+" for plain", q, "plain")
		if !ok {
			continue
		}
		for _, f := range reads[where] {
			want := wrotePlain[m+"."+f]
			if m == influx.Decision && f != "measured_late_share" && !slices.Equal(want, make([]float64, 10)) {
				t.Fatalf("the decider wrote %s %v for a workload that does not pool, want ten 0s", f, want)
			}
			if !equalFloats(got[f], want) {
				t.Errorf("%s for plain: %s shows %v, QAS wrote %v", where, f, got[f], want)
			}
		}
	}
}
