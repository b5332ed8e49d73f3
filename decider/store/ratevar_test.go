package store

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// TestRateCV2FromTheCollectorThroughInfluxDB: two proxies' recorders count
// arrivals per second on a stepped clock and serve their real /stats (with a
// front replica of the workload); the collector's pipeline scrapes them and
// writes to a real InfluxDB; Flux reads the window back. Its RateCV2 is the
// newest cycle's estimate with its pairs, the interval the engine folds into
// its own average; a cycle without one (no arrival in its pairs) has none.
func TestRateCV2FromTheCollectorThroughInfluxDB(t *testing.T) {
	db := influxtest.Start(t)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)

	var clockNS atomic.Int64 // near the real time: the points are timed by the collector's clock
	clockNS.Store(time.Now().Truncate(time.Second).Add(300 * time.Millisecond).UnixNano())
	now := func() time.Time { return time.Unix(0, clockNS.Load()) }
	var recs []*measure.Recorder
	var counters []*measure.PerSecond
	var targets []scrape.Target
	for _, name := range []string{"a", "b", "front-0"} {
		rec := measure.New(now, 0, 0)
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		tg := scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: srv.URL + "/stats"}
		if name == "front-0" {
			rec.EnableFront()
			tg.Front = true
		} else {
			recs = append(recs, rec)
			counters = append(counters, rec.CountPerSecond(nil))
		}
		targets = append(targets, tg)
	}
	second := func(a, b int) {
		for i, n := range []int{a, b} {
			for range n {
				recs[i].Arrive()
			}
		}
		next := now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond)
		clockNS.Store(next.UnixNano())
		for _, c := range counters {
			c.Tick()
		}
	}

	p := &pipeline.Pipeline{Scraper: scrape.NewScraper(nil, 3, time.Second, nil, zap.NewNop()), Sink: w}
	ctx := context.Background()
	second(0, 0)
	p.Run(ctx, targets)
	var pairs float64
	var newest, newestPairs float64 // the last cycle's estimate
	for _, cycle := range [][][2]int{
		{{3, 5}, {9, 0}, {1, 6}, {4, 2}, {8, 2}, {2, 7}}, // 5 pairs
		{{0, 0}, {0, 0}, {0, 0}},                         // 3 pairs, with the previous cycle's last second (9)
		{{0, 0}, {0, 0}, {0, 0}},                         // 3 pairs without an arrival: no estimate
		{{10, 1}, {2, 2}, {7, 7}, {1, 0}, {12, 3}},       // 5 pairs
	} {
		for _, s := range cycle {
			second(s[0], s[1])
		}
		c := p.Run(ctx, targets)
		m, ok := c.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}]
		require.True(t, ok)
		newest, newestPairs = 0, 0
		if m.ArrivalRateCV2Valid() {
			pairs += float64(m.ArrivalRateSums.Pairs)
			newest, newestPairs = m.ArrivalRateCV2, float64(m.ArrivalRateSums.Pairs)
		}
		time.Sleep(10 * time.Millisecond) // the points' times (the collector's clock) must differ
	}
	require.Equal(t, 13.0, pairs, "the pairs of the cycles with an estimate")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	_, _, dropped := w.Counts()
	require.Zero(t, dropped)

	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	fl := &Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	got, err := fl.Snapshot(ctx, Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, got.ArrivalRates, 4)
	require.Equal(t, 5.0, newestPairs)
	require.Equal(t, newestPairs, got.RateCV2Pairs)
	require.InDelta(t, newest, got.RateCV2, 1e-12)
	require.NotZero(t, got.RateCV2)
}
