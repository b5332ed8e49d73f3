package store

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/stats"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fixture is three workload points, two pods (one with an older and a newer point),
// their nodes and a node and a workload that must not be picked up.
func fixture() []*write.Point {
	var pts []*write.Point
	for i, rate := range []float64{10, 20, 30} {
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"},
			map[string]any{"arrival_rate": rate, "service_mean_seconds": 0.01 * float64(i+1), "service_scv": 0.5,
				"latency_p50_seconds": 0.02, "latency_p95_seconds": 0.05, "latency_p99_seconds": 0.09, "pods": int64(2),
				"clock_offset_seconds": -12.5 * float64(i)}, t0.Add(time.Duration(i)*5*time.Second)))
	}
	// The newest point is of a pooled workload: 40 % of arrivals overflowed, 17 wait
	// in the front.
	pts[2].AddField("overflow_share", 0.4).AddField("front_queue_length", 17.0).AddField("overflow_rate", 12.0)
	// Its fronts gave back 1.5 accepted overflows per second unseen that the
	// senders served, 0.25 whose 503 they relayed, and refused 3 with their
	// queue full (front_expired_rate, which the decider does not read, differs).
	pts[2].AddField("expired_requeued_rate", 1.5).AddField("expired_relayed_rate", 0.25).
		AddField("front_refused_full_rate", 3.0).AddField("front_expired_rate", 9.0)
	// An older point's pooled fields are not the newest's.
	pts[1].AddField("expired_requeued_rate", 7.0).AddField("front_refused_full_rate", 8.0)
	// The first and the newest point carry the rate's cv² (the middle one had no
	// pair of seconds): the newest point's is read (the engine averages the
	// intervals itself).
	pts[0].AddField("arrival_rate_cv2", 0.5).AddField("arrival_rate_pairs", 8.0)
	pts[2].AddField("arrival_rate_cv2", -0.25).AddField("arrival_rate_pairs", 24.0)
	// The first and the newest point carry latency buckets, the newest one also a
	// field of a malformed name (skipped, said); the first one's other bounds
	// must not leak into the newest's histogram.
	pts[0].AddField("latency_bucket_le_0.2", 7.0).AddField("latency_bucket_le_5", 2.0).AddField("latency_bucket_le_inf", 1.0)
	pts[2].AddField("latency_bucket_le_60", 6.0).AddField("latency_bucket_le_inf", 1.0).AddField("latency_bucket_le_0.0001", 3.0).
		AddField("latency_bucket_le_0.2", 90.0).AddField("latency_bucket_le_0.20", 50.0)
	// So do service-time buckets, the newest one's with a malformed name too
	// (skipped, said, apart from the latency buckets' problems).
	pts[0].AddField("service_bucket_le_0.05", 5.0).AddField("service_bucket_le_inf", 2.0)
	pts[2].AddField("service_bucket_le_0.0025", 0.0).AddField("service_bucket_le_0.005", 300.0).AddField("service_bucket_le_0.1", 140.0).
		AddField("service_bucket_le_inf", 10.0).AddField("service_bucket_le_1e-4", 8.0)
	// The newest point carries the requests its service times are over (an
	// older point's count is not the newest's).
	pts[2].AddField("service_samples", 450.0)
	pts[1].AddField("service_samples", 99.0)
	// The newest point carries the service-time quantiles.
	for i, f := range influx.ServiceQuantileFields {
		pts[2].AddField(f, fixtureService[i])
	}
	pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "other"},
		map[string]any{"arrival_rate": 99.0, "service_mean_seconds": 9.0}, t0.Add(5*time.Second)))
	pod := func(name, node string, at time.Duration, svc, cpu float64) *write.Point {
		return write.NewPoint(influx.Pod, map[string]string{"namespace": "ns", "workload": "w", "pod": name, "node": node},
			map[string]any{"arrival_rate": 1.0, "service_mean_seconds": svc, "cpu_usage_cores": cpu,
				"cpu_request_cores": 0.25, "cpu_limit_cores": 0.5}, t0.Add(at))
	}
	// w-a's newest point carries a queue: 3 in service, 40 waiting.
	queued := pod("w-a", "n1", 10*time.Second, 0.03, 0.2)
	queued.AddField("in_flight", 3.0).AddField("waiting", 40.0).AddField("in_flight_mean", 2.5).
		AddField("latency_p50_seconds", 0.1).AddField("latency_p95_seconds", 0.2).AddField("latency_p99_seconds", 0.4)
	pts = append(pts, pod("w-b", "n2", 5*time.Second, 0.02, 0.3), pod("w-a", "n1", 0, 0.01, 0.1), queued)
	node := func(name string, at time.Duration, used float64) *write.Point {
		return write.NewPoint(influx.Node, map[string]string{"node": name},
			map[string]any{"cpu_usage_cores": used, "cpu_allocatable_cores": 4.0, "cpu_utilization": used / 4}, t0.Add(at))
	}
	pts = append(pts, node("n1", 0, 1), node("n1", 10*time.Second, 2), node("n2", 5*time.Second, 3), node("n3", 5*time.Second, 0.5), node("n9", 5*time.Second, 4))
	// Neighbours: other workloads' pods. db-0 shares n1 (an older and a newer
	// point), x/w-a has the name of one of the workload's pods in another namespace
	// and shares n2, y/far runs on n9, which is not read, and z/z-0 on n3, whose
	// CPU is read (a destination) but which hosts none of the workload's pods.
	other := func(ns, workload, name, node string, at time.Duration, cpu float64) *write.Point {
		return write.NewPoint(influx.Pod, map[string]string{"namespace": ns, "workload": workload, "pod": name, "node": node},
			map[string]any{"arrival_rate": 1.0, "service_mean_seconds": 0.5, "cpu_usage_cores": cpu, "cpu_request_cores": 1.0, "cpu_limit_cores": 0.0}, t0.Add(at))
	}
	return append(pts, other("ns", "db", "db-0", "n1", 0, 0.5), other("ns", "db", "db-0", "n1", 10*time.Second, 1.2),
		other("x", "w", "w-a", "n2", 5*time.Second, 0.7), other("y", "far", "far", "n9", 5*time.Second, 3), other("z", "z", "z-0", "n3", 5*time.Second, 2))
}

// fixtureService are the newest workload point's service quantiles.
var fixtureService = []float64{0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.15, 0.3}

// want is what fixture reads as for workload ns/w, with n3 asked for besides the
// pods' nodes.
func want() measurement.Workload {
	return measurement.Workload{
		ArrivalRates: []decide.Sample{
			{Time: t0, Rate: 10}, {Time: t0.Add(5 * time.Second), Rate: 20}, {Time: t0.Add(10 * time.Second), Rate: 30}},
		ServiceTime: 0.03, ServiceSCV: 0.5, ServiceSamples: 450, MeasuredLatency: 0.05, DataTime: t0.Add(10 * time.Second),
		ProxyClockOffset:  -25, // the newest point's: a proxy 25 s behind the collector
		MeasuredQuantiles: []decide.LatencyQuantile{{Percentile: 50, Seconds: 0.02}, {Percentile: 95, Seconds: 0.05}, {Percentile: 99, Seconds: 0.09}},
		LatencyBuckets: []decide.LatencyBucket{{UpperBound: 0.0001, Count: 3}, {UpperBound: 0.2, Count: 90}, {UpperBound: 60, Count: 6},
			{UpperBound: math.Inf(1), Count: 1}},
		LatencyBucketsError: `influx: field "latency_bucket_le_0.20" is not in its canonical form "latency_bucket_le_0.2": skipped`,
		ServiceBuckets: []decide.LatencyBucket{{UpperBound: 0.0025, Count: 0}, {UpperBound: 0.005, Count: 300}, {UpperBound: 0.1, Count: 140},
			{UpperBound: math.Inf(1), Count: 10}},
		ServiceBucketsError: `influx: field "service_bucket_le_1e-4" is not in its canonical form "service_bucket_le_0.0001": skipped`,
		ShortArrivalRate:    30, ShortWindow: 5 * time.Second,
		RateCV2: -0.25, RateCV2Pairs: 24, // the newest point's
		OverflowShare: 0.4, FrontQueue: 17,
		ExpiredRequeuedRate: 1.5, ExpiredRelayedRate: 0.25, FrontRefusedRate: 3,
		ServiceQuantiles: []decide.LatencyQuantile{{Percentile: 50, Seconds: 0.01}, {Percentile: 75, Seconds: 0.02}, {Percentile: 90, Seconds: 0.04},
			{Percentile: 95, Seconds: 0.06}, {Percentile: 97.5, Seconds: 0.08}, {Percentile: 99, Seconds: 0.12}, {Percentile: 99.5, Seconds: 0.15},
			{Percentile: 99.9, Seconds: 0.3}},
		Pods: []measurement.Pod{
			{Name: "w-a", Node: "n1", Time: t0.Add(10 * time.Second), ServiceTime: 0.03, CPUUsage: 0.2, CPURequest: 250, CPULimit: 500,
				InService: 3, Queued: 40, InFlightMean: 2.5, MeasuredLatency: 0.2},
			{Name: "w-b", Node: "n2", Time: t0.Add(5 * time.Second), ServiceTime: 0.02, CPUUsage: 0.3, CPURequest: 250, CPULimit: 500}},
		Nodes: []measurement.Node{
			{Name: "n1", Time: t0.Add(10 * time.Second), UsedCPU: 2, AllocatableCPU: 4000},
			{Name: "n2", Time: t0.Add(5 * time.Second), UsedCPU: 3, AllocatableCPU: 4000},
			{Name: "n3", Time: t0.Add(5 * time.Second), UsedCPU: 0.5, AllocatableCPU: 4000}},
		Neighbours: []measurement.Pod{
			{Name: "ns/db-0", Node: "n1", Time: t0.Add(10 * time.Second), CPUUsage: 1.2, CPURequest: 1000},
			{Name: "x/w-a", Node: "n2", Time: t0.Add(5 * time.Second), CPUUsage: 0.7, CPURequest: 1000}},
	}
}

// utcTimes puts every time of w in UTC, as Memory keeps them.
func utcTimes(w measurement.Workload) measurement.Workload {
	w.DataTime = w.DataTime.UTC()
	w.ArrivalRates = utc(w.ArrivalRates)
	for i := range w.Pods {
		w.Pods[i].Time = w.Pods[i].Time.UTC()
	}
	for i := range w.Neighbours {
		w.Neighbours[i].Time = w.Neighbours[i].Time.UTC()
	}
	for i := range w.Nodes {
		w.Nodes[i].Time = w.Nodes[i].Time.UTC()
	}
	return w
}

func TestMemory(t *testing.T) {
	m := NewMemory()
	m.Write(fixture()...)
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	got, err := m.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, want(), got)
	checkPercentiles(t, m, q)
	checkAhead(t, m)
	checkLatest(t, m)

	// A window that starts after the first point leaves it out.
	q.Window = 16 * time.Second
	got, err = m.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.ArrivalRates, 2)
	require.Equal(t, -0.25, got.RateCV2, "the first point's cv² is outside the window")
	require.Equal(t, 24.0, got.RateCV2Pairs)

	q.Workload = "missing"
	_, err = m.Snapshot(context.Background(), q)
	require.ErrorIs(t, err, ErrNoData)
}

// TestServiceSamplesValidated: the newest point's service_samples is passed as
// written; absent (a collector from before it), negative or not finite it
// reads as 0, unknown, and the engine takes λ × the interval instead.
func TestServiceSamplesValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64
		set  bool
		want float64
	}{
		{"written", 450, true, 450},
		{"none served", 0, true, 0},
		{"absent", 0, false, 0},
		{"negative", -1, true, 0},
		{"infinite", math.Inf(1), true, 0},
		{"NaN", math.NaN(), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := map[string]float64{influx.FieldServiceMean: 0.05}
			if tc.set {
				last[influx.FieldServiceSamples] = tc.v
			}
			require.Equal(t, tc.want, serviceSamples(last))
			w := assemble(Query{}, nil, last, t0, nil, nil, nil)
			require.Equal(t, tc.want, w.ServiceSamples)
			require.Equal(t, 0.05, w.ServiceTime, "nothing else is lost")
		})
	}
}

// TestServiceQuantilesAreAllOrNothing: the store passes the service
// quantiles only when the newest point has every one, positive and
// ascending; an idle interval (none written), a partial point or a broken one
// reads as none, and the engine falls back to exponential service. The
// fields line up with the percentiles the collector computes them at.
func TestServiceQuantilesAreAllOrNothing(t *testing.T) {
	require.Len(t, influx.ServiceQuantileFields, len(stats.ServicePercentiles))
	full := map[string]float64{}
	for i, f := range influx.ServiceQuantileFields {
		full[f] = fixtureService[i]
	}
	got := serviceQuantiles(full)
	require.Len(t, got, len(stats.ServicePercentiles))
	for i, q := range got {
		require.Equal(t, stats.ServicePercentiles[i], q.Percentile)
		require.Equal(t, fixtureService[i], q.Seconds)
	}
	for _, tc := range []struct {
		name string
		mod  func(map[string]float64)
	}{
		{"none written", func(m map[string]float64) { clear(m) }},
		{"one missing", func(m map[string]float64) { delete(m, influx.FieldServiceP999) }},
		{"zero", func(m map[string]float64) { m[influx.FieldServiceP50] = 0 }},
		{"negative", func(m map[string]float64) { m[influx.FieldServiceP50] = -0.01 }},
		{"not ascending", func(m map[string]float64) { m[influx.FieldServiceP99] = 0.05 }},
		{"infinite", func(m map[string]float64) { m[influx.FieldServiceP999] = math.Inf(1) }},
		{"NaN", func(m map[string]float64) { m[influx.FieldServiceP95] = math.NaN() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := maps.Clone(full)
			tc.mod(m)
			require.Nil(t, serviceQuantiles(m))
		})
	}
}

func TestQueryValidate(t *testing.T) {
	ok := Query{Namespace: "ns", Workload: "w", Now: t0, Window: time.Minute}
	for _, tc := range []struct {
		name string
		mod  func(*Query)
		msg  string
	}{
		{"namespace", func(q *Query) { q.Namespace = "" }, "namespace"},
		{"workload", func(q *Query) { q.Workload = "" }, "workload"},
		{"now", func(q *Query) { q.Now = time.Time{} }, "now"},
		{"window", func(q *Query) { q.Window = 0 }, "window"},
		{"percentile", func(q *Query) { q.Percentile = 100 }, "percentile 100"},
		{"ahead", func(q *Query) { q.Ahead = -time.Second }, "ahead -1s is negative"},
		{"latest", func(q *Query) { q.Latest = -time.Second }, "latest -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ok
			tc.mod(&q)
			err := q.Validate()
			require.ErrorContains(t, err, tc.msg)
			_, err = NewMemory().Snapshot(context.Background(), q)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	require.NoError(t, ok.Validate())
}

func TestQueryConstruction(t *testing.T) {
	q := Query{Namespace: `n"s`, Workload: "w${x}", Now: t0, Window: time.Minute}
	wq := WorkloadQuery("qas/autogen", q)
	require.Contains(t, wq, `from(bucket: "qas/autogen")`)
	require.Contains(t, wq, `range(start: 2026-11-22T09:59:00Z, stop: 2026-11-22T10:00:00.000000001Z)`)
	require.Contains(t, wq, `r._measurement == "qas_workload"`)
	require.Contains(t, wq, `r.namespace == "n\"s" and r.workload == "w\${x}"`)
	require.Contains(t, wq, `r._field == "arrival_rate")`, "the window's λ alone")
	require.NotContains(t, wq, influx.FieldServiceMean, "the window's λ alone")
	nw := NewestQuery("qas/autogen", q, t0.Add(-5*time.Second))
	require.Contains(t, nw, `range(start: 2026-11-22T09:59:55Z, stop: 2026-11-22T09:59:55.000000001Z)`, "the newest point alone")
	require.Contains(t, nw, `r.namespace == "n\"s" and r.workload == "w\${x}"`)
	for _, f := range workloadFields[1:] {
		require.Contains(t, nw, `r._field == "`+f+`"`)
	}
	require.NotContains(t, nw, `"arrival_rate"`)
	pq := PodsQuery("qas/autogen", q)
	require.Contains(t, pq, `r._measurement == "qas_pod"`)
	require.Contains(t, pq, `last()`)
	nq := NodesQuery("qas/autogen", q, []string{"a", "b"})
	require.Contains(t, nq, `r.node == "a" or r.node == "b"`)
	bq := NeighboursQuery("qas/autogen", q, []string{"a"})
	require.Contains(t, bq, `r.node == "a"`)
	require.Contains(t, bq, `r.namespace != "n\"s" or r.workload != "w\${x}"`)
	for _, f := range append(append(append([]string{}, workloadFields...), podFields...), nodeFields...) {
		found := false
		for _, m := range []string{influx.Workload, influx.Pod, influx.Node} {
			meas, _ := influx.Lookup(m)
			for _, mf := range meas.Fields {
				found = found || mf.Name == f
			}
		}
		require.True(t, found, "field %s read by the store is declared in the schema", f)
	}
}

// unquote reverses FluxString for the fuzz test.
func unquote(s string) (string, error) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", fmt.Errorf("not quoted: %q", s)
	}
	var b strings.Builder
	body := s[1 : len(s)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '"' {
			return "", fmt.Errorf("unescaped quote at %d in %q", i, s)
		}
		if c == '$' && i+1 < len(body) && body[i+1] == '{' {
			return "", fmt.Errorf("unescaped interpolation at %d in %q", i, s)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", fmt.Errorf("dangling backslash in %q", s)
		}
		switch body[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		default:
			b.WriteByte(body[i])
		}
	}
	return b.String(), nil
}

func FuzzFluxString(f *testing.F) {
	for _, s := range []string{"", `a"b`, `\`, "${x}", "$", "a\nb", `\${`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := unquote(FluxString(s))
		require.NoError(t, err)
		require.Equal(t, s, got)
	})
}

// TestFluxMatchesMemory writes the same points to a real InfluxDB and to Memory and
// reads the same snapshot back from both.
func TestFluxMatchesMemory(t *testing.T) {
	fl := &Flux{Query: influxWith(t, fixture()...), Bucket: influxtest.Bucket}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	got, err := fl.Snapshot(ctx, q)
	require.NoError(t, err)
	require.Equal(t, want(), utcTimes(got))

	checkPercentiles(t, fl, q)
	checkAhead(t, fl)
	checkLatest(t, fl)

	q.Workload = "missing"
	_, err = fl.Snapshot(ctx, q)
	require.ErrorIs(t, err, ErrNoData)
}

// checkAhead asserts that points dated after the query's now (a collector whose clock
// is ahead) are read only within Ahead, and that DataTime then lies after now.
func checkAhead(t *testing.T, st Store) {
	t.Helper()
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(-30 * time.Second), Window: time.Minute}
	_, err := st.Snapshot(context.Background(), q)
	require.ErrorIs(t, err, ErrNoData, "every point is after now")
	q.Ahead = 35 * time.Second // reaches t0 and t0+5s, not t0+10s
	got, err := st.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.ArrivalRates, 2)
	require.Equal(t, t0.Add(5*time.Second), got.DataTime.UTC())
	require.Equal(t, 20.0, got.ArrivalRates[1].Rate)
	require.Nil(t, got.LatencyBuckets, "the newest point read has none; an older point's are not taken")
	require.Empty(t, got.LatencyBucketsError)
	require.Nil(t, got.ServiceBuckets, "the newest point read has none; an older point's are not taken")
	require.Empty(t, got.ServiceBucketsError)
}

// checkLatest asserts that the pods', nodes' and neighbours' newest values
// are looked for only within Query.Latest of the newest workload point
// (t0+10s in the fixture), the λ history still over the whole window, and
// that a Latest of 0 or reaching past the window's start reads as before.
func checkLatest(t *testing.T, st Store) {
	t.Helper()
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	for _, tc := range []struct {
		name   string
		latest time.Duration
		edit   func(*measurement.Workload)
	}{
		{"0 reads the window", 0, func(*measurement.Workload) {}},
		{"an hour is the window", time.Hour, func(*measurement.Workload) {}},
		{"10 s reaches the oldest pod point", 10 * time.Second, func(*measurement.Workload) {}},
		// From t0+6s: w-b (t0+5s) and n3 (t0+5s) are not read; with w-b
		// gone, n2 is no pod's node, so neither it nor x/w-a on it is read.
		{"4 s leaves the older ones out", 4 * time.Second, func(w *measurement.Workload) {
			w.Pods = w.Pods[:1]
			w.Nodes = w.Nodes[:1]
			w.Neighbours = w.Neighbours[:1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.Latest = tc.latest
			got, err := st.Snapshot(context.Background(), q)
			require.NoError(t, err)
			w := want()
			tc.edit(&w)
			require.Equal(t, w, utcTimes(got))
		})
	}
	// Only the nodes' newest point within reach: n1's t0+10s one, not t0's.
	q.Latest = time.Second
	got, err := st.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.Nodes, 1)
	require.Equal(t, 2.0, got.Nodes[0].UsedCPU)
	require.Len(t, got.ArrivalRates, 3, "the λ history is read over the whole window")
}

// checkPercentiles asserts that the measured latency follows the query's percentile,
// and is unknown (0) for a percentile the collector does not write.
func checkPercentiles(t *testing.T, st Store, q Query) {
	t.Helper()
	for _, tc := range []struct {
		percentile, want float64
	}{{0, 0.05}, {50, 0.02}, {95, 0.05}, {99, 0.09}, {90, 0}} {
		q.Percentile = tc.percentile
		got, err := st.Snapshot(context.Background(), q)
		require.NoError(t, err)
		require.Equal(t, tc.want, got.MeasuredLatency, "percentile %v", tc.percentile)
	}
}

func utc(s []decide.Sample) []decide.Sample {
	for i := range s {
		s[i].Time = s[i].Time.UTC()
	}
	return s
}

// TestRateCV2IsTheNewestPoints: the measurement's cv² is the newest workload
// point's, with its pairs; a newest point without pairs, with a non-finite or
// absurd cv², or with a negative or non-finite count of pairs gives none,
// whatever older points hold (the engine folds each interval once).
func TestRateCV2IsTheNewestPoints(t *testing.T) {
	tests := []struct {
		name               string
		points             [][2]float64 // cv², pairs; oldest first
		wantCV2, wantPairs float64
	}{
		{"one", [][2]float64{{0.3, 10}}, 0.3, 10},
		{"the newest, not a mean", [][2]float64{{1, 30}, {0, 10}}, 0, 10},
		{"a negative estimate counts", [][2]float64{{0.5, 30}, {-0.5, 10}}, -0.5, 10},
		{"a newest point without pairs gives none", [][2]float64{{0.2, 5}, {9, 0}}, 0, 0},
		{"not a number", [][2]float64{{0.2, 5}, {math.NaN(), 5}}, 0, 0},
		{"absurd", [][2]float64{{0.2, 5}, {2e4, 5}}, 0, 0},
		{"negative pairs", [][2]float64{{0.2, 5}, {1, -3}}, 0, 0},
		{"infinite pairs", [][2]float64{{0.2, 5}, {1, math.Inf(1)}}, 0, 0},
		{"pairs not a number", [][2]float64{{0.2, 5}, {1, math.NaN()}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMemory()
			for i, p := range tt.points {
				mem.Write(write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"},
					map[string]any{"arrival_rate": 10.0, "arrival_rate_cv2": p[0], "arrival_rate_pairs": p[1]}, t0.Add(time.Duration(i)*5*time.Second)))
			}
			got, err := mem.Snapshot(context.Background(), Query{Namespace: "ns", Workload: "w", Now: t0.Add(time.Minute), Window: time.Hour})
			require.NoError(t, err)
			require.InDelta(t, tt.wantCV2, got.RateCV2, 1e-12)
			require.Equal(t, tt.wantPairs, got.RateCV2Pairs)
		})
	}
}
