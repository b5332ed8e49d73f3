package store

import (
	"context"
	"math"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

func workloadPoint(at time.Duration, rate float64) *write.Point {
	return write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "web"},
		map[string]any{"arrival_rate": rate, "service_mean_seconds": 0.05, "latency_p95_seconds": 0.2, "latency_p99_seconds": 0.4}, t0.Add(at))
}

func podPoint(pod, node string, at time.Duration) *write.Point {
	return write.NewPoint(influx.Pod, map[string]string{"namespace": "ns", "workload": "web", "pod": pod, "node": node},
		map[string]any{"service_mean_seconds": 0.05, "cpu_usage_cores": 0.3}, t0.Add(at))
}

func nodePoint(node string, at time.Duration) *write.Point {
	return write.NewPoint(influx.Node, map[string]string{"node": node}, map[string]any{"cpu_usage_cores": 1.5, "cpu_allocatable_cores": 4.0}, t0.Add(at))
}

func TestSource(t *testing.T) {
	mem := NewMemory()
	mem.Write(workloadPoint(0, 10), workloadPoint(2*time.Minute, 20),
		podPoint("web-a", "n1", 2*time.Minute), podPoint("web-b", "n2", 30*time.Second), podPoint("web-gone", "n1", 2*time.Minute),
		nodePoint("n1", 2*time.Minute))
	src := Source{Store: mem, Window: 5 * time.Minute, MaxPodAge: time.Minute}
	now := t0.Add(2*time.Minute + 5*time.Second)
	for _, tc := range []struct {
		name         string
		q            measurement.Query
		complete     bool
		pods         []string
		wantLatency  float64
		wantNodeUsed bool
	}{
		{"every ready pod fresh", measurement.Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a"}, Percentile: 99},
			true, []string{"web-a"}, 0.4, true},
		{"a ready pod's data is stale", measurement.Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a", "web-b"}, Percentile: 95},
			false, []string{"web-a"}, 0.2, true},
		{"a ready pod never measured", measurement.Query{Pods: []string{"web-a", "web-c"}, Ready: []string{"web-a", "web-c"}},
			false, []string{"web-a"}, 0.2, true},
		{"nodes needed and present", measurement.Query{Pods: []string{"web-a"}, Ready: []string{"web-a"}, NeedNodes: true, Percentile: 90},
			true, []string{"web-a"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Namespace, q.Workload, q.Now = "ns", "web", now
			m, err := src.Measure(context.Background(), q)
			require.NoError(t, err)
			require.Equal(t, tc.complete, m.Complete)
			var pods []string
			for _, p := range m.Pods {
				pods = append(pods, p.Name)
			}
			require.ElementsMatch(t, tc.pods, pods, "pods that are gone or stale are left out")
			require.Equal(t, tc.wantLatency, m.MeasuredLatency)
			require.Len(t, m.ArrivalRates, 2)
			require.Equal(t, 20.0, m.ArrivalRates[1].Rate)
			n1, ok := m.Node("n1")
			require.True(t, ok)
			require.Equal(t, 1.5, n1.UsedCPU)
		})
	}

	// Node data missing while the decision needs it: incomplete.
	mem2 := NewMemory()
	mem2.Write(workloadPoint(0, 10), podPoint("web-a", "n1", 0))
	m, err := Source{Store: mem2, Window: time.Minute}.Measure(context.Background(),
		measurement.Query{Namespace: "ns", Workload: "web", Now: t0, Pods: []string{"web-a"}, Ready: []string{"web-a"}, NeedNodes: true})
	require.NoError(t, err)
	require.False(t, m.Complete)

	_, err = src.Measure(context.Background(), measurement.Query{Namespace: "ns", Workload: "other", Now: now})
	require.ErrorContains(t, err, "no measurements of ns/other")
}

// TestSourceReadsPodsAndNodesNearTheNewestPoint: the source looks for the
// pods' and nodes' newest values within DefaultLatest of the newest workload
// point, or MaxPodAge when that is longer, not over the λ history's hour: a
// node last reported 6 minutes before it is missing data (no scale-down) at
// the default, and read when pods may be 10 minutes old.
func TestSourceReadsPodsAndNodesNearTheNewestPoint(t *testing.T) {
	mem := NewMemory()
	mem.Write(workloadPoint(0, 10), workloadPoint(50*time.Minute, 20), podPoint("web-a", "n1", 50*time.Minute),
		nodePoint("n1", 44*time.Minute), podPoint("web-old", "n2", 40*time.Minute), nodePoint("n2", 40*time.Minute))
	q := measurement.Query{Namespace: "ns", Workload: "web", Now: t0.Add(50*time.Minute + 5*time.Second),
		Pods: []string{"web-a"}, Ready: []string{"web-a"}, NeedNodes: true}
	for _, tc := range []struct {
		name     string
		maxAge   time.Duration
		complete bool
	}{
		{"the default reaches 5 minutes back", time.Minute, false},
		{"a longer pod age reaches further", 10 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Source{Store: mem, Window: time.Hour, MaxPodAge: tc.maxAge}.Measure(context.Background(), q)
			require.NoError(t, err)
			require.Len(t, m.ArrivalRates, 2, "λ over the whole window")
			require.Equal(t, tc.complete, m.Complete)
			_, ok := m.Node("n1")
			require.Equal(t, tc.complete, ok)
			if !tc.complete {
				require.Equal(t, []string{"node n1"}, m.Missing)
			}
		})
	}
}

// TestSourceCarriesTheQueue: the queue signals reach the controller's
// measurement, and through it the engine's snapshot (issue #15).
func TestSourceCarriesTheQueue(t *testing.T) {
	mem := NewMemory()
	w := workloadPoint(5*time.Second, 30)
	w.AddField("latency_p50_seconds", 0.1)
	p := podPoint("web-a", "n1", 5*time.Second)
	p.AddField("in_flight", 2.0).AddField("waiting", 17.0).AddField("in_flight_mean", 4.0).AddField("latency_p95_seconds", 0.9)
	mem.Write(workloadPoint(0, 10), w, p)
	m, err := Source{Store: mem, Window: time.Minute}.Measure(context.Background(),
		measurement.Query{Namespace: "ns", Workload: "web", Now: t0.Add(6 * time.Second), Pods: []string{"web-a"}, Ready: []string{"web-a"}})
	require.NoError(t, err)
	pod, ok := m.Pod("web-a")
	require.True(t, ok)
	require.Equal(t, []float64{0.3, 0.05, 2, 17, 4, 0.9}, []float64{pod.CPUUsage, pod.ServiceTime, pod.InService, pod.Queued, pod.InFlightMean, pod.MeasuredLatency})
	require.Equal(t, []decide.LatencyQuantile{{Percentile: 50, Seconds: 0.1}, {Percentile: 95, Seconds: 0.2}, {Percentile: 99, Seconds: 0.4}}, m.MeasuredQuantiles)
	require.Equal(t, 30.0, m.ShortArrivalRate)
	require.Equal(t, 5*time.Second, m.ShortWindow)
}

type capture struct{ pts []*write.Point }

func (c *capture) Write(p ...*write.Point) { c.pts = append(c.pts, p...) }

func TestDecisionPointFollowsTheSchema(t *testing.T) {
	var c capture
	sink := InfluxSink{W: &c}
	web := measurement.DecisionOf{Namespace: "ns", Name: "web-qa", Workload: "web"}
	d := decide.Decision{Time: t0, Action: decide.ActionHorizontal, DesiredReplicas: 4, Explanation: decide.Explanation{
		ArrivalRate: 40, ForecastArrivalRate: 50, ServiceTime: 0.05, Latency: 0.3, MeasuredLatency: 0.28, Target: 0.2,
		Lead: 30 * time.Second, ForecastWindow: 2 * time.Minute, Normalized: 1.5, CurrentReplicas: 2, Reason: "L > T(1+θ)",
		Backlog: 120, DrainReplicas: 6, LatencyBias: 1.3, MeasuredLateShare: 0.08, ModelledLateShare: 0.05,
		ShortArrivalRate: 90, ShortArrivalRateLow: 80, JumpRatio: 1.4, CountDispersion: 2,
		Recurrence: &decide.Recurrence{PeriodSeconds: 1200, Occurrences: []time.Time{t0.Add(-40 * time.Minute), t0.Add(-20 * time.Minute), t0},
			Levels: []float64{400, 410, 420}, Expected: 3, Confidence: 1, Chance: 1e-4, Next: t0.Add(20 * time.Minute), Rate: 400, Active: true},
		TailModel: decide.TailMeasured, ServiceLateShare: 0.026, ServiceShapeWeight: 0.4, RecentLateShare: 0.031, RecentLateShareError: 0.0012, ServiceTimeInterval: 0.055, ServiceSamples: 9000,
		RateCV2: 2.5, ArrivalRateLevel: 31, LevelWindow: 4 * time.Minute,
		JumpReplicas: 5, JumpLateShare: 0.057, JumpBudget: 0.06, DownLateShare: 0.048,
		FrontExpiredRate: 1.5, FrontRefusedRate: 2, BacklogExpired: 22.5, ExpiredLateShare: 0.0375}}
	require.NoError(t, sink.RecordDecision(context.Background(), web, d, false))
	held := decide.Decision{Time: t0, Explanation: decide.Explanation{Latency: mathInf(), HeldBecause: "stale data"}}
	require.NoError(t, sink.RecordDecision(context.Background(), web, held, true))
	require.Len(t, c.pts, 2)

	schema, ok := influx.Lookup(influx.Decision)
	require.True(t, ok)
	declared := map[string]bool{}
	for _, f := range schema.Fields {
		declared[f.Name] = true
	}
	for _, p := range c.pts {
		require.Equal(t, influx.Decision, p.Name())
		var tags []string
		for _, tg := range p.TagList() {
			tags = append(tags, tg.Key)
		}
		require.ElementsMatch(t, schema.Tags, tags)
		for _, f := range p.FieldList() {
			require.True(t, declared[f.Key], "field %s is declared", f.Key)
		}
	}
	fields := func(p *write.Point) map[string]any {
		m := map[string]any{}
		for _, f := range p.FieldList() {
			m[f.Key] = f.Value
		}
		return m
	}
	tags := func(p *write.Point) map[string]string {
		m := map[string]string{}
		for _, tg := range p.TagList() {
			m[tg.Key] = tg.Value
		}
		return m
	}
	require.Equal(t, map[string]string{"namespace": "ns", "queueautoscaler": "web-qa", "workload": "web", "action": "horizontal"}, tags(c.pts[0]),
		"the workload tag is the scale target, so dashboards match decisions to qas_workload")
	f := fields(c.pts[0])
	require.Equal(t, int64(4), f["desired_replicas"])
	require.Equal(t, 30.0, f["lead_seconds"])
	require.Equal(t, 120.0, f["forecast_window_seconds"])
	require.Equal(t, false, f["dry_run"])
	// The queue terms of the explanation reach InfluxDB too.
	require.Equal(t, 120.0, f["backlog"])
	require.Equal(t, 6.0, f["drain_replicas"])
	require.Equal(t, 1.3, f["latency_bias"])
	require.Equal(t, 0.08, f["measured_late_share"])
	require.Equal(t, 80.0, f["short_arrival_rate_low"])
	// The jump floor against the budget it spends, and the scale-down's margin.
	require.Equal(t, 5.0, f["jump_replicas"])
	require.Equal(t, 0.057, f["jump_late_share"])
	require.Equal(t, 0.06, f["jump_budget"])
	require.Equal(t, 0.048, f["down_late_share"])
	// And the recurring-burst forecast with its evidence.
	require.Equal(t, 1200.0, f["recurrence_period_seconds"])
	require.Equal(t, 3.0, f["recurrence_occurrences"])
	require.Equal(t, 1e-4, f["recurrence_chance"])
	require.Equal(t, 1200.0, f["recurrence_next_seconds"])
	require.Equal(t, 400.0, f["recurrence_forecast_rate"])
	require.Equal(t, true, f["recurrence_active"])
	require.Equal(t, false, f["recurrence_contradicted"])
	// So does the calibration of the tail.
	require.Equal(t, true, f["tail_calibrated"])
	require.Equal(t, 0.026, f["service_late_share"])
	require.Equal(t, 0.4, f["service_shape_weight"])
	// And the budget's measurement: the recent share and its error.
	require.Equal(t, 0.031, f["recent_late_share"])
	require.Equal(t, 0.0012, f["recent_late_share_error"])
	// And the pooled service-time estimate beside the interval's own.
	require.Equal(t, 0.05, f["service_mean_seconds"])
	require.Equal(t, 0.055, f["service_mean_interval_seconds"])
	require.Equal(t, 9000.0, f["service_samples"])
	// And the rate mixture's terms.
	require.Equal(t, 2.5, f["rate_cv2"])
	require.Equal(t, 31.0, f["arrival_rate_level"])
	require.Equal(t, 240.0, f["level_window_seconds"])
	// And the pooled fronts' expiries and refusals.
	require.Equal(t, 1.5, f["expired_rate"])
	require.Equal(t, 2.0, f["front_refused_full_rate"])
	require.NotContains(t, f, "front_expired_rate", "the workload's front_expired_rate is another count")
	require.Equal(t, 22.5, f["backlog_expired"])
	require.Equal(t, 0.0375, f["expired_late_share"])
	require.Equal(t, "horizontal", c.pts[0].TagList()[0].Value)
	f = fields(c.pts[1])
	require.NotContains(t, f, "modelled_latency_seconds", "+Inf cannot be stored")
	require.NotContains(t, f, "recurrence_period_seconds", "no recurrence found: no recurrence fields")
	require.Equal(t, "held: stale data", f["reason"])
	require.Equal(t, true, f["dry_run"])
	require.NotContains(t, f, "tail_calibrated", "a held decision modelled no tail")
	require.NotContains(t, f, "measured_late_share", "the loop compared nothing: no 0 that reads as no request late")
	require.NotContains(t, f, "modelled_late_share")

	// No workload known: the point has no workload tag rather than an empty one.
	require.NoError(t, sink.RecordDecision(context.Background(), measurement.DecisionOf{Namespace: "ns", Name: "other"}, d, false))
	require.NotContains(t, tags(c.pts[2]), "workload")
}

// TestDecisionsReachAnEmptyInfluxDB: the decider's sink, through the real writer, on an
// InfluxDB 1.8 without the database (the in-cluster one whose init script failed):
// the database is created and the decision lands with its workload tag.
func TestDecisionsReachAnEmptyInfluxDB(t *testing.T) {
	srv := influxtest.StartWith(t, influxtest.Options{Empty: true})
	w, err := influx.NewWriter(influx.WriterConfig{URL: srv.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MetricsPrefix: "qas_decider"}, nil, zaptest.NewLogger(t))
	require.NoError(t, err)
	sink := InfluxSink{W: w}
	now := time.Now().Truncate(time.Second)
	d := decide.Decision{Time: now, Action: decide.ActionNone, DesiredReplicas: 3, Explanation: decide.Explanation{HeldBecause: "no arrival-rate data"}}
	require.NoError(t, sink.RecordDecision(context.Background(), measurement.DecisionOf{Namespace: "shop", Name: "checkout", Workload: "checkout-v2"}, d, false))
	require.Eventually(t, func() bool { return w.Buffered() == 0 }, time.Minute, 20*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	written, _, dropped := w.Counts()
	require.Equal(t, 1.0, written)
	require.Zero(t, dropped)

	client := influxdb2.NewClient(srv.URL, "")
	defer client.Close()
	res, err := client.QueryAPI("").Query(context.Background(), `from(bucket: "`+influxtest.Bucket+`") |> range(start: -1h)
  |> filter(fn: (r) => r._measurement == "qas_decision" and r.workload == "checkout-v2" and r.queueautoscaler == "checkout")
  |> filter(fn: (r) => r._field == "reason")`)
	require.NoError(t, err)
	var reasons []any
	for res.Next() {
		reasons = append(reasons, res.Record().Value())
	}
	require.NoError(t, res.Err())
	require.Equal(t, []any{"held: no arrival-rate data"}, reasons)
}

func mathInf() float64 { return math.Inf(1) }

// TestSourceReadsLambdaOverTheEnginesWindows: the collector's points, one per
// 5 s scrape, reach the engine merged into 15 s windows laid back from the
// newest (each the rate over its points), while the newest point alone stays
// the fast path's short window: the long window holds the short one, as in
// the simulator, so the engine reads the counts' dispersion from their
// difference. A negative RateWindow keeps the points.
func TestSourceReadsLambdaOverTheEnginesWindows(t *testing.T) {
	mem := NewMemory()
	rates := []float64{9, 10, 10, 11, 30, 20, 40, 12}
	for i, r := range rates {
		mem.Write(workloadPoint(time.Duration(i+1)*5*time.Second, r))
	}
	q := measurement.Query{Namespace: "ns", Workload: "web", Now: t0.Add(41 * time.Second)}
	m, err := Source{Store: mem, Window: time.Minute}.Measure(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, []decide.Sample{
		{Time: t0.Add(10 * time.Second), Rate: 9.5},
		{Time: t0.Add(25 * time.Second), Rate: 17},
		{Time: t0.Add(40 * time.Second), Rate: 24},
	}, m.ArrivalRates)
	require.Equal(t, 12.0, m.ShortArrivalRate, "the newest point alone")
	require.Equal(t, 5*time.Second, m.ShortWindow)

	m, err = Source{Store: mem, Window: time.Minute, RateWindow: -1}.Measure(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, m.ArrivalRates, len(rates))
	require.Equal(t, 12.0, m.ArrivalRates[len(rates)-1].Rate)
}
