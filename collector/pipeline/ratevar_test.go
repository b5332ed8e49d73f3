package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
	"github.com/qas-dev/qas/proxy/stats"
)

// perSecondPods are proxies' recorders on one stepped clock, each counting its
// arrivals per second (ticked by the test), served through real /stats
// handlers; a front replica of the workload comes with them.
type perSecondPods struct {
	clock   *stepClock
	recs    []*measure.Recorder
	ticks   []*measure.PerSecond
	targets []scrape.Target
}

func newPerSecondPods(t *testing.T, names ...string) *perSecondPods {
	// Near the real time: the scraper compares the proxies' clocks with its own.
	ps := &perSecondPods{clock: newStepClock(time.Now().Truncate(time.Second).Add(300 * time.Millisecond))}
	for _, name := range names {
		rec := measure.New(ps.clock.now, 0, 0)
		ps.recs = append(ps.recs, rec)
		ps.ticks = append(ps.ticks, rec.CountPerSecond(nil))
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		ps.targets = append(ps.targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: srv.URL + "/stats"})
	}
	front := measure.New(ps.clock.now, 0, 0)
	front.EnableFront()
	srv := httptest.NewServer(server.NewAdmin(front, "127.0.0.1:1", new(atomic.Bool)))
	t.Cleanup(srv.Close)
	ps.targets = append(ps.targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: "front-0", URL: srv.URL + "/stats", Front: true})
	return ps
}

// second lets one second pass: arrivals[i] requests arrive at pod i, then the
// clock crosses the next whole second and every pod's counter wakes 5 ms later.
func (ps *perSecondPods) second(arrivals ...int) {
	for i, n := range arrivals {
		for range n {
			ps.recs[i].Arrive()
		}
	}
	next := ps.clock.now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)
	ps.clock.step(next.Sub(ps.clock.now()))
	for _, p := range ps.ticks {
		p.Tick()
	}
}

func workloadFields(t *testing.T, points []*write.Point) map[string]any {
	t.Helper()
	for _, pt := range points {
		if pt.Name() == influx.Workload {
			out := map[string]any{}
			for _, f := range pt.FieldList() {
				out[f.Key] = f.Value
			}
			return out
		}
	}
	t.Fatal("no workload point")
	return nil
}

// TestWorkloadPointCarriesTheArrivalRateCV2: two pods' per-second counts,
// scraped through their real /stats, are added second by second; the workload
// point carries the cv² of the sum and its pairs, and the next cycle counts
// only its own seconds, joined to the previous cycle's by the pair they make.
func TestWorkloadPointCarriesTheArrivalRateCV2(t *testing.T) {
	ps := newPerSecondPods(t, "a", "b")
	var sink recording
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 3, time.Second, nil, zap.NewNop()), Sink: &sink}
	ctx := context.Background()
	ps.second(0, 0) // the counters' first wake: the second they started in is Missing
	p.Run(ctx, ps.targets)
	ps.clock.step(200 * time.Millisecond) // scraped at .005: the first of the seconds below ends after it

	a := []int{3, 9, 1, 4, 8, 2}
	b := []int{5, 0, 6, 2, 2, 7}
	for i := range a {
		ps.second(a[i], b[i])
	}
	ps.clock.step(300 * time.Millisecond)
	sink.points = nil
	c := p.Run(ctx, ps.targets)
	// The interval runs from .005 of the first second to .305 of the seventh:
	// the six seconds end inside it.
	sum := make([]int64, 0, len(a))
	for i := range a {
		sum = append(sum, int64(a[i]+b[i]))
	}
	want, err := ratevar.Of(sum)
	require.NoError(t, err)
	wantCV2, err := ratevar.CV2(want)
	require.NoError(t, err)
	m := c.Workloads[WorkloadKey{"ns", "w"}]
	require.Equal(t, want, m.ArrivalRateSums)
	require.Equal(t, 2, m.Pods, "the front is no pod")
	f := workloadFields(t, sink.points)
	require.Equal(t, wantCV2, f[influx.FieldArrivalRateCV2])
	require.Equal(t, 5.0, f[influx.FieldArrivalRatePairs])

	// The next cycle: three more seconds, none of the previous ones again.
	for _, n := range []int{4, 4, 5} {
		ps.second(n, 1)
	}
	sink.points = nil
	c = p.Run(ctx, ps.targets)
	want, err = ratevar.Of([]int64{int64(a[5] + b[5]), 5, 5, 6})
	require.NoError(t, err)
	require.Equal(t, want, c.Workloads[WorkloadKey{"ns", "w"}].ArrivalRateSums,
		"the seconds that end inside the new interval (the one in progress at the last scrape, and the next two), "+
			"and the pair they make with the previous cycle's last")
	f = workloadFields(t, sink.points)
	require.Equal(t, 3.0, f[influx.FieldArrivalRatePairs])
}

// TestBadArrivalsPerSecondCostsOnlyItself: a proxy serving an invalid series
// keeps its pod point and its place in the workload's λ; the series is left
// out, counted and logged, and the workload has no cv² (one pod has no series).
func TestBadArrivalsPerSecondCostsOnlyItself(t *testing.T) {
	ps := newPerSecondPods(t, "a")
	bad := measure.New(ps.clock.now, 0, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := bad.Snapshot()
		s.ArrivalsPerSecond = &stats.PerSecond{EndUnix: s.Time.Unix() - 1, Counts: []int64{1, -7}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	}))
	t.Cleanup(srv.Close)
	targets := append(ps.targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: "bad", Node: "n", URL: srv.URL + "/stats"})
	var sink recording
	sc := scrape.NewScraper(nil, 3, time.Second, nil, zap.NewNop())
	p := &Pipeline{Scraper: sc, Sink: &sink}
	ctx := context.Background()
	ps.second(0)
	p.Run(ctx, targets)
	for range 4 {
		bad.Arrive()
		ps.second(3)
	}
	c := p.Run(ctx, targets)
	require.Equal(t, 2.0, sc.Dropped(scrape.FieldArrivalsPerSecond), "one per scrape of the bad proxy")
	require.Contains(t, c.Pods, "ns/bad", "the rest of its document is kept")
	require.InDelta(t, 4/c.Pods["ns/bad"].ProxyTime.Sub(c.Results[len(c.Results)-1].Interval.Start).Seconds(), c.Pods["ns/bad"].ArrivalRate, 1e-9,
		"its arrivals count")
	m := c.Workloads[WorkloadKey{"ns", "w"}]
	require.Equal(t, 2, m.Pods)
	require.Greater(t, m.ArrivalRate, 0.0)
	require.False(t, m.ArrivalRateCV2Valid())
	require.NotContains(t, workloadFields(t, sink.points), influx.FieldArrivalRateCV2)
}
