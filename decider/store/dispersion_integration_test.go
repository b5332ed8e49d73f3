package store

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// TestTheControllersEngineMeasuresBatchesThroughInfluxDB: ten minutes of the
// collector's 5 s points of two workloads at the same 40 requests/s, one of
// Poisson arrivals and one of arrivals in batches of 50, are written to a
// real InfluxDB; the controller's decisions are then replayed every 5 s from
// the second minute on, each reading its workload through Flux and Source
// and deciding on the snapshot the controller builds from it. What the engine
// is given is the layout it needs: λ over 15 s windows laid back from the
// newest point, which alone is the 5 s short window. So it measures the
// counts' dispersion: about the batch size for the batches, about 1 for
// Poisson. Until 2026-11-29 every point was a λ sample and the newest one the
// short window as well, so the short window said nothing of the dispersion and
// the batches read as Poisson: RateWindow −1, which keeps the points, still
// reads them so.
func TestTheControllersEngineMeasuresBatchesThroughInfluxDB(t *testing.T) {
	const (
		rate    = 40.0 // requests/s, both workloads
		scrape  = 5 * time.Second
		points  = 121 // ten minutes of scrapes
		first   = 12  // the first decision's point: the second minute
		service = 0.05
	)
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[string][]float64{
		"poisson": arrivals(rng, rate, 1, scrape, points),
		"batched": arrivals(rng, rate, 50, scrape, points),
	}
	var pts []*write.Point
	for name, c := range counts {
		for i, n := range c {
			pts = append(pts, write.NewPoint(influx.Workload, map[string]string{influx.TagNamespace: "ns", influx.TagWorkload: name},
				map[string]any{influx.FieldArrivalRate: n / scrape.Seconds(), influx.FieldServiceMean: service, influx.FieldServiceSCV: 1.0,
					influx.FieldServiceSamples: n}, t0.Add(time.Duration(i)*scrape)))
		}
	}
	fl := &Flux{Query: influxWith(t, pts...), Bucket: influxtest.Bucket}

	for _, tc := range []struct {
		name, workload string
		rateWindow     time.Duration
		step           time.Duration // between the λ samples the engine is given
		min, max       float64       // the last decision's count dispersion
	}{
		{"batches of 50", "batched", 0, 15 * time.Second, 10, 200},
		{"Poisson", "poisson", 0, 15 * time.Second, 1.0 / 3, 3},
		// The points as they are: the newest λ sample is the short window, which
		// the engine does not count, so the batches stay at Poisson's 1.
		{"batches of 50, the points as λ samples", "batched", -1, scrape, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The replay's later points are in each decision's future: a
			// MaxClockSkew of 1 s reads none of them (the default's 10 minutes
			// would read the rest of the run).
			src := Source{Store: fl, Window: time.Hour, RateWindow: tc.rateWindow, MaxClockSkew: time.Second}
			c := counts[tc.workload]
			e := decide.NewEngine()
			var d decide.Decision
			for i := first; i < points; i++ {
				at := t0.Add(time.Duration(i) * scrape)
				now := at.Add(2 * time.Second) // the decider's cycle runs 2 s after the scrape
				m, err := src.Measure(context.Background(), measurement.Query{Namespace: "ns", Workload: tc.workload, Now: now})
				require.NoError(t, err)
				require.True(t, m.Complete)
				require.True(t, at.Equal(m.DataTime), "decision at %s", now)
				requireLayout(t, m, at, tc.step, scrape)
				require.InDelta(t, c[i]/scrape.Seconds(), m.ShortArrivalRate, 1e-9, "the newest point alone")
				if tc.step == 15*time.Second {
					require.InDelta(t, (c[i]+c[i-1]+c[i-2])/15, m.ArrivalRates[len(m.ArrivalRates)-1].Rate, 1e-9,
						"the newest window: the newest three points")
				}
				d, err = e.Decide(testSpec(), controllerSnapshot(now, m, 4))
				require.NoError(t, err)
				require.Empty(t, d.Explanation.HeldBecause)
				e.Revert(d) // not applied: the points were measured at 4 replicas
			}
			t.Logf("%s: count dispersion %.2f after %d decisions", tc.name, d.Explanation.CountDispersion, points-first)
			require.GreaterOrEqual(t, d.Explanation.CountDispersion, tc.min)
			require.LessOrEqual(t, d.Explanation.CountDispersion, tc.max)
		})
	}
}

// arrivals counts, per scrape interval, the requests of a Poisson process of
// batches of the given size at rate/batch batches per second: what each of n
// collector points counts.
func arrivals(rng *rand.Rand, rate float64, batch int, interval time.Duration, n int) []float64 {
	counts := make([]float64, n)
	per, batches := interval.Seconds(), rate/float64(batch)
	for at := rng.ExpFloat64() / batches; at < per*float64(n); at += rng.ExpFloat64() / batches {
		counts[int(at/per)] += float64(batch)
	}
	return counts
}

// requireLayout asserts that m's λ samples are step apart and end at the
// newest point (at), and that its short window is the newest scrape.
func requireLayout(t *testing.T, m measurement.Workload, at time.Time, step, scrape time.Duration) {
	t.Helper()
	rates := m.ArrivalRates
	require.GreaterOrEqual(t, len(rates), 2)
	require.True(t, at.Equal(rates[len(rates)-1].Time), "the newest sample ends at the newest point")
	for k := 1; k < len(rates); k++ {
		require.Equal(t, step, rates[k].Time.Sub(rates[k-1].Time), "samples %d and %d", k-1, k)
	}
	require.Equal(t, scrape, m.ShortWindow)
}

// testSpec is a percentile target the workloads meet with a few replicas.
func testSpec() decide.Spec {
	return decide.Spec{MinReplicas: 1, MaxReplicas: 200, Target: 200 * time.Millisecond, Percentile: 95,
		Tolerance: 0.1, Concurrency: 1}
}

// controllerSnapshot is the engine's snapshot of m at now as the controller
// builds it (decider/controller), for a workload of replicas Ready replicas
// whose pods are not read.
func controllerSnapshot(now time.Time, m measurement.Workload, replicas int32) decide.Snapshot {
	return decide.Snapshot{
		Now:          now,
		ArrivalRates: m.ArrivalRates, History: m.History, ServiceTime: m.ServiceTime, ServiceSCV: m.ServiceSCV,
		ServiceSamples: m.ServiceSamples, MeasuredLatency: m.MeasuredLatency, MeasuredQuantiles: m.MeasuredQuantiles,
		ServiceQuantiles: m.ServiceQuantiles, LatencyBuckets: m.LatencyBuckets, ServiceBuckets: m.ServiceBuckets,
		ShortArrivalRate: m.ShortArrivalRate, ShortWindow: m.ShortWindow,
		RateCV2: m.RateCV2, RateCV2Pairs: m.RateCV2Pairs,
		CurrentReplicas: replicas, ReadyReplicas: replicas,
		DataTime: m.DataTime, Complete: m.Complete,
	}
}
