package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// measuredBy writes, through the real writer into db, what qas-collector writes for
// workload name's pods (λ = 60/s, E[S] = 50 ms): workload and pod points every 5 s
// over the minute before at.
func (e *env) measuredBy(t *testing.T, db *influxtest.Server, name string, at time.Time) {
	e.measuredAt(t, db, name, at, 60, 0)
}

// measuredAt is measuredBy at arrival rate lambda, with the last silent pods (in name
// order) not reporting (uninjected, or their proxy not answering).
func (e *env) measuredAt(t *testing.T, db *influxtest.Server, name string, at time.Time, lambda float64, silent int) {
	t.Helper()
	pods, err := e.c.Clientset().CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	pods.Items = pods.Items[:len(pods.Items)-silent]
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: time.Hour}, nil, zap.NewNop())
	require.NoError(t, err)
	var pts []*write.Point
	for ts := at.Add(-time.Minute); !ts.After(at); ts = ts.Add(5 * time.Second) {
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": e.ns, "workload": name},
			map[string]any{"arrival_rate": lambda, "service_mean_seconds": 0.05, "service_scv": 1.0, "latency_p95_seconds": 0.15,
				"pods": int64(len(pods.Items))}, ts))
		for _, p := range pods.Items {
			pts = append(pts, write.NewPoint(influx.Pod, map[string]string{"namespace": e.ns, "workload": name, "pod": p.Name, "node": p.Spec.NodeName},
				map[string]any{"arrival_rate": lambda / float64(len(pods.Items)), "service_mean_seconds": 0.05}, ts))
		}
	}
	w.Write(pts...)
	require.NoError(t, w.Close(context.Background()))
	written, _, dropped := w.Counts()
	require.Equal(t, float64(len(pts)), written)
	require.Zero(t, dropped)
}

// fluxSource is the decider's real MetricsSource over db.
func fluxSource(t *testing.T, db *influxtest.Server) store.Source {
	client := influxdb2.NewClient(db.URL, "")
	t.Cleanup(client.Close)
	return store.Source{Store: &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}, Window: 10 * time.Minute}
}

// TestCollectorClockAheadIsAConditionNotMissingData: qas-collector's clock runs 3
// minutes ahead of the decider's, so every point in the real InfluxDB is dated in the
// decider's future. The decider reads them, decides on them, and reports the skew as
// the ClockSkew condition; once the clocks agree the condition turns False. Before,
// the read stopped at the decider's now: "no measurements", and QAS held.
func TestCollectorClockAheadIsAConditionNotMissingData(t *testing.T) {
	db := influxtest.Start(t)
	e := setup(t)
	e.deployment(t, "skew", 2)
	ctrl := e.startController(t, e.c.Config, nil, func(c *controller.Controller) { c.Metrics = fluxSource(t, db) })
	e.queueAutoscaler(t, "skew", "skew", true)
	e.measuredBy(t, db, "skew", e.clock.Now().Add(3*time.Minute))

	d, err := e.reconcile(t, ctrl, "skew")
	require.NoError(t, err)
	require.Empty(t, d.Explanation.HeldBecause)
	require.Greater(t, d.DesiredReplicas, int32(2), "60/s of 50 ms is 3 Erlangs: the measurements were used")
	c := condition(e.get(t, "skew"), "ClockSkew")
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, "CollectorClockAhead", c.Reason)
	require.Contains(t, c.Message, "dated 3m0s after the decider's clock")

	e.clock.SetTime(e.clock.Now().Add(3 * time.Minute)) // the clocks agree again
	_, err = e.reconcile(t, ctrl, "skew")
	require.NoError(t, err)
	c = condition(e.get(t, "skew"), "ClockSkew")
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, "ClocksAgree", c.Reason)
}

// TestStaleDataHoldsAtTheSpecsMaxDataAge: qas-collector stopped 45 s ago while
// InfluxDB stays up. A QueueAutoscaler whose spec.maxDataAge is 30s holds and says
// how old the data is; one with the default (2m) still acts on it. Before, the CRD
// had no such field (the API server pruned it) and every QueueAutoscaler acted on
// data up to 2 minutes old.
func TestStaleDataHoldsAtTheSpecsMaxDataAge(t *testing.T) {
	db := influxtest.Start(t)
	e := setup(t)
	e.deployment(t, "stale", 2)
	ctrl := e.startController(t, e.c.Config, nil, func(c *controller.Controller) { c.Metrics = fluxSource(t, db) })
	e.measuredBy(t, db, "stale", e.clock.Now().Add(-45*time.Second))
	e.queueAutoscalerWith(t, "strict", "stale", true, map[string]any{"maxDataAge": "30s"})
	e.queueAutoscaler(t, "lenient", "stale", true)

	d, err := e.reconcile(t, ctrl, "strict")
	require.NoError(t, err)
	require.Equal(t, "data is 45s old, more than maxDataAge 30s", d.Explanation.HeldBecause)
	c := condition(e.get(t, "strict"), "ScalingActive")
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Contains(t, c.Message, "more than maxDataAge 30s")

	d, err = e.reconcile(t, ctrl, "lenient")
	require.NoError(t, err)
	require.Empty(t, d.Explanation.HeldBecause)
	require.Greater(t, d.DesiredReplicas, int32(2))
}

// TestSomePodsNotReportingNeverScalesDown: of three Ready pods only two report (the
// third was created while the injection webhook was down, so it runs without a proxy,
// or its proxy does not answer). At a load one pod could serve, QAS does not scale
// down on the partial data; at a load the three cannot serve, it still scales up.
func TestSomePodsNotReportingNeverScalesDown(t *testing.T) {
	db := influxtest.Start(t)
	e := setup(t)
	e.deployment(t, "partial", 3)
	ctrl := e.startController(t, e.c.Config, nil, func(c *controller.Controller) { c.Metrics = fluxSource(t, db) })
	e.queueAutoscaler(t, "partial", "partial", true)

	e.measuredAt(t, db, "partial", e.clock.Now(), 2, 1)
	d, err := e.reconcile(t, ctrl, "partial")
	require.NoError(t, err)
	require.Equal(t, int32(3), d.DesiredReplicas, "reason: %s", d.Explanation.Reason)
	require.Equal(t, "incomplete data: never scale down on missing data", d.Explanation.HeldBecause)

	e.clock.SetTime(e.clock.Now().Add(time.Minute))
	e.measuredAt(t, db, "partial", e.clock.Now(), 120, 1)
	d, err = e.reconcile(t, ctrl, "partial")
	require.NoError(t, err)
	require.Greater(t, d.DesiredReplicas, int32(3), "120/s of 50 ms is 6 Erlangs: scale up on partial data; reason: %s", d.Explanation.Reason)
}
