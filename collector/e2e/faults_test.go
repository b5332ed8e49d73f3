package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// faultyPod serves a real proxy recorder's /stats through the real admin handler, and
// can be switched to serve garbage, a restarted process (a new recorder), or the same
// process with its counters reset.
type faultyPod struct {
	mu   sync.Mutex
	rec  *measure.Recorder
	mode string // "", "garbage", "reset"
}

func (f *faultyPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	rec, mode := f.rec, f.mode
	f.mu.Unlock()
	switch mode {
	case "garbage":
		_, _ = w.Write([]byte(`{"version":1,"instance_id":"x","arrivals":"many"}`))
	case "reset":
		s := rec.Snapshot()
		s.Arrivals, s.Completions, s.ServiceSecondsSum, s.ServiceSecondsSumSq, s.TTFBSecondsSum = 0, 0, 0, 0, 0
		s.InFlightSeconds, s.BusySeconds, s.Codes = 0, 0, [5]uint64{}
		s.Latency.Counts = make([]uint64, len(s.Latency.Counts))
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
	var targets []scrape.Target
	var serving []string
	for i, name := range []string{"good-0", "good-1"} {
		s, st := startPod(t)
		serving = append(serving, s)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n" + string(rune('0'+i)), URL: st})
	}
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
