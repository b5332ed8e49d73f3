package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
	"github.com/qas-dev/qas/proxy/stats"
)

// skewedProxy serves a real recorder's /stats through the real admin handler,
// edited as a proxy of another release would serve it: edit rewrites the
// document (nil: as this release serves it).
type skewedProxy struct {
	mu    sync.Mutex
	rec   *measure.Recorder
	admin http.Handler
	edit  func(t testing.TB, doc []byte) []byte
	t     testing.TB
}

func newSkewedProxy(t *testing.T, rec *measure.Recorder, edit func(testing.TB, []byte) []byte) (*skewedProxy, string) {
	p := &skewedProxy{t: t, edit: edit}
	p.restart(rec)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL + "/stats"
}

// restart makes rec the proxy's process (a new instance).
func (p *skewedProxy) restart(rec *measure.Recorder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rec, p.admin = rec, server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool))
}

func (p *skewedProxy) recorder() *measure.Recorder {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec
}

func (p *skewedProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	admin, edit := p.admin, p.edit
	p.mu.Unlock()
	rr := httptest.NewRecorder()
	admin.ServeHTTP(rr, r)
	body := rr.Body.Bytes()
	if edit != nil {
		body = edit(p.t, body)
	}
	w.Header().Set("Content-Type", rr.Header().Get("Content-Type"))
	w.WriteHeader(rr.Code)
	_, _ = w.Write(body)
}

// newerDocument is the document as a newer proxy serves it: members this
// release does not know, at the top and in the latency histogram, of odd values.
func newerDocument(t testing.TB, doc []byte) []byte {
	doc = insertMember(t, doc, "{", `"added_later":{"n":1e999,"s":["NaN",null,[{}]]}`)
	return insertMember(t, doc, `"latency":{`, `"exemplars":[{"trace_id":"abc","value":-1}]`)
}

// olderDocument is the document as a proxy that predates the members added
// last serves it: no service histogram, latency sum or per-second series.
func olderDocument(t testing.TB, doc []byte) []byte {
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc, &m))
	for _, k := range []string{"service", "latency_seconds_sum", "arrivals_per_second"} {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// insertMember inserts member (`"name":value`) into doc just after at, which
// opens an object.
func insertMember(t testing.TB, doc []byte, at, member string) []byte {
	i := bytes.Index(doc, []byte(at))
	require.GreaterOrEqual(t, i, 0, "%s is in the document", at)
	i += len(at)
	out := append(append(append([]byte(nil), doc[:i]...), member...), ',')
	return append(out, doc[i:]...)
}

// serve has every recorder serve n requests.
func serve(n int, recs ...*measure.Recorder) {
	for _, r := range recs {
		for range n {
			a := r.Arrive()
			r.End(a, r.Begin(), 0, http.StatusOK, measure.OK)
		}
	}
}

const ignoredLog = "proxy's /stats has fields this collector does not know; they are ignored (the proxy is newer than the collector)"

// TestNewerProxyIsReadAndItsSkewLoggedOnce: during a rollout a proxy one release
// newer than the collector serves /stats with members the collector does not
// know. Its document is read (it was refused whole, so its workload lost its
// pod and the decider held), its points are written and read back by the
// store, and which members were ignored is logged at info once per proxy
// process, not every scrape, and counted in a gauge while it lasts.
func TestNewerProxyIsReadAndItsSkewLoggedOnce(t *testing.T) {
	current := measure.New(nil, 0, 0)
	srv := httptest.NewServer(server.NewAdmin(current, "127.0.0.1:1", new(atomic.Bool)))
	t.Cleanup(srv.Close)
	newer, newerURL := newSkewedProxy(t, measure.New(nil, 0, 0), newerDocument)
	targets := []scrape.Target{
		{Namespace: "ns", Workload: "w", Pod: "current", Node: "n", URL: srv.URL + "/stats"},
		{Namespace: "ns", Workload: "w", Pod: "newer", Node: "n", URL: newerURL},
	}
	p, mem, sink, logs := observedPipeline()
	sc := p.Scraper
	ctx := context.Background()

	p.Run(ctx, targets) // baselines
	for cycle := range 4 {
		serve(3, current, newer.recorder())
		sink.points = nil
		c := p.Run(ctx, targets)
		for _, r := range c.Results {
			require.True(t, r.OK, "cycle %d, %s: %s %v", cycle, r.Target.Pod, r.Reason, r.Err)
			require.EqualValues(t, 3, r.Interval.Arrivals)
		}
		require.Contains(t, c.Pods, "ns/newer")
		require.EqualValues(t, 6, c.Workloads[WorkloadKey{"ns", "w"}].Completions)
		require.Len(t, sink.points, 3, "both pods' points and the workload's")
		require.Equal(t, 6.0, workloadFields(t, sink.points)[influx.FieldServiceSamples])
	}
	require.Zero(t, sc.Failures(scrape.FailDecode))
	require.Equal(t, 1.0, sc.ProxiesWithUnknownFields())
	snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 2)
	require.Equal(t, 6.0, snap.ServiceSamples)

	skew := logs.FilterMessage(ignoredLog)
	require.Equal(t, 1, skew.Len(), "once for the process, not every scrape")
	e := skew.All()[0]
	require.Equal(t, zapcore.InfoLevel, e.Level)
	ctxMap := e.ContextMap()
	require.Equal(t, "ns/newer", ctxMap["pod"])
	require.Equal(t, []any{"added_later", "latency.exemplars"}, ctxMap["fields"])
	require.EqualValues(t, 2, ctxMap["count"])
	require.Equal(t, newer.recorder().Snapshot().InstanceID, ctxMap["instance"])

	// The newer proxy restarts (a new process): logged once more.
	newer.restart(measure.New(nil, 0, 0))
	for range 3 {
		serve(2, current, newer.recorder())
		p.Run(ctx, targets)
	}
	require.Equal(t, 2, logs.FilterMessage(ignoredLog).Len())

	// Its pod goes away: nothing is left of it.
	p.Run(ctx, targets[:1])
	require.Zero(t, sc.ProxiesWithUnknownFields())
	require.Equal(t, 2, logs.FilterMessage(ignoredLog).Len())
}

// TestOlderProxyIsReadWithItsNewerFieldsAbsent: a proxy one release older than
// the collector serves no service histogram, latency sum or per-second series.
// Its points are written, and what the decider reads of them is "not
// measured", never a measured zero: no service quantiles (the model falls back
// to exponential service) and no arrival-rate cv² (0 would read as Poisson);
// service_samples is still counted, from the completions. A workload whose pods
// are all current (the control) has both.
func TestOlderProxyIsReadWithItsNewerFieldsAbsent(t *testing.T) {
	tests := []struct {
		name  string
		older []bool // per pod
		// wantQuantiles: the workload's service quantiles are measured (at
		// least one pod sends a service histogram).
		wantQuantiles bool
		// wantCV2: the workload's arrival-rate cv² is measured (every pod
		// sends a series).
		wantCV2 bool
	}{
		{"every pod older", []bool{true, true}, false, false},
		{"one pod older, one current", []bool{true, false}, true, false},
		{"every pod current (the control)", []bool{false, false}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newStepClock(time.Now().Truncate(time.Second).Add(300 * time.Millisecond))
			var recs []*measure.Recorder
			var ticks []*measure.PerSecond
			var targets []scrape.Target
			for i, older := range tt.older {
				rec := measure.New(clock.now, 0, 0)
				recs, ticks = append(recs, rec), append(ticks, rec.CountPerSecond(nil))
				var edit func(testing.TB, []byte) []byte
				if older {
					edit = olderDocument
				}
				_, url := newSkewedProxy(t, rec, edit)
				targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: string(rune('a' + i)), Node: "n", URL: url})
			}
			second := func(n int) {
				serve(n, recs...)
				clock.step(clock.now().Truncate(time.Second).Add(time.Second + 5*time.Millisecond).Sub(clock.now()))
				for _, tk := range ticks {
					tk.Tick()
				}
			}
			p, mem, sink, logs := observedPipeline()
			sc := p.Scraper
			ctx := context.Background()
			second(0)
			p.Run(ctx, targets)
			clock.step(200 * time.Millisecond)
			for range 5 {
				second(4)
			}
			clock.step(300 * time.Millisecond)
			c := p.Run(ctx, targets)
			for _, r := range c.Results {
				require.True(t, r.OK, "%s: %s %v", r.Target.Pod, r.Reason, r.Err)
				require.EqualValues(t, 20, r.Interval.Arrivals)
			}
			m := c.Workloads[WorkloadKey{"ns", "w"}]
			require.EqualValues(t, 40, m.Served, "served requests counted from the completions where no histogram says")
			require.InDelta(t, 40/c.Results[0].Interval.Seconds(), m.ArrivalRate, 1e-6)
			f := workloadFields(t, sink.points)
			require.Equal(t, 40.0, f[influx.FieldServiceSamples])
			require.Contains(t, f, influx.FieldLatencyBucketInf, "the latency histogram is an old member")
			if tt.wantCV2 {
				require.Contains(t, f, influx.FieldArrivalRateCV2)
				require.Equal(t, 4.0, f[influx.FieldArrivalRatePairs])
			} else {
				require.NotContains(t, f, influx.FieldArrivalRateCV2, "a pod without a series: not measured, not 0")
				require.NotContains(t, f, influx.FieldArrivalRatePairs)
			}
			for _, q := range influx.ServiceQuantileFields {
				if tt.wantQuantiles {
					require.Contains(t, f, q)
				} else {
					require.NotContains(t, f, q, "no service histogram: not measured, not 0")
				}
			}
			// The service histogram's buckets likewise, over the served
			// requests of the pods that send one (20 at each current pod).
			current := 0
			for _, older := range tt.older {
				if !older {
					current++
				}
			}
			var serviceBuckets float64
			for _, v := range bucketFields(f, influx.ServiceBucketPrefix) {
				serviceBuckets += v.(float64)
			}
			require.Equal(t, tt.wantQuantiles, f[influx.FieldServiceBucketInf] != nil, "service_bucket_le_inf written")
			require.Equal(t, 20.0*float64(current), serviceBuckets)
			snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: clock.now(), Window: time.Hour})
			require.NoError(t, err)
			require.Len(t, snap.Pods, 2)
			require.Equal(t, 40.0, snap.ServiceSamples)
			if tt.wantCV2 {
				require.Equal(t, 4.0, snap.RateCV2Pairs)
			} else {
				require.Zero(t, snap.RateCV2Pairs, "the decider reads no cv²")
			}
			require.Equal(t, tt.wantQuantiles, snap.ServiceQuantiles != nil)
			require.Equal(t, tt.wantQuantiles, snap.ServiceBuckets != nil)
			require.Empty(t, snap.ServiceBucketsError)
			require.Zero(t, sc.ProxiesWithUnknownFields())
			require.Zero(t, logs.FilterMessage(ignoredLog).Len())
			require.Zero(t, logs.FilterLevelExact(zapcore.WarnLevel).Len(), "an older proxy is no fault")
		})
	}
}

// TestUnknownVersionIsCountedApart: a proxy whose document is of a schema
// version this collector does not know (a change of meaning: it cannot be read
// without misreading it) is skipped, with the reason unsupported_version, apart
// from garbage, and a warning naming both versions; the other pods are read.
func TestUnknownVersionIsCountedApart(t *testing.T) {
	current := measure.New(nil, 0, 0)
	srv := httptest.NewServer(server.NewAdmin(current, "127.0.0.1:1", new(atomic.Bool)))
	t.Cleanup(srv.Close)
	_, v2URL := newSkewedProxy(t, measure.New(nil, 0, 0), func(t testing.TB, doc []byte) []byte {
		require.Contains(t, string(doc), `"version":1,`)
		return bytes.Replace(doc, []byte(`"version":1,`), []byte(`"version":2,`), 1)
	})
	targets := []scrape.Target{
		{Namespace: "ns", Workload: "w", Pod: "current", Node: "n", URL: srv.URL + "/stats"},
		{Namespace: "ns", Workload: "w", Pod: "v2", Node: "n", URL: v2URL},
	}
	core, logs := observer.New(zapcore.WarnLevel)
	sc := scrape.NewScraper(nil, 2, time.Second, prometheus.NewRegistry(), zap.New(core))
	p := &Pipeline{Scraper: sc, Sink: &recording{}}
	ctx := context.Background()
	p.Run(ctx, targets)
	serve(2, current)
	c := p.Run(ctx, targets)
	require.Contains(t, c.Pods, "ns/current")
	require.NotContains(t, c.Pods, "ns/v2")
	require.Equal(t, 2.0, sc.Failures(scrape.FailVersion))
	require.Zero(t, sc.Failures(scrape.FailDecode))
	skipped := logs.FilterMessage("scrape skipped").FilterField(zap.String("reason", scrape.FailVersion))
	require.Equal(t, 2, skipped.Len())
	require.Contains(t, skipped.All()[0].ContextMap()["error"], "stats: version 2, want 1")
}

// TestManyUnknownFieldsLoggedOnce: a proxy adding more fields than a log line
// lists (stats.MaxIgnoredListed) is still logged once: the same names are
// listed every scrape, with the count of them all.
func TestManyUnknownFieldsLoggedOnce(t *testing.T) {
	_, url := newSkewedProxy(t, measure.New(nil, 0, 0), func(t testing.TB, doc []byte) []byte {
		for i := range 40 {
			doc = insertMember(t, doc, "{", fmt.Sprintf(`"added_%02d":%d`, i, i))
		}
		return doc
	})
	targets := []scrape.Target{{Namespace: "ns", Workload: "w", Pod: "newer", Node: "n", URL: url}}
	core, logs := observer.New(zapcore.InfoLevel)
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 1, time.Second, nil, zap.New(core)), Sink: &recording{}}
	for range 8 {
		p.Run(context.Background(), targets)
	}
	skew := logs.FilterMessage(ignoredLog)
	require.Equal(t, 1, skew.Len())
	fields := skew.All()[0].ContextMap()["fields"].([]any)
	require.Len(t, fields, stats.MaxIgnoredListed)
	require.Equal(t, "added_00", fields[0])
	require.Equal(t, "added_15", fields[15])
	require.EqualValues(t, 40, skew.All()[0].ContextMap()["count"])
}

// observedPipeline is a pipeline whose scraper logs to the returned observer
// and whose points go to a memory store and a recording sink.
func observedPipeline() (*Pipeline, *store.Memory, *recording, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	sc := scrape.NewScraper(nil, 2, time.Second, prometheus.NewRegistry(), zap.New(core))
	mem := store.NewMemory()
	sink := &recording{}
	return &Pipeline{Scraper: sc, Sink: multi{mem, sink}}, mem, sink, logs
}
