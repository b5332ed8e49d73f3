package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// fixture is three workload points, two pods (one with an older and a newer point),
// their nodes and a node and a workload that must not be picked up.
func fixture() []*write.Point {
	var pts []*write.Point
	for i, rate := range []float64{10, 20, 30} {
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"},
			map[string]any{"arrival_rate": rate, "service_mean_seconds": 0.01 * float64(i+1), "service_scv": 0.5,
				"latency_p50_seconds": 0.02, "latency_p95_seconds": 0.05, "latency_p99_seconds": 0.09, "pods": int64(2)}, t0.Add(time.Duration(i)*5*time.Second)))
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
	return append(pts, node("n1", 0, 1), node("n1", 10*time.Second, 2), node("n2", 5*time.Second, 3), node("n9", 5*time.Second, 4))
}

func want() decide.Snapshot {
	return decide.Snapshot{
		Now: t0.Add(20 * time.Second),
		ArrivalRates: []decide.Sample{
			{Time: t0, Rate: 10}, {Time: t0.Add(5 * time.Second), Rate: 20}, {Time: t0.Add(10 * time.Second), Rate: 30}},
		ServiceTime: 0.03, ServiceSCV: 0.5, MeasuredLatency: 0.05, DataTime: t0.Add(10 * time.Second),
		MeasuredQuantiles: []decide.LatencyQuantile{{Percentile: 50, Seconds: 0.02}, {Percentile: 95, Seconds: 0.05}, {Percentile: 99, Seconds: 0.09}},
		ShortArrivalRate:  30, ShortWindow: 5 * time.Second,
		Pods: []decide.Pod{
			{Name: "w-a", Node: "n1", Owned: true, ServiceTime: 0.03, CPUUsage: 0.2, CPURequest: 250, CPULimit: 500,
				InService: 3, Queued: 40, InFlightMean: 2.5, MeasuredLatency: 0.2},
			{Name: "w-b", Node: "n2", Owned: true, ServiceTime: 0.02, CPUUsage: 0.3, CPURequest: 250, CPULimit: 500}},
		Nodes: []decide.Node{{Name: "n1", UsedCPU: 2, AllocatableCPU: 4000}, {Name: "n2", UsedCPU: 3, AllocatableCPU: 4000}},
	}
}

func TestMemory(t *testing.T) {
	m := NewMemory()
	m.Write(fixture()...)
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute}
	got, err := m.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Equal(t, want(), got)
	checkPercentiles(t, m, q)

	// w-b's newest point is 5 s older than the workload's: a 4 s limit leaves it out.
	q.MaxPodAge = 4 * time.Second
	got, err = m.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.Pods, 1)
	require.Equal(t, "w-a", got.Pods[0].Name)
	q.MaxPodAge = 0

	// A window that starts after the first point leaves it out.
	q.Window = 16 * time.Second
	got, err = m.Snapshot(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.ArrivalRates, 2)

	q.Workload = "missing"
	_, err = m.Snapshot(context.Background(), q)
	require.ErrorIs(t, err, ErrNoData)
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
	require.Contains(t, wq, `pivot(rowKey: ["_time"]`)
	pq := PodsQuery("qas/autogen", q)
	require.Contains(t, pq, `r._measurement == "qas_pod"`)
	require.Contains(t, pq, `last()`)
	nq := NodesQuery("qas/autogen", q, []string{"a", "b"})
	require.Contains(t, nq, `r.node == "a" or r.node == "b"`)
	for _, f := range append(append([]string{}, workloadFields...), podFields...) {
		found := false
		for _, m := range []string{influx.Workload, influx.Pod} {
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
	db := influxtest.Start(t)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	w.Write(fixture()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(ctx))
	_, _, dropped := w.Counts()
	require.Zero(t, dropped)

	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	fl := &Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute}
	got, err := fl.Snapshot(ctx, q)
	require.NoError(t, err)
	exp := want()
	require.Equal(t, exp.ArrivalRates, utc(got.ArrivalRates))
	got.ArrivalRates, exp.ArrivalRates = nil, nil
	got.DataTime = got.DataTime.UTC()
	require.Equal(t, exp, got)

	checkPercentiles(t, fl, q)

	q.Workload = "missing"
	_, err = fl.Snapshot(ctx, q)
	require.ErrorIs(t, err, ErrNoData)
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
