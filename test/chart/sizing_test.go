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
	"github.com/qas-dev/qas/internal/ratevar"
)

// sizingFields are the fields, by measurement, that say why QAS sized as it did
// (issue #15, docs/model.md section 2c): the arrival rate's variability from second to
// second (measured and as the engine averaged it), λ's level and its window, the
// closed loop's late shares, its correction and the percentile it sized for, and the
// jump floor: its pods and their late share over the history's jumps against its
// budget, and the band within which the current pods' share holds the floor back;
// and the scale-down's margin: the late share at the pods it keeps, the last hour's
// jumps and the pods they alone kept (round thirty), and the jumps from a like depth
// and the pods they kept (round thirty-one).
var sizingFields = map[string][]string{
	influx.Workload: {influx.FieldArrivalRateCV2},
	influx.Decision: {"rate_cv2", "arrival_rate_level", "level_window_seconds",
		"measured_late_share", "modelled_late_share", "transient_late_share", "recent_late_share", "spent_late_share",
		"steady_late_share", "latency_bias", "effective_percentile",
		"jump_replicas", "jump_late_share", "jump_budget", "jump_band", "jump_current_late_share",
		"down_late_share", "recent_jumps", "recent_margin_replicas", "depth_jumps", "depth_margin_replicas"},
}

// drawnWhenPositive are the sizing fields the dashboard draws only when above 0: for
// them 0 means "not used" (the level is the cycle's λ; no percentile target; no
// scale-down weighed; the last hour not read apart, or it or the depth kept no more), not a value,
// and a 0 on the λ panel would read as no traffic.
var drawnWhenPositive = []string{"arrival_rate_level", "level_window_seconds", "effective_percentile",
	"down_late_share", "recent_jumps", "recent_margin_replicas", "depth_jumps", "depth_margin_replicas"}

// TestDashboardsShowTheSizingFields checks that the workload dashboard shows each field
// that says why QAS sized as it did, once, in a query of its measurement that filters
// on the chosen workload (and, for decisions, the chosen QueueAutoscaler), and that
// these fields are the schema's (a misspelling here would make the check vacuous).
func TestDashboardsShowTheSizingFields(t *testing.T) {
	requireDeclared(t, sizingFields)
	queries, measurement, reads := fieldTargets(t, sizingFields, "")
	shown := map[string]string{}
	for where, fs := range reads {
		q, m := queries[where], measurement[where]
		checkChosenFilter(t, where, q, m)
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
// percentile: 0), so neither is drawn; nor has a mean target a jump floor, whose
// fields are then 0, drawn as such, or a margin over the jumps, whose fields are 0
// and not drawn.
func sizingDecision(at time.Time, base float64, i int, plain bool) decide.Decision {
	v := func(k int) float64 { return base + float64(100*k+i) + 0.25 }
	x := decide.Explanation{CurrentReplicas: 4, ArrivalRate: v(0), ForecastArrivalRate: v(1), ServiceTime: 0.05,
		Latency: 0.12, MeasuredLatency: 0.13, Target: 0.2, Lead: 20 * time.Second, Normalized: 0.6,
		RateCV2: v(2) / 1e3, ArrivalRateLevel: v(3), LevelWindow: time.Duration(v(4)) * time.Second,
		MeasuredLateShare: v(5) / 1e4, ModelledLateShare: v(6) / 1e4, SteadyLateShare: v(10) / 1e4, TransientLateShare: v(7) / 1e5,
		LatencyBias: v(8) / 1e3, EffectivePercentile: 95 + v(9)/1e4,
		JumpReplicas: int32(v(11)), JumpLateShare: v(12) / 1e5, JumpBudget: v(13) / 1e5, JumpBand: v(14) / 1e6,
		JumpCurrentLateShare: v(15) / 1e5, DownLateShare: v(16) / 1e5, RecentJumps: int(v(17)),
		RecentMarginReplicas: int32(v(18)), DepthJumps: int(v(19)), DepthMarginReplicas: int32(v(20)),
		Reason: "modelled latency within tolerance"}
	if plain {
		x.ArrivalRateLevel, x.LevelWindow, x.EffectivePercentile = 0, 0, 0
		x.JumpReplicas, x.JumpLateShare, x.JumpBudget, x.JumpBand, x.JumpCurrentLateShare = 0, 0, 0, 0, 0
		x.DownLateShare, x.RecentJumps, x.RecentMarginReplicas = 0, 0, 0
		x.DepthJumps, x.DepthMarginReplicas = 0, 0
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
	queries, measurement, reads := fieldTargets(t, sizingFields, "")
	if len(queries) == 0 {
		t.Fatal("no panel reads a sizing field")
	}
	// Points at the middle of each minute: with a window period of 1m each window holds
	// exactly one.
	start := time.Now().Truncate(time.Minute).Add(-12*time.Minute + 30*time.Second)
	const idle, plain = 3, 6
	wrote := map[string][]float64{} // measurement.field of web (its QueueAutoscaler web) → values in time order
	var pts []*write.Point
	for i := range 10 {
		at := start.Add(time.Duration(i) * time.Minute)
		web := pipeline.WorkloadPoint("shop", "web", sizingWorkload(t, at, 40, i, i == idle))
		webDecision := store.DecisionPoint("shop", "web", "web", sizingDecision(at, 0, i, i == plain), false)
		recordFields(wrote, web)
		recordFields(wrote, webDecision)
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

	for _, where := range slices.Sorted(maps.Keys(queries)) {
		q, m := queries[where], measurement[where]
		got, ok := panelSeries(t, ctx, db, where, q, "web")
		if !ok {
			continue
		}
		want := map[string][]float64{}
		for _, f := range reads[where] {
			want[f] = wrote[m+"."+f]
			if len(want[f]) == 0 {
				t.Fatalf("%s reads %s.%s, which QAS did not write", where, m, f)
			}
			if slices.Contains(drawnWhenPositive, f) {
				want[f] = slices.DeleteFunc(slices.Clone(want[f]), func(x float64) bool { return x <= 0 })
				if len(want[f]) != 9 {
					t.Fatalf("%s: %d positive values written, want 9 (none in the plain interval)", f, len(want[f]))
				}
			}
		}
		checkPanelShows(t, ctx, db, where, q, reads[where], got, func(f string) []float64 { return want[f] })
	}
}
