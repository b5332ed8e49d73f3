package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// faultyPod serves a real proxy recorder's /stats through the real admin handler, and
// can be switched to serve garbage, a restarted process (a new recorder), or the same
// process with its counters reset.
type faultyPod struct {
	mu   sync.Mutex
	rec  *measure.Recorder
	mode string // "", "garbage", "extreme", "reset"
}

func (f *faultyPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	rec, mode := f.rec, f.mode
	f.mu.Unlock()
	switch mode {
	case "garbage":
		_, _ = w.Write([]byte(`{"version":1,"instance_id":"x","arrivals":"many"}`))
	case "extreme":
		s := rec.Snapshot()
		s.InFlightSeconds = 1.7976931348623157e308 // finite, so a bare finiteness check passes it
		_ = json.NewEncoder(w).Encode(s)
	case "reset":
		s := rec.Snapshot()
		s.Arrivals, s.Completions, s.ServiceSecondsSum, s.ServiceSecondsSumSq, s.TTFBSecondsSum = 0, 0, 0, 0, 0
		s.InFlightSeconds, s.BusySeconds, s.LatencySecondsSum, s.Codes = 0, 0, 0, [5]uint64{}
		s.Latency.Counts = make([]uint64, len(s.Latency.Counts))
		s.Service.Counts = make([]uint64, len(s.Service.Counts))
		_ = json.NewEncoder(w).Encode(s)
	default:
		server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)).ServeHTTP(w, r)
	}
}

func (f *faultyPod) set(mode string, rec *measure.Recorder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
	if rec != nil {
		f.rec = rec
	}
}

// TestOneBadPodLeavesOthersAlone drives real requests through two real proxies and
// one pod whose /stats turns to garbage, then restarts, then resets its counters; each
// time that pod is skipped or rebased with a logged reason and a metric, and the
// healthy pods' intervals and the workload aggregate carry on.
func TestOneBadPodLeavesOthersAlone(t *testing.T) {
	serving, targets := startPods(t, 2, func(i int) scrape.Target {
		return scrape.Target{Namespace: "ns", Workload: "w", Pod: fmt.Sprintf("good-%d", i), Node: fmt.Sprintf("n%d", i)}
	})
	bad := &faultyPod{rec: measure.New(nil, 0, 0)}
	badSrv := httptest.NewServer(bad)
	t.Cleanup(badSrv.Close)
	targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: "bad", Node: "n2", URL: badSrv.URL + "/stats"})

	core, logs := observer.New(zapcore.WarnLevel)
	sc := scrape.NewScraper(nil, 4, 2*time.Second, prometheus.NewRegistry(), zap.New(core))
	mem := store.NewMemory()
	p := &pipeline.Pipeline{Scraper: sc, Sink: mem}
	ctx := context.Background()

	send := func(n int) {
		for range n {
			for _, s := range serving {
				resp, err := http.Get(s + "/work?sleep=1ms")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			arrived := bad.rec.Arrive()
			bad.rec.End(arrived, bad.rec.Begin(), 0, http.StatusOK, measure.OK)
		}
	}
	check := func(c pipeline.Cycle, badOK bool, reason string) {
		t.Helper()
		for _, r := range c.Results {
			if r.Target.Pod == "bad" {
				require.Equal(t, badOK, r.OK)
				require.Equal(t, reason, r.Reason)
				continue
			}
			require.True(t, r.OK, "healthy pod %s: %s %v", r.Target.Pod, r.Reason, r.Err)
			require.EqualValues(t, 5, r.Interval.Arrivals, r.Target.Pod)
		}
		wl := c.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}]
		want := 2
		if badOK {
			want = 3
		}
		require.Equal(t, want, wl.Pods)
		require.EqualValues(t, 5*want, wl.Completions)
	}

	p.Run(ctx, targets)
	send(5)
	check(p.Run(ctx, targets), true, "")

	bad.set("garbage", nil)
	send(5)
	check(p.Run(ctx, targets), false, scrape.FailDecode)
	require.Equal(t, 1.0, sc.Failures(scrape.FailDecode))
	require.Equal(t, 1, logs.FilterMessage("scrape skipped").FilterField(zap.String("reason", scrape.FailDecode)).Len())

	bad.set("", measure.New(nil, 0, 0)) // the proxy restarted
	send(5)
	check(p.Run(ctx, targets), false, scrape.ReasonRestart)
	require.Equal(t, 1.0, sc.Rebases(scrape.ReasonRestart))
	send(5)
	check(p.Run(ctx, targets), true, "")

	bad.set("reset", nil) // same process, counters went back to zero
	send(5)
	check(p.Run(ctx, targets), false, scrape.ReasonCounterDecrease)
	require.Equal(t, 1.0, sc.Rebases(scrape.ReasonCounterDecrease))
	require.Equal(t, 1, logs.FilterMessage("rebased").FilterField(zap.String("reason", scrape.ReasonCounterDecrease)).Len())

	snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, snap.ArrivalRates, 5)
	require.Len(t, snap.Pods, 3)
}

// collectInto runs cycles of p over targets with traffic through serving in between,
// then closes w and returns the Flux store over db.
func collectInto(t *testing.T, db *influxtest.Server, w *influx.Writer, p *pipeline.Pipeline, targets []scrape.Target, serving []string, cycles int) *store.Flux {
	t.Helper()
	ctx := context.Background()
	for range cycles {
		for _, s := range serving {
			for range 5 {
				resp, err := http.Get(s + "/work?sleep=1ms")
				require.NoError(t, err)
				resp.Body.Close()
			}
		}
		p.Run(ctx, targets)
		time.Sleep(20 * time.Millisecond) // the proxies' intervals must have a length
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	client := influxdb2.NewClient(db.URL, "")
	t.Cleanup(client.Close)
	return &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
}

// TestExtremeStatsValueDoesNotBlindTheWorkload: one proxy whose /stats carries a
// finite but extreme value (in_flight_seconds = 1.8e308) among two healthy proxies, all
// real, written to a real InfluxDB. That proxy is refused as an invalid document; the
// healthy pods and their workload are written and read back, and nothing is dropped.
// Before, the value passed, made the workload point +Inf, and the writer retried the
// batch forever: nothing was written and every read said "no data".
func TestExtremeStatsValueDoesNotBlindTheWorkload(t *testing.T) {
	db := influxtest.Start(t)
	serving, targets := startPods(t, 2, func(i int) scrape.Target {
		return scrape.Target{Namespace: "ns", Workload: "w", Pod: fmt.Sprintf("good-%d", i), Node: "n"}
	})
	bad := &faultyPod{rec: measure.New(nil, 0, 0), mode: "extreme"}
	badSrv := httptest.NewServer(bad)
	t.Cleanup(badSrv.Close)
	targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: "bad", Node: "n", URL: badSrv.URL + "/stats"})
	arrived := bad.rec.Arrive()
	bad.rec.End(arrived, bad.rec.Begin(), 0, http.StatusOK, measure.OK)

	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	sc := scrape.NewScraper(nil, 4, 2*time.Second, nil, zap.NewNop())
	st := collectInto(t, db, w, &pipeline.Pipeline{Scraper: sc, Sink: w}, targets, serving, 5)

	require.Equal(t, 5.0, sc.Failures(scrape.FailDecode), "the extreme document is refused every cycle")
	written, retried, dropped := w.Counts()
	require.Zero(t, dropped)
	require.Zero(t, retried)
	require.Equal(t, 4.0*3, written, "4 intervals of 2 pods and their workload")
	snap, err := st.Snapshot(context.Background(), store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)
	require.Len(t, snap.ArrivalRates, 4)
	require.Len(t, snap.Pods, 2)
	for _, r := range snap.ArrivalRates {
		require.Positive(t, r.Rate)
	}
}

// TestProxyClockAheadKeepsTheWorkloadMeasured: one real proxy's clock runs 3 minutes
// ahead of the collector's (and the decider's). Its points, and the workload's, carry
// the collector's scrape time, so the decider's read at its own now finds the workload
// and both pods; the offset is kept as a field. Before, the points carried the proxy's
// time, the workload took its newest pod's, and the whole workload was 3 minutes in
// the decider's future: "no measurements".
func TestProxyClockAheadKeepsTheWorkloadMeasured(t *testing.T) {
	db := influxtest.Start(t)
	const ahead = 3 * time.Minute
	s0, st0 := startPod(t)
	s1, st1 := startPodWithClock(t, func() time.Time { return time.Now().Add(ahead) })
	targets := []scrape.Target{
		{Namespace: "ns", Workload: "w", Pod: "on-time", Node: "n0", URL: st0},
		{Namespace: "ns", Workload: "w", Pod: "ahead", Node: "n1", URL: st1},
	}
	core, logs := observer.New(zapcore.WarnLevel)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	p := &pipeline.Pipeline{Scraper: scrape.NewScraper(nil, 4, 2*time.Second, nil, zap.NewNop()), Sink: w, Log: zap.New(core)}
	before := time.Now()
	st := collectInto(t, db, w, p, targets, []string{s0, s1}, 4)

	snap, err := st.Snapshot(context.Background(), store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)
	require.Len(t, snap.ArrivalRates, 3)
	require.Len(t, snap.Pods, 2)
	require.False(t, snap.DataTime.Before(before))
	require.False(t, snap.DataTime.After(time.Now()))
	skewLogs := logs.FilterMessage("proxy clock is off the collector's; its points carry the collector's time")
	require.Equal(t, 1, skewLogs.Len(), "logged when it went off, not every cycle")
	require.Equal(t, "ns/ahead", skewLogs.All()[0].ContextMap()["pod"])

	// The offset is kept: the workload's is the ahead proxy's, about +180 s.
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	res, err := client.QueryAPI("").Query(context.Background(), fmt.Sprintf(`from(bucket: %q) |> range(start: -1h)
  |> filter(fn: (r) => r._measurement == "qas_workload" and r._field == "clock_offset_seconds") |> last()`, influxtest.Bucket))
	require.NoError(t, err)
	require.True(t, res.Next(), "a workload clock_offset_seconds: %v", res.Err())
	require.InDelta(t, ahead.Seconds(), res.Record().Value(), 1)
	require.NoError(t, res.Close())
}

// TestTwoCollectorsAtOnce: two collectors (a rollout's old and new pod, or a second
// release) scrape the same real proxies into one real InfluxDB. Each keeps its own
// baselines, so each writes a complete series whose intervals add up to exactly the
// requests the proxies served; the decider reads both series interleaved, never a
// sum of them, so λ is not doubled.
func TestTwoCollectorsAtOnce(t *testing.T) {
	db := influxtest.Start(t)
	serving, targets := startPods(t, 2, func(i int) scrape.Target {
		return scrape.Target{Namespace: "ns", Workload: "w", Pod: fmt.Sprintf("w-%d", i), Node: "n"}
	})
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	collectors := []*pipeline.Pipeline{
		{Scraper: scrape.NewScraper(nil, 4, 2*time.Second, nil, zap.NewNop()), Sink: w},
		{Scraper: scrape.NewScraper(nil, 4, 2*time.Second, nil, zap.NewNop()), Sink: w},
	}
	ctx := context.Background()
	const cycles, perPod = 6, 5
	arrivals := make([]uint64, len(collectors)) // Σ of each collector's pod intervals' arrivals
	var rates []float64
	for c := range cycles {
		if c > 0 {
			for _, s := range serving {
				for range perPod {
					resp, err := http.Get(s + "/work?sleep=1ms")
					require.NoError(t, err)
					resp.Body.Close()
				}
			}
		}
		for i, p := range collectors {
			cyc := p.Run(ctx, targets)
			if wl, ok := cyc.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}]; ok {
				// λ is each pod's arrivals over its own interval; the pods' intervals
				// differ by how long each scrape took, so λ·Δt of one pod's Δt is no
				// count (a busy machine made it 49.46 of 50).
				var want float64
				for _, r := range cyc.Results {
					require.True(t, r.OK, "collector %d, %s: %s %v", i, r.Target.Pod, r.Reason, r.Err)
					arrivals[i] += r.Interval.Arrivals
					want += float64(r.Interval.Arrivals) / r.Interval.Seconds()
				}
				require.InDelta(t, want, wl.ArrivalRate, 1e-9*want, "collector %d: λ is the pods' counts over their intervals", i)
				rates = append(rates, wl.ArrivalRate)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	for i, a := range arrivals {
		require.EqualValues(t, (cycles-1)*perPod*len(serving), a, "collector %d: its intervals add up to every request", i)
	}
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	st := &store.Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	snap, err := st.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)
	require.Len(t, snap.ArrivalRates, 2*(cycles-1), "both collectors' points, interleaved")
	var read []float64
	for _, s := range snap.ArrivalRates {
		read = append(read, s.Rate)
	}
	require.ElementsMatch(t, rates, read, "what each collector computed, never a sum of the two")
	require.Len(t, snap.Pods, 2)
}
