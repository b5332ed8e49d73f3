package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// TestRunWithJoinsCPU scrapes two recorders' real /stats handlers and checks the points:
// only declared fields, CPU joined onto the pod that has it, read back by the store.
func TestRunWithJoinsCPU(t *testing.T) {
	var targets []scrape.Target
	var recs []*measure.Recorder
	for _, name := range []string{"a", "b"} {
		rec := measure.New(nil, 0, 0)
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		recs = append(recs, rec)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: srv.URL + "/stats"})
	}
	mem := store.NewMemory()
	var sink recording
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 2, time.Second, nil, zap.NewNop()), Sink: multi{mem, &sink}}
	ctx := context.Background()
	require.Zero(t, p.Run(ctx, targets).Points)
	for _, r := range recs {
		a := r.Arrive()
		r.End(a, r.Begin(), 0, http.StatusOK, measure.OK)
	}
	c := p.RunWith(ctx, targets, map[string]Resources{"ns/a": {Usage: 0.3, HasUsage: true, Request: 250, Limit: 500}})
	require.Equal(t, 3, c.Points)
	require.EqualValues(t, 2, c.Workloads[WorkloadKey{"ns", "w"}].Completions)
	for _, pt := range sink.points {
		m, ok := influx.Lookup(pt.Name())
		require.True(t, ok)
		for _, f := range pt.FieldList() {
			require.True(t, m.Declares(f.Key), "%s.%s is declared in the schema", pt.Name(), f.Key)
		}
		for _, tag := range pt.TagList() {
			require.Contains(t, m.Tags, tag.Key)
		}
	}
	snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 2)
	require.Equal(t, 0.3, snap.Pods[0].CPUUsage)
	require.EqualValues(t, 250, snap.Pods[0].CPURequest)
	require.EqualValues(t, 500, snap.Pods[0].CPULimit)
	require.Zero(t, snap.Pods[1].CPUUsage)
	// The two served requests, one per pod, are what the service time is over.
	require.Equal(t, 2.0, snap.ServiceSamples)
}

// TestSkewedProxyIsCountedAndLoggedOnChange: a proxy whose clock steps 3 minutes
// ahead is counted in Skewed every cycle but logged once, and once more when its clock
// is corrected; its points carry the collector's time and its offset. The correction
// (the clock stepping back) starts a new baseline instead of blinding the pod until
// its clock catches up with the old one.
func TestSkewedProxyIsCountedAndLoggedOnChange(t *testing.T) {
	var ahead atomic.Int64
	rec := measure.New(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }, 0, 0)
	srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
	t.Cleanup(srv.Close)
	targets := []scrape.Target{{Namespace: "ns", Workload: "w", Pod: "p", Node: "n", URL: srv.URL + "/stats"}}
	core, logs := observer.New(zapcore.InfoLevel)
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "skewed"})
	sc := scrape.NewScraper(nil, 1, time.Second, nil, zap.NewNop())
	p := &Pipeline{Scraper: sc, Sink: &recording{}, Log: zap.New(core), Skewed: gauge}
	ctx := context.Background()
	p.Run(ctx, targets)
	ahead.Store(int64(3 * time.Minute)) // the node's clock steps ahead
	for range 3 {
		before := time.Now()
		c := p.Run(ctx, targets)
		require.Contains(t, c.Pods, "ns/p")
		require.Equal(t, 1.0, gaugeValue(gauge))
		m := c.Pods["ns/p"]
		require.False(t, m.Time.Before(before), "timed by the collector's clock")
		require.False(t, m.Time.After(time.Now()))
		require.InDelta(t, 180, m.ClockOffset, 1)
	}
	offLog := "proxy clock is off the collector's; its points carry the collector's time"
	require.Equal(t, 1, logs.FilterMessage(offLog).Len())

	ahead.Store(0) // corrected: the proxy's clock steps back 3 minutes
	c := p.Run(ctx, targets)
	require.NotContains(t, c.Pods, "ns/p")
	require.Equal(t, 1.0, sc.Rebases(scrape.ReasonClockStepped))
	c = p.Run(ctx, targets)
	require.Contains(t, c.Pods, "ns/p", "measured again at once")
	require.InDelta(t, 0, c.Pods["ns/p"].ClockOffset, 1)
	require.Equal(t, 0.0, gaugeValue(gauge))
	require.Equal(t, 1, logs.FilterMessage("proxy clock agrees with the collector's again").Len())
	require.Equal(t, 1, logs.FilterMessage(offLog).Len())
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}

// stepClock is a clock the test moves; the recorders read it from the admin
// handlers' goroutines.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) now() time.Time                         { return time.Unix(0, c.ns.Load()) }
func (c *stepClock) step(d time.Duration)                   { c.ns.Add(int64(d)) }
func (c *stepClock) elapsedSince(t time.Time) time.Duration { return c.now().Sub(t) }
func newStepClock(t time.Time) *stepClock {
	c := &stepClock{}
	c.ns.Store(t.UnixNano())
	return c
}

// TestPooledWorkloadPoint: two sidecars that overflow and a front replica, scraped
// through their real /stats, recording what the proxy records for each way a
// request takes (served here, overflowed and pulled by the other, pushed at the
// drain, given back unseen and served here or answered with the front's 503, kept
// at the drain, rejected): the workload point counts each request once in λ, E[S]
// is over the requests served, it carries the overflow, drain and expiry rates
// and the front's queue (summed), the front writes no pod point and is no pod of
// the workload, and a cycle in which only the front answered writes no workload
// point.
func TestPooledWorkloadPoint(t *testing.T) {
	admin := func(rec *measure.Recorder) string {
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		return srv.URL + "/stats"
	}
	clock := newStepClock(time.Now())
	var targets []scrape.Target
	var pools []*measure.PoolCounters
	var sidecars []*measure.Recorder
	for _, name := range []string{"a", "b"} {
		rec := measure.New(clock.now, 0, 0)
		pools = append(pools, rec.EnablePool())
		sidecars = append(sidecars, rec)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: admin(rec)})
	}
	frontRec := measure.New(clock.now, 0, 0)
	front := frontRec.EnableFront()
	frontTarget := scrape.Target{Namespace: "ns", Workload: "w", Pod: "qas-front-w-x", Node: "n", URL: admin(frontRec), Front: true}
	targets = append(targets, frontTarget)

	mem := store.NewMemory()
	var sink recording
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 2, time.Second, nil, zap.NewNop()), Sink: multi{mem, &sink}}
	ctx := context.Background()
	require.Zero(t, p.Run(ctx, targets).Points, "baselines")
	start := clock.now()
	a, b, poolA, poolB := sidecars[0], sidecars[1], pools[0], pools[1]
	// serve records a request served in a slot for 10 ms.
	serve := func(rec *measure.Recorder, arrived time.Time) {
		began := rec.Begin()
		clock.step(10 * time.Millisecond)
		rec.End(arrived, began, time.Millisecond, http.StatusOK, measure.OK)
	}
	// overflowed records a request accepted by the front and pulled by the other
	// sidecar, which serves it; drained says it left the sender's local queue at
	// its drain.
	overflowed := func(sender *measure.Recorder, senderPool *measure.PoolCounters, puller *measure.Recorder, pullerPool *measure.PoolCounters, drained bool) {
		arrived := sender.Arrive()
		senderPool.Overflow(measure.OverflowAccepted, time.Millisecond)
		puller.Arrive()
		began := puller.Begin()
		clock.step(10 * time.Millisecond)
		puller.EndPulled(began, time.Millisecond, measure.OK)
		pullerPool.Pulled()
		if drained {
			senderPool.DrainPushed()
		}
		sender.EndOverflowed(arrived, http.StatusOK, measure.OK)
	}
	for _, rec := range sidecars {
		for range 3 {
			serve(rec, rec.Arrive())
		}
	}
	overflowed(a, poolA, b, poolB, false)
	overflowed(a, poolA, b, poolB, true)
	overflowed(b, poolB, a, poolA, false)
	// a: given back unseen and served here; given back unseen and the front's 503
	// relayed; offered at the drain, refused and served here; rejected.
	arrived := a.Arrive()
	poolA.Overflow(measure.OverflowAccepted, time.Millisecond)
	poolA.Expired(true)
	serve(a, arrived)
	arrived = a.Arrive()
	poolA.Overflow(measure.OverflowAccepted, time.Millisecond)
	poolA.Expired(false)
	a.EndOverflowed(arrived, http.StatusServiceUnavailable, measure.OK)
	arrived = a.Arrive()
	poolA.Overflow(measure.OverflowRefused, time.Millisecond)
	poolA.DrainKept()
	serve(a, arrived)
	a.Reject(a.Arrive())
	for range 3 {
		front.Accept()
	}
	front.Dispatch(time.Millisecond)
	clock.step(2*time.Second - clock.elapsedSince(start))
	c := p.Run(ctx, targets)
	require.Equal(t, 3, c.Points, "two pod points and one workload point: none for the front")
	w := c.Workloads[WorkloadKey{"ns", "w"}]
	require.Equal(t, 2, w.Pods)
	require.Equal(t, 1, w.Fronts)
	require.True(t, w.Pooled)
	// 13 requests arrived: a's 9 (3 served, 2 overflowed, 1 given back and served,
	// 1 given back and relayed, 1 kept, 1 rejected), b's 4 (3 served, 1 overflowed).
	require.InDelta(t, 13.0/2, w.ArrivalRate, 1e-9, "each request once, in 2 s")
	require.EqualValues(t, 13, w.Completions)
	require.EqualValues(t, 11, w.Served, "all but the rejected and the relayed 503")
	require.InDelta(t, 0.010, w.ServiceMean, 1e-9, "every served request held its slot 10 ms")
	require.InDelta(t, 2.0/2, w.ErrorRate, 1e-9, "the rejected 503 and the relayed 503, once each")
	require.InDelta(t, 4.0/13, w.OverflowShare, 1e-9, "2 of a's and 1 of b's answered through the front, and the relayed 503")
	require.InDelta(t, 5.0/2, w.OverflowRate, 1e-9)
	require.InDelta(t, 3.0/2, w.PulledRate, 1e-9)
	require.InDelta(t, 1.0/2, w.DrainPushedRate, 1e-9)
	require.InDelta(t, 1.0/2, w.DrainKeptRate, 1e-9)
	require.InDelta(t, 1.0/2, w.ExpiredRequeuedRate, 1e-9)
	require.InDelta(t, 1.0/2, w.ExpiredRelayedRate, 1e-9)
	require.InDelta(t, 2, w.FrontQueueLength, 1e-9, "3 accepted, 1 dispatched")
	require.Greater(t, w.OverflowDecisionP50, 0.0, "two 1 ms decisions")
	require.LessOrEqual(t, w.OverflowDecisionP50, 0.001)
	require.Greater(t, w.FrontQueueWaitP50, 0.0, "one 1 ms wait")
	for _, pt := range sink.points {
		m, ok := influx.Lookup(pt.Name())
		require.True(t, ok)
		for _, f := range pt.FieldList() {
			require.True(t, m.Declares(f.Key), "%s.%s is declared in the schema", pt.Name(), f.Key)
		}
	}
	snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 2, "the front is not among the workload's pods")
	require.InDelta(t, 4.0/13, snap.OverflowShare, 1e-9)
	require.InDelta(t, 13.0/2, snap.ArrivalRates[len(snap.ArrivalRates)-1].Rate, 1e-9)
	require.InDelta(t, 0.010, snap.ServiceTime, 1e-9)
	require.InDelta(t, 2, snap.FrontQueue, 1e-9)
	// The decider reads the fronts' expiries as the senders counted them.
	require.InDelta(t, 1.0/2, snap.ExpiredRequeuedRate, 1e-9)
	require.InDelta(t, 1.0/2, snap.ExpiredRelayedRate, 1e-9)
	require.Equal(t, w.FrontRefusedFullRate, snap.FrontRefusedRate)
	require.Empty(t, snap.PooledError)

	// Only the front answers: no workload point (it would read as λ = 0).
	front.Accept()
	before := len(sink.points)
	c = p.Run(ctx, []scrape.Target{frontTarget})
	require.Zero(t, c.Points)
	require.Len(t, sink.points, before)
}
