package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// TestRecurringBurstsFromInfluxDB: a real InfluxDB holds six hours of what
// qas-collector wrote for a workload whose traffic steps from 60/s to 240/s
// for four minutes every 20 minutes; the next burst is due 30 s from now. The
// controller, reading the long history through the store (aggregateWindow,
// the per-workload cache), forecasts it and sizes for it now, one lead (45 s)
// ahead: the forecast and its evidence are in the decision's explanation and
// the RecurringBursts condition. A QueueAutoscaler of the same workload with
// predictive scaling off sizes for the present.
func TestRecurringBurstsFromInfluxDB(t *testing.T) {
	db := influxtest.Start(t)
	e := setup(t)
	e.deployment(t, "cron", 2)
	src := fluxSource(t, db)
	src.History = &store.LongHistory{Store: src.Store.(*store.Flux), Span: 24 * time.Hour, Step: time.Minute}
	ctrl := e.startController(t, e.c.Config, nil, func(c *controller.Controller) { c.Metrics = src })
	e.queueAutoscalerWith(t, "cron", "cron", true, map[string]any{"predictive": map[string]any{"enabled": true, "leadOverride": "45s"}})
	e.queueAutoscaler(t, "cron-reactive", "cron", true)

	now := e.clock.Now()
	next := now.Add(30 * time.Second)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: time.Hour}, nil, zap.NewNop())
	require.NoError(t, err)
	var pts []*write.Point
	for ts := now.Add(-6 * time.Hour); ts.Before(now.Add(-time.Minute)); ts = ts.Add(15 * time.Second) {
		rate := 60.0
		if phase := next.Sub(ts) % (20 * time.Minute); phase > 16*time.Minute || phase == 0 {
			rate = 240 // within the four minutes after an onset next − k·20 min
		}
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": e.ns, "workload": "cron"},
			map[string]any{"arrival_rate": rate, "service_mean_seconds": 0.05, "service_scv": 1.0}, ts))
	}
	w.Write(pts...)
	require.NoError(t, w.Close(context.Background()))
	e.measuredAt(t, db, "cron", now, 60, 0) // the last minute, pods included

	d, err := e.reconcile(t, ctrl, "cron")
	require.NoError(t, err)
	x := d.Explanation
	require.Empty(t, x.HeldBecause)
	require.NotNil(t, x.Recurrence)
	r := x.Recurrence
	require.True(t, r.Active, r.Note)
	require.InDelta(t, 1200, r.PeriodSeconds, 10, r.Note)
	require.GreaterOrEqual(t, len(r.Occurrences), 15, r.Note)
	require.InDelta(t, 0, r.Next.Sub(next).Seconds(), 60, r.Note)
	require.InDelta(t, 240, r.Rate, 1, r.Note)
	require.InDelta(t, 240, x.SizingArrivalRate, 1)
	require.Contains(t, x.Reason, "recurring bursts")
	c := condition(e.get(t, "cron"), "RecurringBursts")
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, "Recurring", c.Reason)
	require.Contains(t, c.Message, "bursts recur every 20m0s")

	reactive, err := e.reconcile(t, ctrl, "cron-reactive")
	require.NoError(t, err)
	require.Nil(t, reactive.Explanation.Recurrence)
	require.Less(t, reactive.DesiredReplicas, d.DesiredReplicas, "λ = 60/s needs fewer pods than the 240/s forecast: %s", reactive.Explanation.Reason)
}
