package controller_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
)

// TestReconcileWarnsOfABadPooledField is TestPooledFieldReadWithProblemsIsWarned on
// client-go fakes (no API server): the store's pooled workload point has
// front_queue_length = NaN, which the memory store holds (InfluxDB would refuse
// it). The controller warns once, naming the field and its value, and the engine
// decides on the rest (λ, E[S], the pods, the other pooled fields) exactly as on
// the same point with that field 0, which gives no warning.
func TestReconcileWarnsOfABadPooledField(t *testing.T) {
	type cycle struct {
		warned   []observer.LoggedEntry
		snap     decide.Snapshot
		d        decide.Decision
		scaledTo []int32
	}
	run := func(frontQueue float64) cycle {
		now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // newFakeCluster's clock
		mem := store.NewMemory()
		for i := range 3 {
			fields := map[string]any{influx.FieldArrivalRate: 60.0, influx.FieldServiceMean: 0.05, influx.FieldServiceSCV: 1.0}
			if i == 2 {
				fields[influx.FieldFrontQueueLength] = frontQueue
				fields[influx.FieldExpiredRequeuedRate] = 1.0
				fields[influx.FieldFrontRefusedFullRate] = 2.0
			}
			mem.Write(write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "web"}, fields, now.Add(time.Duration(i-2)*10*time.Second)))
		}
		for _, pod := range []string{"web-a", "web-b"} {
			mem.Write(write.NewPoint(influx.Pod, map[string]string{"namespace": "ns", "workload": "web", "pod": pod, "node": "n1"},
				map[string]any{influx.FieldServiceMean: 0.05, influx.FieldCPUUsage: 0.3, influx.FieldCPURequest: 0.5, influx.FieldCPULimit: 0.5}, now))
		}
		f := newFakeCluster(t, 2, map[string]any{"routing": "pooled"}, store.Source{Store: mem, Window: time.Minute}, nil)
		core, logs := observer.New(zapcore.WarnLevel)
		f.ctrl.Log = zap.New(core)
		var seen []decide.Snapshot
		controller.SetDecideHook(f.ctrl, func(s decide.Snapshot) { seen = append(seen, s) })
		d, err := f.ctrl.Reconcile(context.Background(), "ns", "web")
		require.NoError(t, err)
		require.Len(t, seen, 1, "the engine decided")
		return cycle{logs.FilterMessage("pooled data plane fields read with problems").All(), seen[0], d, f.scaledTo}
	}

	bad, good := run(math.NaN()), run(0)
	require.Len(t, bad.warned, 1)
	require.Equal(t, "ns/web", bad.warned[0].ContextMap()["queueautoscaler"])
	require.Equal(t, "front_queue_length = NaN is not a finite number ≥ 0: read as 0", bad.warned[0].ContextMap()["error"])
	require.Empty(t, good.warned)

	s := bad.snap
	require.Len(t, s.ArrivalRates, 2, "three points 10 s apart, in the engine's 15 s windows")
	require.Equal(t, 60.0, s.ArrivalRates[1].Rate)
	require.Equal(t, 0.05, s.ServiceTime)
	require.True(t, s.Complete)
	require.Len(t, s.Pods, 2)
	require.Zero(t, s.FrontQueue, "the bad field reads as none")
	require.Equal(t, 1.0, s.FrontExpiredRate)
	require.Equal(t, 2.0, s.FrontRefusedRate)
	require.Equal(t, good.snap, bad.snap)
	require.Empty(t, bad.d.Explanation.HeldBecause, bad.d.Explanation.Reason)
	require.Equal(t, good.d, bad.d)
	require.Equal(t, []int32{5}, bad.scaledTo, bad.d.Explanation.Reason)
	require.Equal(t, good.scaledTo, bad.scaledTo)
}
