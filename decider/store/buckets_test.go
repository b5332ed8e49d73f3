package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

var inf = math.Inf(1)

// TestLatencyBuckets: a point's bucket fields read as the histogram, ordered by
// bound whatever the fields' order; a malformed name is skipped and said, the
// other buckets kept; a count that is no finite number ≥ 0, or no +Inf bucket,
// gives none and says why; an idle point or one without buckets gives none
// and says nothing.
func TestLatencyBuckets(t *testing.T) {
	others := map[string]float64{influx.FieldLatencyP95: 0.2, influx.FieldArrivalRate: 10}
	for _, tc := range []struct {
		name    string
		fields  map[string]float64
		want    []decide.LatencyBucket
		problem string // a part of the problem said; "" none
	}{
		{"ordered by bound", map[string]float64{"latency_bucket_le_inf": 1, "latency_bucket_le_60": 2, "latency_bucket_le_0.0001": 3, "latency_bucket_le_0.2": 4, "latency_bucket_le_7.5": 0},
			[]decide.LatencyBucket{{UpperBound: 0.0001, Count: 3}, {UpperBound: 0.2, Count: 4}, {UpperBound: 7.5, Count: 0}, {UpperBound: 60, Count: 2}, {UpperBound: inf, Count: 1}}, ""},
		{"only the +Inf bucket", map[string]float64{"latency_bucket_le_inf": 5}, []decide.LatencyBucket{{UpperBound: inf, Count: 5}}, ""},
		{"a malformed name is skipped", map[string]float64{"latency_bucket_le_0.2": 4, "latency_bucket_le_0.20": 9, "latency_bucket_le_inf": 1},
			[]decide.LatencyBucket{{UpperBound: 0.2, Count: 4}, {UpperBound: inf, Count: 1}}, `"latency_bucket_le_0.20" is not in its canonical form "latency_bucket_le_0.2": skipped`},
		{"two malformed names, both said", map[string]float64{"latency_bucket_le_x": 1, "latency_bucket_le_-1": 1, "latency_bucket_le_inf": 1},
			[]decide.LatencyBucket{{UpperBound: inf, Count: 1}}, `field "latency_bucket_le_-1": the bound -1 is not positive: skipped; influx: field "latency_bucket_le_x"`},
		{"a negative count", map[string]float64{"latency_bucket_le_0.2": -1, "latency_bucket_le_inf": 1}, nil, "latency_bucket_le_0.2 counts -1"},
		{"a NaN count", map[string]float64{"latency_bucket_le_0.2": 1, "latency_bucket_le_inf": math.NaN()}, nil, "latency_bucket_le_inf counts NaN"},
		{"an infinite count", map[string]float64{"latency_bucket_le_inf": inf}, nil, "latency_bucket_le_inf counts +Inf"},
		{"counts beyond a float", map[string]float64{"latency_bucket_le_1": math.MaxFloat64, "latency_bucket_le_inf": math.MaxFloat64}, nil, "more than a float holds"},
		{"no +Inf bucket", map[string]float64{"latency_bucket_le_0.2": 4, "latency_bucket_le_60": 1}, nil, "2 latency buckets without latency_bucket_le_inf"},
		{"no +Inf bucket and a malformed name", map[string]float64{"latency_bucket_le_0.2": 4, "latency_bucket_le_1e-4": 1}, nil,
			`canonical form "latency_bucket_le_0.0001": skipped; store: 1 latency buckets without latency_bucket_le_inf`},
		{"idle", map[string]float64{"latency_bucket_le_0.2": 0, "latency_bucket_le_inf": 0}, nil, ""},
		{"none", map[string]float64{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields := map[string]float64{}
			for k, v := range others {
				fields[k] = v
			}
			for k, v := range tc.fields {
				fields[k] = v
			}
			got, problem := latencyBuckets(fields)
			require.Equal(t, tc.want, got)
			if tc.problem == "" {
				require.Empty(t, problem)
			} else {
				require.Contains(t, problem, tc.problem)
			}
		})
	}
}

// FuzzLatencyBuckets: whatever the fields, the histogram read is none or one
// the engine can take: bounds ascending and distinct, the last +Inf, counts
// finite and ≥ 0 with a finite, positive total; a name that parses is never
// said to be malformed.
func FuzzLatencyBuckets(f *testing.F) {
	f.Add("latency_bucket_le_0.2", 3.0, "latency_bucket_le_inf", 1.0, "latency_bucket_le_60", 2.0)
	f.Add("latency_bucket_le_0.20", 3.0, "latency_bucket_le_inf", 1.0, "latency_bucket_le_0.0001", 0.0)
	f.Add("latency_bucket_le_NaN", 1.0, "latency_bucket_le_inf", -1.0, "arrival_rate", 9.0)
	f.Fuzz(func(t *testing.T, n1 string, v1 float64, n2 string, v2 float64, n3 string, v3 float64) {
		got, problem := latencyBuckets(map[string]float64{n1: v1, n2: v2, n3: v3})
		if got == nil {
			return
		}
		require.True(t, math.IsInf(got[len(got)-1].UpperBound, 1))
		total := 0.0
		for i, b := range got {
			require.False(t, math.IsNaN(b.Count) || math.IsInf(b.Count, 0) || b.Count < 0, "count %v", b.Count)
			require.True(t, b.UpperBound > 0)
			if i > 0 {
				require.Greater(t, b.UpperBound, got[i-1].UpperBound)
			}
			total += b.Count
		}
		require.True(t, total > 0 && !math.IsInf(total, 0))
		for _, n := range []string{n1, n2, n3} {
			if _, isBucket, err := influx.ParseLatencyBucketField(n); isBucket && err == nil {
				require.NotContains(t, problem, fmt.Sprintf("%q", n))
			}
		}
	})
}

func TestLatencyBucketsQuery(t *testing.T) {
	q := Query{Namespace: `n"s`, Workload: "w${x}", Now: t0, Window: time.Minute}
	got := LatencyBucketsQuery("qas/autogen", q, t0.Add(-5*time.Second))
	require.Contains(t, got, `range(start: 2026-11-22T09:59:55Z, stop: 2026-11-22T09:59:55.000000001Z)`, "the one point, not the window")
	require.Contains(t, got, `r._measurement == "qas_workload"`)
	require.Contains(t, got, `r.namespace == "n\"s" and r.workload == "w\${x}"`)
	require.Contains(t, got, `r._field =~ /^latency_bucket_le_/`)
}

// TestLatencyBucketsFromTheCollectorThroughInfluxDB: two proxies' recorders
// observe latencies of known buckets (the first and the last bound, 100 µs and
// 60 s, one in between and one beyond) and serve their real /stats; the
// collector's pipeline scrapes them and writes to a real InfluxDB and to
// Memory; Flux and Memory read back the newest cycle's merged histogram: its
// filled buckets and the empty ones just below them, with their counts.
func TestLatencyBucketsFromTheCollectorThroughInfluxDB(t *testing.T) {
	db := influxtest.Start(t)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	mem := NewMemory()

	var clockNS atomic.Int64 // near the real time: the points are timed by the collector's clock
	clockNS.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clockNS.Load()) }
	var recs []*measure.Recorder
	var targets []scrape.Target
	for _, name := range []string{"a", "b"} {
		rec := measure.New(now, 0, 0)
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		recs = append(recs, rec)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: srv.URL + "/stats"})
	}
	// The proxies have been up for 10 minutes: a /stats document whose latencies
	// add up beyond its uptime is refused.
	clockNS.Add(int64(10 * time.Minute))
	// serve records a request at recs[pod] that took latency d, exactly.
	serve := func(pod int, d time.Duration) {
		r := recs[pod]
		r.Arrive()
		began := r.Begin()
		r.End(now().Add(-d), began, 0, http.StatusOK, measure.OK)
	}
	p := &pipeline.Pipeline{Scraper: scrape.NewScraper(nil, 2, time.Second, nil, zap.NewNop()), Sink: sinks{w, mem}}
	ctx := context.Background()
	cycle := func() pipeline.Cycle {
		clockNS.Add(int64(time.Second))
		c := p.Run(ctx, targets)
		time.Sleep(10 * time.Millisecond) // the points' times (the collector's clock) must differ
		return c
	}
	cycle() // baselines
	serve(0, 50*time.Microsecond)
	serve(1, 2*time.Minute)
	serve(1, 2*time.Minute)
	older := cycle() // an older histogram, which must not be read
	require.Equal(t, uint64(3), older.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}].Latency.Total())
	serve(0, 50*time.Microsecond)
	serve(0, 110*time.Millisecond)
	serve(1, 110*time.Millisecond)
	serve(1, time.Minute)
	serve(1, 3*time.Minute)
	last := cycle()
	for _, r := range last.Results {
		require.True(t, r.OK, "%s: %s %v", r.Target.Pod, r.Reason, r.Err)
	}
	key := pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}
	require.Equal(t, uint64(5), last.Workloads[key].Latency.Total())

	// The filled buckets and the empty ones just below them (the proxies'
	// bounds 0.1 and 30): the empty runs between are left out.
	want := []decide.LatencyBucket{{UpperBound: 0.0001, Count: 1}, {UpperBound: 0.1, Count: 0}, {UpperBound: 0.125, Count: 2},
		{UpperBound: 30, Count: 0}, {UpperBound: 60, Count: 1}, {UpperBound: inf, Count: 1}}

	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	_, _, dropped := w.Counts()
	require.Zero(t, dropped)
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	q := Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour}
	for name, st := range map[string]Store{"flux": &Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}, "memory": mem} {
		got, err := st.Snapshot(ctx, q)
		require.NoError(t, err, name)
		require.Len(t, got.ArrivalRates, 2, name)
		require.Equal(t, want, got.LatencyBuckets, name)
		require.Empty(t, got.LatencyBucketsError, name)
		require.Len(t, got.MeasuredQuantiles, 3, "the quantiles of the same point")
	}
}

// sinks writes to each of its sinks.
type sinks []pipeline.Sink

func (s sinks) Write(p ...*write.Point) {
	for _, k := range s {
		k.Write(p...)
	}
}

// failingBuckets is a QueryAPI whose latency bucket queries fail.
type failingBuckets struct{ api.QueryAPI }

func (f failingBuckets) Query(ctx context.Context, flux string) (*api.QueryTableResult, error) {
	if strings.Contains(flux, influx.LatencyBucketPrefix) {
		return nil, errors.New("connection reset by peer")
	}
	return f.QueryAPI.Query(ctx, flux)
}

// TestFailedLatencyBucketsReadLosesNothingElse: when the bucket query fails
// (InfluxDB going away between two queries), the measurement stands without
// the histogram and says why.
func TestFailedLatencyBucketsReadLosesNothingElse(t *testing.T) {
	query := influxWith(t, fixture()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	got, err := (&Flux{Query: failingBuckets{query}, Bucket: influxtest.Bucket}).Snapshot(ctx, q)
	require.NoError(t, err)
	require.Nil(t, got.LatencyBuckets)
	require.Equal(t, "store: latency buckets: store: flux query: connection reset by peer", got.LatencyBucketsError)
	whole := want()
	whole.LatencyBuckets, whole.LatencyBucketsError = nil, got.LatencyBucketsError
	require.Equal(t, whole, utcTimes(got), "everything else as read without the failure")
}
