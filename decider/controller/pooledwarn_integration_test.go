package controller_test

import (
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

// TestPooledFieldReadWithProblemsIsWarned: the store holds a pooled workload point
// whose expired_relayed_rate is -2 (no collector writes that). The controller warns
// once, naming the QueueAutoscaler, the field and its value, and still decides on
// the rest: λ, E[S], the pods, the front's queue, the requeued expiries and the
// refusals reach the engine as stored, the bad field as 0, and the decision is the
// one on the same measurements with that field 0 (workload "same", pooled too).
func TestPooledFieldReadWithProblemsIsWarned(t *testing.T) {
	e := pooledAndPlain(t)
	e.deployment(t, "same", 2)
	e.queueAutoscalerWith(t, "same", "same", false, map[string]any{"routing": "pooled"})
	now := e.clock.Now()
	mem := store.NewMemory()
	for workload, relayed := range map[string]float64{"burst": -2, "same": 0} {
		var pts []*write.Point
		for i := range 3 {
			fields := map[string]any{influx.FieldArrivalRate: 10.0, influx.FieldServiceMean: 0.05, influx.FieldServiceSCV: 1.0}
			if i == 2 { // the newest point carries the pooled fields the decider reads
				fields[influx.FieldOverflowShare] = 0.25
				fields[influx.FieldFrontQueueLength] = 120.0
				fields[influx.FieldExpiredRequeuedRate] = 1.0
				fields[influx.FieldExpiredRelayedRate] = relayed
				fields[influx.FieldFrontRefusedFullRate] = 2.0
			}
			pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": e.ns, "workload": workload},
				fields, now.Add(time.Duration(i-2)*5*time.Second)))
		}
		pods := e.pods(t, workload)
		require.Len(t, pods, 2)
		for _, p := range pods {
			// Every pod Ready one second after its creation, so that both
			// workloads' init times (the engine's lead) are the same: kwok
			// makes them Ready within a second or two, as it happens.
			e.setReady(t, p.Name, true, p.CreationTimestamp.Add(time.Second))
			pts = append(pts, write.NewPoint(influx.Pod, map[string]string{"namespace": e.ns, "workload": workload, "pod": p.Name, "node": p.Spec.NodeName},
				map[string]any{influx.FieldServiceMean: 0.05, influx.FieldCPUUsage: 0.3, influx.FieldCPURequest: 0.5, influx.FieldCPULimit: 1.0}, now))
		}
		mem.Write(pts...)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	ctrl := e.startController(t, e.c.Config, nil, func(c *controller.Controller) {
		c.Metrics = store.Source{Store: mem, Window: time.Minute, MaxPodAge: time.Minute}
		c.Front = frontConfig("example/qas-proxy:1")
		c.Log = zap.New(core)
	})
	var seen []decide.Snapshot
	controller.SetDecideHook(ctrl, func(s decide.Snapshot) { seen = append(seen, s) })
	d, err := e.reconcile(t, ctrl, "burst")
	require.NoError(t, err)

	warned := logs.FilterMessage("pooled data plane fields read with problems").All()
	require.Len(t, warned, 1, "%v", logs.All())
	require.Equal(t, e.ns+"/burst", warned[0].ContextMap()["queueautoscaler"])
	require.Equal(t, "expired_relayed_rate = -2 is not a finite number ≥ 0: read as 0", warned[0].ContextMap()["error"],
		"names the field and its value, and only it")

	require.Len(t, seen, 1, "the engine decided")
	s := seen[0]
	require.Len(t, s.ArrivalRates, 1, "three points 5 s apart, one 15 s window")
	require.Equal(t, 10.0, s.ArrivalRates[0].Rate)
	require.Equal(t, 5*time.Second, s.ShortWindow, "the newest point")
	require.Equal(t, 0.05, s.ServiceTime)
	require.True(t, s.Complete, "both pods measured")
	require.Len(t, s.Pods, 2)
	require.Equal(t, 120.0, s.FrontQueue)
	require.Equal(t, 1.0, s.FrontExpiredRate, "the requeued expiries; the relayed ones read as none")
	require.Equal(t, 2.0, s.FrontRefusedRate)

	x := d.Explanation
	require.Empty(t, x.HeldBecause, "reason: %s", x.Reason)
	require.Equal(t, 1.0, x.FrontExpiredRate)
	require.Equal(t, 2.0, x.FrontRefusedRate)
	require.InDelta(t, 5, x.BacklogExpired, 1e-9, "1/s × the 5 s interval, reason: %s", x.Reason)

	same, err := e.reconcile(t, ctrl, "same")
	require.NoError(t, err)
	require.Len(t, logs.FilterMessage("pooled data plane fields read with problems").All(), 1, "no warning for good fields")
	require.Len(t, seen, 2)
	s.Pods, seen[1].Pods = nil, nil // their names differ
	require.Equal(t, seen[1], s, "the engine's input is the one with the field at 0")
	require.Equal(t, same.Action, d.Action)
	require.Equal(t, same.DesiredReplicas, d.DesiredReplicas)
	require.Equal(t, same.Explanation, x)
}
