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

// bucketFields are a point's bucket fields of prefix.
func bucketFields(got map[string]any, prefix string) map[string]any {
	out := map[string]any{}
	for k, v := range got {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// pointHistograms are the merged histograms the workload point writes as
// bucket fields: each test of the buckets runs for both.
var pointHistograms = []struct {
	name, prefix string
	set          func(*aggregate.Metrics, stats.Histogram)
	other        string // the other histogram's prefix
}{
	{"latency", influx.LatencyBucketPrefix, func(m *aggregate.Metrics, h stats.Histogram) { m.Latency = h }, influx.ServiceBucketPrefix},
	{"service", influx.ServiceBucketPrefix, func(m *aggregate.Metrics, h stats.Histogram) { m.Service = h }, influx.LatencyBucketPrefix},
}

// TestWorkloadPointBuckets: the workload point carries one field per bucket
// of the merged latency histogram, and of the merged service histogram, named
// by its bound under the histogram's prefix, holding that bucket's count (not
// cumulative), the last one <prefix>inf; none of a histogram that counted
// nothing (no request completed, none was served).
func TestWorkloadPointBuckets(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, ph := range pointHistograms {
		for _, tc := range []struct {
			name string
			h    stats.Histogram
			want map[string]float64 // by the bound's suffix
		}{
			{"three bounds", stats.Histogram{Bounds: []float64{0.0001, 0.2, 60}, Counts: []uint64{1, 2, 0, 4}},
				map[string]float64{"0.0001": 1, "0.2": 2, "60": 0, "inf": 4}},
			{"only the overflow bucket", stats.Histogram{Counts: []uint64{3}}, map[string]float64{"inf": 3}},
			{"2⁵³ is exact", stats.Histogram{Bounds: []float64{1}, Counts: []uint64{1 << 53, 0}},
				map[string]float64{"1": 1 << 53, "inf": 0}},
			{"empty runs leave out all but their top bucket", stats.Histogram{Bounds: []float64{0.001, 0.01, 0.1, 0.2, 1, 10}, Counts: []uint64{0, 0, 7, 0, 0, 0, 0}},
				map[string]float64{"0.01": 0, "0.1": 7, "inf": 0}},
			{"an empty bucket between two filled ones stays", stats.Histogram{Bounds: []float64{0.1, 0.2, 0.3}, Counts: []uint64{1, 0, 2, 0}},
				map[string]float64{"0.1": 1, "0.2": 0, "0.3": 2, "inf": 0}},
			{"idle", stats.Histogram{Bounds: []float64{0.1}, Counts: []uint64{0, 0}}, map[string]float64{}},
			{"none", stats.Histogram{}, map[string]float64{}},
		} {
			t.Run(ph.name+"/"+tc.name, func(t *testing.T) {
				m := aggregate.Metrics{Time: at}
				ph.set(&m, tc.h)
				got := fields(WorkloadPoint("ns", "w", m))
				want := map[string]any{}
				for suffix, v := range tc.want {
					want[ph.prefix+suffix] = v
				}
				require.Equal(t, want, bucketFields(got, ph.prefix))
				require.Empty(t, bucketFields(got, ph.other), "the other histogram is empty: none of its buckets")
				require.Contains(t, got, influx.FieldLatencyP95, "the percentiles are written all the same")
			})
		}
		// Every bucket filled: every bucket written.
		all := stats.Histogram{Bounds: stats.DefaultLatencyBounds, Counts: make([]uint64, len(stats.DefaultLatencyBounds)+1)}
		for i := range all.Counts {
			all.Counts[i] = uint64(i + 1)
		}
		m := aggregate.Metrics{Time: at}
		ph.set(&m, all)
		got := bucketFields(fields(WorkloadPoint("ns", "w", m)), ph.prefix)
		require.Len(t, got, len(all.Counts))
		for name, v := range got {
			bound, isBucket, err := influx.ParseBucketField(ph.prefix, name)
			require.NoError(t, err)
			require.True(t, isBucket)
			i := len(all.Bounds)
			if !math.IsInf(bound, 1) {
				i = slices.Index(all.Bounds, bound)
			}
			require.Equal(t, float64(all.Counts[i]), v, name)
		}
	}
}

// TestWorkloadPointCarriesBothHistograms: a workload point of an interval
// that served requests carries the latency and the service histograms' buckets
// side by side, each its own counts, and the service quantiles besides.
func TestWorkloadPointCarriesBothHistograms(t *testing.T) {
	bounds := []float64{0.01, 0.1, 1}
	m := aggregate.Metrics{Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Latency:          stats.Histogram{Bounds: bounds, Counts: []uint64{0, 4, 5, 1}},
		Service:          stats.Histogram{Bounds: bounds, Counts: []uint64{6, 3, 0, 0}},
		ServiceQuantiles: []float64{0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08}}
	got := fields(WorkloadPoint("ns", "w", m))
	require.Equal(t, map[string]any{"latency_bucket_le_0.01": 0.0, "latency_bucket_le_0.1": 4.0, "latency_bucket_le_1": 5.0, "latency_bucket_le_inf": 1.0},
		bucketFields(got, influx.LatencyBucketPrefix))
	require.Equal(t, map[string]any{"service_bucket_le_0.01": 6.0, "service_bucket_le_0.1": 3.0, "service_bucket_le_inf": 0.0},
		bucketFields(got, influx.ServiceBucketPrefix), "service_bucket_le_1 is empty below an empty +Inf: left out")
	require.Equal(t, 0.08, got[influx.FieldServiceP999], "the quantiles stay")
	w, _ := influx.Lookup(influx.Workload)
	for name := range got {
		require.True(t, w.Declares(name), "%s is declared", name)
	}
}

// TestLeftOutBucketsLoseNothing: for histograms with empty runs anywhere,
// latency or service, the number of requests at most each bound of the
// proxies' histogram, read from the buckets written (linear inside a bucket,
// as a reader that does not know the left-out bounds would), is exactly the
// full histogram's.
func TestLeftOutBucketsLoseNothing(t *testing.T) {
	bounds := stats.DefaultLatencyBounds
	for _, ph := range pointHistograms {
		rng := rand.New(rand.NewPCG(15, 20))
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
			m := aggregate.Metrics{Time: time.Now()}
			ph.set(&m, h)
			for name, c := range bucketFields(fields(WorkloadPoint("ns", "w", m)), ph.prefix) {
				b, _, err := influx.ParseBucketField(ph.prefix, name)
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
				require.InDelta(t, float64(cum), atMost(b), 1e-9, "%s trial %d, at most %v s: %v", ph.name, trial, b, h.Counts)
			}
		}
	}
}

// boundsProxy serves the /stats documents of a proxy whose latency histogram
// has the given bounds; complete adds requests that completed in a bucket,
// each served in the first bucket (its service histogram's, in the same
// bounds: the rest of its latency was queueing).
type boundsProxy struct {
	mu      sync.Mutex
	start   time.Time
	seq     uint64
	bounds  []float64
	counts  []uint64
	service []uint64
}

func newBoundsProxy(bounds []float64) *boundsProxy {
	return &boundsProxy{start: time.Now().Add(-time.Minute), bounds: bounds, counts: make([]uint64, len(bounds)+1), service: make([]uint64, len(bounds)+1)}
}

func (p *boundsProxy) complete(bucket int, n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[bucket] += n
	p.service[0] += n
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
	p.bounds, p.counts, p.service = bounds, make([]uint64, len(bounds)+1), make([]uint64, len(bounds)+1)
	p.counts[len(bounds)] = n // every request so far, beyond the last bound
	p.service[len(bounds)] = n
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
		Arrivals: n, Completions: n, Latency: stats.Histogram{Bounds: p.bounds, Counts: append([]uint64(nil), p.counts...)},
		Service: stats.Histogram{Bounds: p.bounds, Counts: append([]uint64(nil), p.service...)}}
	s.Codes[1] = n
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}

// TestMixedBoundsAreLeftOutAndLoggedOnChange: two proxies of one workload with
// different latency bounds are not mixed: the workload point carries the
// latency and service buckets of the one that counted most requests (the
// service histogram in the latency histogram's bounds), the other pod is named in the
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
	const mixedLog = "pods' latency histograms have other bucket bounds than most of the workload's: left out of its latency histogram, percentiles, service histogram and service quantiles"
	for range 3 {
		a.complete(0, 2)
		b.complete(1, 5)
		b.complete(3, 1)
		before := len(sink.points)
		c := p.Run(ctx, targets)
		m := c.Workloads[key]
		require.Equal(t, []string{"ns/a"}, m.LatencySkipped)
		require.Equal(t, stats.Histogram{Bounds: newB, Counts: []uint64{0, 5, 0, 1}}, m.Latency)
		require.Equal(t, stats.Histogram{Bounds: newB, Counts: []uint64{6, 0, 0, 0}}, m.Service)
		var wp map[string]any
		for _, pt := range sink.points[before:] {
			if pt.Name() == influx.Workload {
				wp = fields(pt)
			}
		}
		require.Equal(t, map[string]any{"latency_bucket_le_0.1": 0.0, "latency_bucket_le_0.2": 5.0, "latency_bucket_le_1": 0.0, "latency_bucket_le_inf": 1.0},
			bucketFields(wp, influx.LatencyBucketPrefix), "b's buckets only")
		require.Equal(t, map[string]any{"service_bucket_le_0.1": 6.0, "service_bucket_le_inf": 0.0},
			bucketFields(wp, influx.ServiceBucketPrefix), "b's service buckets only (a's 2 would be in the first)")
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
