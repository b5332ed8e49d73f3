package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/stats"
)

// bucketFields are a point's latency bucket fields.
func bucketFields(got map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range got {
		if strings.HasPrefix(k, influx.LatencyBucketPrefix) {
			out[k] = v
		}
	}
	return out
}

// TestWorkloadPointLatencyBuckets: the workload point carries one field per
// bucket of the merged histogram, named by its bound, holding that bucket's
// count (not cumulative), the last one latency_bucket_le_inf; none when no
// request completed.
func TestWorkloadPointLatencyBuckets(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    stats.Histogram
		want map[string]any
	}{
		{"three bounds", stats.Histogram{Bounds: []float64{0.0001, 0.2, 60}, Counts: []uint64{1, 2, 0, 4}},
			map[string]any{"latency_bucket_le_0.0001": 1.0, "latency_bucket_le_0.2": 2.0, "latency_bucket_le_60": 0.0, "latency_bucket_le_inf": 4.0}},
		{"only the overflow bucket", stats.Histogram{Counts: []uint64{3}}, map[string]any{"latency_bucket_le_inf": 3.0}},
		{"2⁵³ is exact", stats.Histogram{Bounds: []float64{1}, Counts: []uint64{1 << 53, 0}},
			map[string]any{"latency_bucket_le_1": float64(1 << 53), "latency_bucket_le_inf": 0.0}},
		{"empty runs leave out all but their top bucket", stats.Histogram{Bounds: []float64{0.001, 0.01, 0.1, 0.2, 1, 10}, Counts: []uint64{0, 0, 7, 0, 0, 0, 0}},
			map[string]any{"latency_bucket_le_0.01": 0.0, "latency_bucket_le_0.1": 7.0, "latency_bucket_le_inf": 0.0}},
		{"an empty bucket between two filled ones stays", stats.Histogram{Bounds: []float64{0.1, 0.2, 0.3}, Counts: []uint64{1, 0, 2, 0}},
			map[string]any{"latency_bucket_le_0.1": 1.0, "latency_bucket_le_0.2": 0.0, "latency_bucket_le_0.3": 2.0, "latency_bucket_le_inf": 0.0}},
		{"idle", stats.Histogram{Bounds: []float64{0.1}, Counts: []uint64{0, 0}}, map[string]any{}},
		{"none", stats.Histogram{}, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fields(WorkloadPoint("ns", "w", aggregate.Metrics{Time: at, Latency: tc.h}))
			require.Equal(t, tc.want, bucketFields(got))
			require.Contains(t, got, influx.FieldLatencyP95, "the percentiles are written all the same")
		})
	}
	// Every bucket filled: every bucket written.
	all := stats.Histogram{Bounds: stats.DefaultLatencyBounds, Counts: make([]uint64, len(stats.DefaultLatencyBounds)+1)}
	for i := range all.Counts {
		all.Counts[i] = uint64(i + 1)
	}
	got := bucketFields(fields(WorkloadPoint("ns", "w", aggregate.Metrics{Time: at, Latency: all})))
	require.Len(t, got, len(all.Counts))
	for name, v := range got {
		bound, isBucket, err := influx.ParseLatencyBucketField(name)
		require.NoError(t, err)
		require.True(t, isBucket)
		i := len(all.Bounds)
		if !math.IsInf(bound, 1) {
			i = slices.Index(all.Bounds, bound)
		}
		require.Equal(t, float64(all.Counts[i]), v, name)
	}
}

// TestLeftOutBucketsLoseNothing: for histograms with empty runs anywhere, the
// number of requests at most each bound of the proxies' histogram, read from
// the buckets written (linear inside a bucket, as a reader that does not know
// the left-out bounds would), is exactly the full histogram's.
func TestLeftOutBucketsLoseNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 20))
	bounds := stats.DefaultLatencyBounds
	for trial := range 2000 {
		h := stats.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
		for i := range h.Counts {
			if rng.IntN(4) == 0 { // most buckets empty, as real traffic leaves them
				h.Counts[i] = uint64(rng.IntN(1000))
			}
		}
		if trial%7 == 0 {
			h.Counts[rng.IntN(len(h.Counts))] = 1 // one filled bucket anywhere, the +Inf one too
		}
		if h.Total() == 0 {
			continue
		}
		type bucket struct{ upper, count float64 }
		var read []bucket
		for name, c := range bucketFields(fields(WorkloadPoint("ns", "w", aggregate.Metrics{Time: time.Now(), Latency: h}))) {
			b, _, err := influx.ParseLatencyBucketField(name)
			require.NoError(t, err)
			read = append(read, bucket{b, c.(float64)})
		}
		slices.SortFunc(read, func(a, b bucket) int { return cmp.Compare(a.upper, b.upper) })
		require.True(t, math.IsInf(read[len(read)-1].upper, 1))
		atMost := func(x float64) float64 { // from the buckets read
			n, lo := 0.0, 0.0
			for _, b := range read {
				if x >= b.upper {
					n += b.count
				} else if x > lo {
					n += b.count * (x - lo) / (b.upper - lo)
				}
				lo = b.upper
			}
			return n
		}
		var cum uint64
		for i, b := range bounds {
			cum += h.Counts[i]
			require.InDelta(t, float64(cum), atMost(b), 1e-9, "trial %d, at most %v s: %v", trial, b, h.Counts)
		}
	}
}

// boundsProxy serves the /stats documents of a proxy whose latency histogram
// has the given bounds; complete adds requests that completed in a bucket.
type boundsProxy struct {
	mu     sync.Mutex
	start  time.Time
	seq    uint64
	bounds []float64
	counts []uint64
}

func newBoundsProxy(bounds []float64) *boundsProxy {
	return &boundsProxy{start: time.Now().Add(-time.Minute), bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (p *boundsProxy) complete(bucket int, n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[bucket] += n
}

// rebound switches the histogram to other bounds, as a proxy restarted with
// another configuration would (same process here: the collector rebases).
func (p *boundsProxy) rebound(bounds []float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n uint64
	for _, c := range p.counts {
		n += c
	}
	p.bounds, p.counts = bounds, make([]uint64, len(bounds)+1)
	p.counts[len(bounds)] = n // every request so far, beyond the last bound
}

func (p *boundsProxy) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	var n uint64
	for _, c := range p.counts {
		n += c
	}
	s := stats.Snapshot{Version: stats.SchemaVersion, InstanceID: "proxy", StartTime: p.start, Time: time.Now(), Seq: p.seq,
		Arrivals: n, Completions: n, Latency: stats.Histogram{Bounds: p.bounds, Counts: append([]uint64(nil), p.counts...)}}
	s.Codes[1] = n
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}

// TestMixedBoundsAreLeftOutAndLoggedOnChange: two proxies of one workload with
// different latency bounds are not mixed: the workload point carries the
// buckets of the one that counted most requests, the other pod is named in the
// log once while it lasts (not every cycle) and once more when the pods agree
// again.
func TestMixedBoundsAreLeftOutAndLoggedOnChange(t *testing.T) {
	oldB, newB := []float64{0.1, 1}, []float64{0.1, 0.2, 1}
	a, b := newBoundsProxy(oldB), newBoundsProxy(newB)
	var targets []scrape.Target
	for i, h := range []http.Handler{a, b} { // a first: the first pod's bounds are not the ones kept
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: string(rune('a' + i)), Node: "n", URL: srv.URL + "/stats"})
	}
	core, logs := observer.New(zapcore.InfoLevel)
	var sink recording
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 2, time.Second, nil, zap.NewNop()), Sink: &sink, Log: zap.New(core)}
	ctx := context.Background()
	key := WorkloadKey{"ns", "w"}
	p.Run(ctx, targets) // baselines
	const mixedLog = "pods' latency histograms have other bucket bounds than most of the workload's: left out of its latency histogram, percentiles and service quantiles"
	for range 3 {
		a.complete(0, 2)
		b.complete(1, 5)
		b.complete(3, 1)
		before := len(sink.points)
		c := p.Run(ctx, targets)
		m := c.Workloads[key]
		require.Equal(t, []string{"ns/a"}, m.LatencySkipped)
		require.Equal(t, stats.Histogram{Bounds: newB, Counts: []uint64{0, 5, 0, 1}}, m.Latency)
		var wp map[string]any
		for _, pt := range sink.points[before:] {
			if pt.Name() == influx.Workload {
				wp = fields(pt)
			}
		}
		require.Equal(t, map[string]any{"latency_bucket_le_0.1": 0.0, "latency_bucket_le_0.2": 5.0, "latency_bucket_le_1": 0.0, "latency_bucket_le_inf": 1.0},
			bucketFields(wp), "b's buckets only")
	}
	warned := logs.FilterMessage(mixedLog).All()
	require.Len(t, warned, 1, "logged when it began, not every cycle")
	require.Equal(t, "ns/w", warned[0].ContextMap()["workload"])
	require.Equal(t, []any{"ns/a"}, warned[0].ContextMap()["pods"])

	a.rebound(newB) // a's proxy now has b's bounds: rebased, then merged
	for range 3 {
		a.complete(1, 1)
		b.complete(1, 1)
		p.Run(ctx, targets)
	}
	m := p.Run(ctx, targets).Workloads[key]
	require.Empty(t, m.LatencySkipped)
	require.Len(t, logs.FilterMessage(mixedLog).All(), 1)
	require.Equal(t, 1, logs.FilterMessage("the workload's pods agree on latency histogram bounds again").Len())
}
