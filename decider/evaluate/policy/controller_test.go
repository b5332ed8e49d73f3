package policy

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
)

// TestQASReadsLambdaAsTheControllerDoes: the simulator's qas hands the engine
// the λ the controller's store gives it from the collector's points (one per
// 5 s scrape, each the arrivals since the last over the interval), for the
// same arrivals: the same long windows, the same short one. Until 2026-11-29
// they differed: the store gave every 5 s point as a sample and the newest as
// the short window too, so the controller's engine never measured the
// counts' dispersion, and it read ten minutes of them where this reads an
// hour (both read measurement.DefaultWindow, six hours, since round
// twenty-nine; the last run is longer than that, so the window's start is
// checked too).
func TestQASReadsLambdaAsTheControllerDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	for _, now := range []int{5, 35, 600, 3600, 4000, int(measurement.DefaultWindow/time.Second) + 400} {
		o := &Observation{Now: float64(now), Concurrency: 1, Pods: []Pod{{ID: 1, Ready: true, CPU: 1}}}
		for range now {
			// Batches: most seconds few arrivals, some very many.
			n := rng.IntN(5)
			if rng.IntN(10) == 0 {
				n += 50
			}
			o.Seconds = append(o.Seconds, Second{Arrivals: n})
		}
		snap := NewQAS("qas", params, true).Snapshot(o)

		mem := store.NewMemory()
		for end := 5; end <= now; end += int(QASPeriod) {
			var n int
			for _, s := range o.Seconds[end-5 : end] {
				n += s.Arrivals
			}
			mem.Write(write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "w"},
				map[string]any{influx.FieldArrivalRate: float64(n) / QASPeriod, influx.FieldServiceMean: 0.05},
				simEpoch.Add(time.Duration(end)*time.Second)))
		}
		m, err := store.Source{Store: mem, Window: measurement.DefaultWindow}.Measure(context.Background(),
			measurement.Query{Namespace: "ns", Workload: "w", Now: simEpoch.Add(time.Duration(now) * time.Second)})
		require.NoError(t, err)
		require.Equal(t, len(snap.ArrivalRates), len(m.ArrivalRates), "at %d s", now)
		for i := range m.ArrivalRates {
			require.True(t, snap.ArrivalRates[i].Time.Equal(m.ArrivalRates[i].Time), "at %d s, window %d", now, i)
			require.InDelta(t, snap.ArrivalRates[i].Rate, m.ArrivalRates[i].Rate, 1e-9, "at %d s, window %d", now, i)
		}
		if now > 5 { // the store knows a point's interval from the one before it
			require.InDelta(t, snap.ShortArrivalRate, m.ShortArrivalRate, 1e-12, "at %d s", now)
			require.Equal(t, snap.ShortWindow, m.ShortWindow, "at %d s", now)
		}
	}
}
