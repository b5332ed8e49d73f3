package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
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

// histograms are the histograms a workload point carries as bucket fields,
// each with the other one's prefix: every test of the reading runs for both.
var histograms = []struct {
	h     histogram
	other string
}{
	{latencyHistogram, influx.ServiceBucketPrefix},
	{serviceHistogram, influx.LatencyBucketPrefix},
}

// TestBuckets: a point's bucket fields of one histogram (latency, service)
// read as that histogram, ordered by bound whatever the fields' order; a
// malformed name is skipped and said, the other buckets kept; a count that is
// no finite number ≥ 0, or no +Inf bucket, gives none and says why; an idle
// point or one without buckets gives none and says nothing. The other
// histogram's fields, malformed or not, are none of its business.
func TestBuckets(t *testing.T) {
	for _, hc := range histograms {
		p, name := hc.h.prefix, hc.h.name
		others := map[string]float64{influx.FieldLatencyP95: 0.2, influx.FieldArrivalRate: 10, influx.FieldServiceP99: 0.3,
			hc.other + "0.3": 7, hc.other + "inf": 1, hc.other + "0.30": 2, hc.other + "5": -1}
		for _, tc := range []struct {
			name    string
			fields  map[string]float64 // by the bound's suffix
			want    []decide.LatencyBucket
			problem string // a part of the problem said, %[1]s the prefix, %[2]s the histogram's name; "" none
		}{
			{"ordered by bound", map[string]float64{"inf": 1, "60": 2, "0.0001": 3, "0.2": 4, "7.5": 0},
				[]decide.LatencyBucket{{UpperBound: 0.0001, Count: 3}, {UpperBound: 0.2, Count: 4}, {UpperBound: 7.5, Count: 0}, {UpperBound: 60, Count: 2}, {UpperBound: inf, Count: 1}}, ""},
			{"only the +Inf bucket", map[string]float64{"inf": 5}, []decide.LatencyBucket{{UpperBound: inf, Count: 5}}, ""},
			{"a malformed name is skipped", map[string]float64{"0.2": 4, "0.20": 9, "inf": 1},
				[]decide.LatencyBucket{{UpperBound: 0.2, Count: 4}, {UpperBound: inf, Count: 1}}, `"%[1]s0.20" is not in its canonical form "%[1]s0.2": skipped`},
			{"two malformed names, both said", map[string]float64{"x": 1, "-1": 1, "inf": 1},
				[]decide.LatencyBucket{{UpperBound: inf, Count: 1}}, `field "%[1]s-1": the bound -1 is not positive: skipped; influx: field "%[1]sx"`},
			{"a negative count", map[string]float64{"0.2": -1, "inf": 1}, nil, "store: %[2]s bucket %[1]s0.2 counts -1, want a finite number ≥ 0: no %[2]s histogram"},
			{"a NaN count", map[string]float64{"0.2": 1, "inf": math.NaN()}, nil, "%[1]sinf counts NaN"},
			{"an infinite count", map[string]float64{"inf": inf}, nil, "%[1]sinf counts +Inf"},
			{"counts beyond a float", map[string]float64{"1": math.MaxFloat64, "inf": math.MaxFloat64}, nil, "the %[2]s buckets count more than a float holds"},
			{"no +Inf bucket", map[string]float64{"0.2": 4, "60": 1}, nil, "2 %[2]s buckets without %[1]sinf"},
			{"no +Inf bucket and a malformed name", map[string]float64{"0.2": 4, "1e-4": 1}, nil,
				`canonical form "%[1]s0.0001": skipped; store: 1 %[2]s buckets without %[1]sinf`},
			{"idle", map[string]float64{"0.2": 0, "inf": 0}, nil, ""},
			{"none", map[string]float64{}, nil, ""},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				fields := maps.Clone(others)
				for k, v := range tc.fields {
					fields[p+k] = v
				}
				got, problem := hc.h.buckets(fields)
				require.Equal(t, tc.want, got)
				if tc.problem == "" {
					require.Empty(t, problem)
				} else {
					require.Contains(t, problem, fmt.Sprintf(tc.problem, p, name))
				}
				require.NotContains(t, problem, hc.other, "the other histogram's fields are not this one's problem")
			})
		}
	}
}

// FuzzBuckets: whatever the fields, each histogram read is none or one the
// engine can take: bounds ascending and distinct, the last +Inf, counts finite
// and ≥ 0 with a finite, positive total; a name that parses is never said to
// be malformed.
func FuzzBuckets(f *testing.F) {
	f.Add("latency_bucket_le_0.2", 3.0, "latency_bucket_le_inf", 1.0, "latency_bucket_le_60", 2.0)
	f.Add("latency_bucket_le_0.20", 3.0, "latency_bucket_le_inf", 1.0, "latency_bucket_le_0.0001", 0.0)
	f.Add("latency_bucket_le_NaN", 1.0, "latency_bucket_le_inf", -1.0, "arrival_rate", 9.0)
	f.Add("service_bucket_le_0.2", 3.0, "service_bucket_le_inf", 1.0, "latency_bucket_le_inf", 2.0)
	f.Add("service_bucket_le_0.20", 3.0, "service_bucket_le_inf", 1.0, "service_bucket_le_-1", 0.0)
	f.Fuzz(func(t *testing.T, n1 string, v1 float64, n2 string, v2 float64, n3 string, v3 float64) {
		for _, hc := range histograms {
			got, problem := hc.h.buckets(map[string]float64{n1: v1, n2: v2, n3: v3})
			for _, n := range []string{n1, n2, n3} {
				if _, isBucket, err := influx.ParseBucketField(hc.h.prefix, n); isBucket && err == nil {
					require.NotContains(t, problem, fmt.Sprintf("%q", n))
				}
			}
			if got == nil {
				continue
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
		}
	})
}

// TestBucketsQuery: one query reads the one point's bucket fields of both
// histograms, and its field filter (Flux's regular expressions are Go's)
// matches exactly the names that begin with one of their prefixes.
func TestBucketsQuery(t *testing.T) {
	q := Query{Namespace: `n"s`, Workload: "w${x}", Now: t0, Window: time.Minute}
	got := BucketsQuery("qas/autogen", q, t0.Add(-5*time.Second))
	require.Contains(t, got, `range(start: 2026-11-22T09:59:55Z, stop: 2026-11-22T09:59:55.000000001Z)`, "the one point, not the window")
	require.Contains(t, got, `r._measurement == "qas_workload"`)
	require.Contains(t, got, `r.namespace == "n\"s" and r.workload == "w\${x}"`)
	m := regexp.MustCompile(`r\._field =~ /(.*)/\)`).FindStringSubmatch(got)
	require.NotNil(t, m, got)
	re := regexp.MustCompile(m[1])
	for _, tc := range []struct {
		field string
		match bool
	}{
		{"latency_bucket_le_0.2", true},
		{"latency_bucket_le_inf", true},
		{"latency_bucket_le_0.20", true}, // read, then said to be malformed
		{"service_bucket_le_0.0001", true},
		{"service_bucket_le_inf", true},
		{"service_p99_seconds", false},
		{"latency_p95_seconds", false},
		{"x_latency_bucket_le_1", false},
		{"latency_bucket_lex1", false},
		{"service_bucket_lf_1", false},
	} {
		require.Equal(t, tc.match, re.MatchString(tc.field), tc.field)
	}
}

// TestLatencyBucketsFromTheCollectorThroughInfluxDB: two proxies' recorders
// observe latencies and service times of known buckets (the first and the
// last bound, 100 µs and 60 s, some in between and one beyond) and serve their
// real /stats; the collector's pipeline scrapes them and writes to a real
// InfluxDB and to Memory; Flux and Memory read back the newest cycle's merged
// latency and service histograms: their filled buckets and the empty ones just
// below them, with their counts, as the collector's point builder wrote them.
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
	// serve records a request at recs[pod] that took latency d, exactly, of
	// which service s (the proxies' clock runs on by s while it is served).
	serve := func(pod int, d, s time.Duration) {
		r := recs[pod]
		r.Arrive()
		began := r.Begin()
		clockNS.Add(int64(s))
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
	serve(0, 50*time.Microsecond, 50*time.Microsecond)
	serve(1, 2*time.Minute, 1500*time.Millisecond)
	serve(1, 2*time.Minute, 20*time.Second)
	older := cycle() // older histograms, which must not be read
	require.Equal(t, uint64(3), older.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}].Latency.Total())
	require.Equal(t, uint64(3), older.Workloads[pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}].Service.Total())
	serve(0, 50*time.Microsecond, 20*time.Microsecond)
	serve(0, 110*time.Millisecond, 3*time.Millisecond)
	serve(1, 110*time.Millisecond, 110*time.Millisecond)
	serve(1, time.Minute, 110*time.Millisecond)
	serve(1, 3*time.Minute, 45*time.Second)
	last := cycle()
	for _, r := range last.Results {
		require.True(t, r.OK, "%s: %s %v", r.Target.Pod, r.Reason, r.Err)
	}
	key := pipeline.WorkloadKey{Namespace: "ns", Workload: "w"}
	require.Equal(t, uint64(5), last.Workloads[key].Latency.Total())
	require.Equal(t, uint64(5), last.Workloads[key].Service.Total())

	// The filled buckets and the empty ones just below them (the proxies'
	// bounds 0.1 and 30; for the service times 0.0025, 0.1 and 30 too): the
	// empty runs between are left out.
	want := []decide.LatencyBucket{{UpperBound: 0.0001, Count: 1}, {UpperBound: 0.1, Count: 0}, {UpperBound: 0.125, Count: 2},
		{UpperBound: 30, Count: 0}, {UpperBound: 60, Count: 1}, {UpperBound: inf, Count: 1}}
	wantService := []decide.LatencyBucket{{UpperBound: 0.0001, Count: 1}, {UpperBound: 0.0025, Count: 0}, {UpperBound: 0.005, Count: 1},
		{UpperBound: 0.1, Count: 0}, {UpperBound: 0.125, Count: 2}, {UpperBound: 30, Count: 0}, {UpperBound: 60, Count: 1}, {UpperBound: inf, Count: 0}}
	// Which is what the collector's own point builder writes of the cycle.
	written := map[string]float64{}
	for _, f := range pipeline.WorkloadPoint("ns", "w", last.Workloads[key]).FieldList() {
		if v, ok := number(f.Value); ok {
			written[f.Key] = v
		}
	}
	for _, tc := range []struct {
		h    histogram
		want []decide.LatencyBucket
	}{{latencyHistogram, want}, {serviceHistogram, wantService}} {
		got, problem := tc.h.buckets(written)
		require.Empty(t, problem)
		require.Equal(t, tc.want, got, "%s buckets of the point written", tc.h.name)
	}

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
		require.Equal(t, wantService, got.ServiceBuckets, name)
		require.Empty(t, got.ServiceBucketsError, name)
		require.Len(t, got.MeasuredQuantiles, 3, "the quantiles of the same point")
		require.Len(t, got.ServiceQuantiles, len(influx.ServiceQuantileFields), "the service quantiles of the same point, written all the same")
	}
}

// sinks writes to each of its sinks.
type sinks []pipeline.Sink

func (s sinks) Write(p ...*write.Point) {
	for _, k := range s {
		k.Write(p...)
	}
}

// failingBuckets is a QueryAPI whose bucket queries fail.
type failingBuckets struct{ api.QueryAPI }

func (f failingBuckets) Query(ctx context.Context, flux string) (*api.QueryTableResult, error) {
	if strings.Contains(flux, influx.LatencyBucketPrefix) || strings.Contains(flux, influx.ServiceBucketPrefix) {
		return nil, errors.New("connection reset by peer")
	}
	return f.QueryAPI.Query(ctx, flux)
}

// TestFailedLatencyBucketsReadLosesNothingElse: when the bucket query fails
// (InfluxDB going away between two queries), the measurement stands without
// the histograms it reads (latency and service: one query) and says why for
// each.
func TestFailedLatencyBucketsReadLosesNothingElse(t *testing.T) {
	query := influxWith(t, fixture()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	got, err := (&Flux{Query: failingBuckets{query}, Bucket: influxtest.Bucket}).Snapshot(ctx, q)
	require.NoError(t, err)
	const failed = "store: latency and service buckets: flux query: connection reset by peer"
	require.Nil(t, got.LatencyBuckets)
	require.Equal(t, failed, got.LatencyBucketsError)
	require.Nil(t, got.ServiceBuckets)
	require.Equal(t, failed, got.ServiceBucketsError)
	whole := want()
	whole.LatencyBuckets, whole.LatencyBucketsError = nil, failed
	whole.ServiceBuckets, whole.ServiceBucketsError = nil, failed
	require.Equal(t, whole, utcTimes(got), "everything else as read without the failure")
}

// TestMalformedServiceBucketsLoseNothingElse: a newest point whose service
// buckets make no histogram (a count below 0, no +Inf bucket) reads, through
// InfluxDB and Memory alike, without the service histogram and says why; the
// latency histogram, the service quantiles and everything else stand.
func TestMalformedServiceBucketsLoseNothingElse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     map[string]float64
		drop    string
		problem string
	}{
		{"a count below 0", map[string]float64{"service_bucket_le_0.5": -3}, "", "store: service bucket service_bucket_le_0.5 counts -3, want a finite number ≥ 0: no service histogram"},
		{"no +Inf bucket", nil, influx.FieldServiceBucketInf, "store: 3 service buckets without service_bucket_le_inf: no whole histogram"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pts := fixture()
			// The newest workload point, with the fault.
			old := pts[2]
			tags := map[string]string{}
			for _, tag := range old.TagList() {
				tags[tag.Key] = tag.Value
			}
			fields := map[string]any{}
			for _, f := range old.FieldList() {
				if f.Key != tc.drop {
					fields[f.Key] = f.Value
				}
			}
			for k, v := range tc.set {
				fields[k] = v
			}
			pts[2] = write.NewPoint(old.Name(), tags, fields, old.Time())
			mem := NewMemory()
			mem.Write(pts...)
			fl := &Flux{Query: influxWith(t, pts...), Bucket: influxtest.Bucket}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
			whole := want()
			whole.ServiceBuckets = nil
			for name, st := range map[string]Store{"flux": fl, "memory": mem} {
				got, err := st.Snapshot(ctx, q)
				require.NoError(t, err, name)
				require.Contains(t, got.ServiceBucketsError, tc.problem, name)
				whole.ServiceBucketsError = got.ServiceBucketsError
				require.Equal(t, whole, utcTimes(got), "%s: everything else as read without the fault", name)
			}
		})
	}
}
