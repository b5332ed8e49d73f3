package influx

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

func points(measurement string, from, n int) []*write.Point {
	out := make([]*write.Point, n)
	base := time.Now().Add(-time.Minute)
	for i := range out {
		out[i] = influxdb2.NewPoint(measurement, map[string]string{"pod": "p"},
			map[string]any{"seq": from + i}, base.Add(time.Duration(from+i)*time.Millisecond))
	}
	return out
}

// count returns how many points of measurement InfluxDB holds, through a Flux query.
func count(t *testing.T, srv *influxtest.Server, measurement string) int64 {
	client := influxdb2.NewClient(srv.URL, srv.Token)
	defer client.Close()
	res, err := client.QueryAPI("").Query(context.Background(), fmt.Sprintf(
		`from(bucket: %q) |> range(start: -1h) |> filter(fn: (r) => r._measurement == %q) |> count()`, influxtest.Bucket, measurement))
	require.NoError(t, err)
	var n int64
	for res.Next() {
		n += res.Record().Value().(int64)
	}
	require.NoError(t, res.Err())
	return n
}

func newWriter(t *testing.T, srv *influxtest.Server, cfg WriterConfig) (*Writer, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	cfg.URL, cfg.Bucket = srv.URL, influxtest.Bucket
	if cfg.Token == "" {
		cfg.Token = srv.Token
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = 50 * time.Millisecond
	}
	cfg.MinBackoff, cfg.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	w, err := NewWriter(cfg, nil, zap.New(core))
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			written, retried, dropped := w.Counts()
			t.Logf("writer: written %v retried %v dropped %v buffered %d", written, retried, dropped, w.Buffered())
			for _, e := range logs.All() {
				t.Logf("log: %s %v", e.Message, e.ContextMap())
			}
		}
	})
	return w, logs
}

// requireDelivered waits until w has sent all it buffered, closes it, and requires
// that w wrote n points and dropped none, and that InfluxDB holds n points of
// measurement.
func requireDelivered(t *testing.T, srv *influxtest.Server, w *Writer, measurement string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return w.Buffered() == 0 }, 60*time.Second, 20*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	written, _, dropped := w.Counts()
	require.Equal(t, float64(n), written)
	require.Zero(t, dropped)
	require.Equal(t, int64(n), count(t, srv, measurement))
}

func TestWriterDeliversEverything(t *testing.T) {
	srv := influxtest.Start(t)
	w, _ := newWriter(t, srv, WriterConfig{BatchPoints: 100})
	for i := 0; i < 10; i++ {
		w.Write(points("deliver", i*100, 100)...)
	}
	require.NoError(t, w.Close(context.Background()))
	written, retried, dropped := w.Counts()
	require.Equal(t, 1000.0, written)
	require.Zero(t, retried)
	require.Zero(t, dropped)
	require.Equal(t, int64(1000), count(t, srv, "deliver"))
}

func TestWriterOutageWithinBufferLosesNothing(t *testing.T) {
	srv := influxtest.Start(t)
	w, logs := newWriter(t, srv, WriterConfig{BatchPoints: 50, BufferPoints: 1000})
	w.Write(points("outage", 0, 100)...)
	require.Eventually(t, func() bool { written, _, _ := w.Counts(); return written == 100 }, 30*time.Second, 20*time.Millisecond)

	srv.Stop()
	w.Write(points("outage", 100, 300)...)
	require.Eventually(t, func() bool { _, retried, _ := w.Counts(); return retried > 0 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 300, w.Buffered(), "points wait while InfluxDB is down")
	require.NotZero(t, logs.FilterMessage("influx write failed; retrying").Len())

	srv.Restart()
	requireDelivered(t, srv, w, "outage", 400)
}

func TestWriterOutageBeyondBufferIsCountedAndLogged(t *testing.T) {
	srv := influxtest.Start(t)
	w, logs := newWriter(t, srv, WriterConfig{BatchPoints: 10, BufferPoints: 50})
	srv.Stop()
	w.Write(points("overflow", 0, 120)...)
	_, _, dropped := w.Counts()
	require.Equal(t, 70.0, dropped)
	require.Equal(t, 50, w.Buffered())
	entries := logs.FilterMessage("influx buffer full: dropped the oldest points").All()
	require.Len(t, entries, 1)
	require.Equal(t, int64(70), entries[0].ContextMap()["dropped"])

	srv.Restart()
	require.Eventually(t, func() bool { return w.Buffered() == 0 }, 60*time.Second, 50*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, int64(50), count(t, srv, "overflow"), "the newest 50 survive")
}

func TestWriterDropsWhatInfluxRefuses(t *testing.T) {
	srv := influxtest.Start(t)
	w, logs := newWriter(t, srv, WriterConfig{})
	w.Write(points("refused", 0, 1)...) // field seq is an integer from now on
	require.Eventually(t, func() bool { written, _, _ := w.Counts(); return written == 1 }, 30*time.Second, 20*time.Millisecond)
	conflicting := make([]*write.Point, 5)
	for i := range conflicting {
		conflicting[i] = influxdb2.NewPoint("refused", map[string]string{"pod": "p"}, map[string]any{"seq": "text"}, time.Now().Add(time.Duration(i)))
	}
	w.Write(conflicting...)
	require.Eventually(t, func() bool { _, _, d := w.Counts(); return d == 5 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	entries := logs.FilterMessage("influx refused points; dropped").All()
	require.Len(t, entries, 1, "one warning for the five (rate-limited)")
	require.Equal(t, 5.0, w.Dropped(DropRefused))
	require.Contains(t, fmt.Sprint(entries[0].ContextMap()["error"]), "field type conflict")
	_, retried, _ := w.Counts()
	require.Zero(t, retried, "a refused batch is not retried forever")
}

// TestWriterCreatesTheMissingDatabase: on an InfluxDB 1.8 that has no database yet (the
// in-cluster one whose image's init script failed, or an external one), the writer
// creates it and delivers every point.
func TestWriterCreatesTheMissingDatabase(t *testing.T) {
	srv := influxtest.StartWith(t, influxtest.Options{Empty: true})
	dbs, err := srv.Databases()
	require.NoError(t, err)
	require.NotContains(t, dbs, influxtest.Database)
	w, logs := newWriter(t, srv, WriterConfig{BatchPoints: 100})
	w.Write(points("created", 0, 300)...)
	requireDelivered(t, srv, w, "created", 300)
	dbs, err = srv.Databases()
	require.NoError(t, err)
	require.Contains(t, dbs, influxtest.Database)
	created := logs.FilterMessage("created the InfluxDB database").All()
	require.Len(t, created, 1)
	require.Equal(t, "1.8.10", created[0].ContextMap()["version"], "the version /ping reports")

	// Closed before its first flush (a decider stopping right after its first
	// decision): Close creates the database and still delivers.
	core, logs2 := observer.New(zap.InfoLevel)
	w2, err := NewWriter(WriterConfig{URL: srv.URL, Bucket: "fresh/autogen", FlushInterval: time.Hour,
		MinBackoff: 50 * time.Millisecond}, nil, zap.New(core))
	require.NoError(t, err)
	w2.Write(points("fresh", 0, 3)...)
	require.NoError(t, w2.Close(context.Background()))
	written, _, dropped := w2.Counts()
	require.Equal(t, 3.0, written)
	require.Zero(t, dropped)
	require.Equal(t, 1, logs2.FilterMessage("created the InfluxDB database").Len())
	dbs, err = srv.Databases()
	require.NoError(t, err)
	require.Contains(t, dbs, "fresh")
}

// TestWriterCreatesTheDatabaseOnlyAsAdmin: with authentication on, CREATE DATABASE
// needs an admin. A writer whose user is not one drops the batch and says what to do;
// one with an admin's token creates the database.
func TestWriterCreatesTheDatabaseOnlyAsAdmin(t *testing.T) {
	srv := influxtest.StartWith(t, influxtest.Options{Empty: true, Auth: true})
	require.NoError(t, srv.Query("CREATE USER writer WITH PASSWORD 'writer-password'"))

	w, logs := newWriter(t, srv, WriterConfig{Token: "writer:writer-password"})
	w.Write(points("auth", 0, 5)...)
	require.Eventually(t, func() bool { _, _, d := w.Counts(); return d == 5 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	refused := logs.FilterMessage("the InfluxDB database does not exist and cannot be created: create it, or give the token of an admin user").All()
	require.Len(t, refused, 1)
	require.Contains(t, fmt.Sprint(refused[0].ContextMap()["error"]), "requires admin privilege")
	dbs, err := srv.Databases()
	require.NoError(t, err)
	require.NotContains(t, dbs, influxtest.Database)

	admin, _ := newWriter(t, srv, WriterConfig{Token: influxtest.AdminToken})
	admin.Write(points("auth", 0, 5)...)
	requireDelivered(t, srv, admin, "auth", 5)
}

// TestWriterDropsOnlyTheBadPoints: a point that cannot be encoded (an infinite field,
// as one extreme /stats value made) is dropped when written, and a point InfluxDB
// refuses (a field type conflict) in the middle of a batch is found by splitting the
// batch: both are dropped and counted by reason, and every other point of the batch is
// written. Before, the infinite point failed every attempt to encode the batch, which
// was retried forever: nothing was written and nothing counted.
func TestWriterDropsOnlyTheBadPoints(t *testing.T) {
	srv := influxtest.Start(t)
	w, logs := newWriter(t, srv, WriterConfig{BatchPoints: 100, FlushInterval: time.Hour})
	w.Write(points("bad", 0, 1)...) // field seq is an integer from now on
	require.NoError(t, w.flush(context.Background()))

	batch := points("bad", 1, 40)
	batch[10] = influxdb2.NewPoint("bad", map[string]string{"pod": "p"}, map[string]any{"seq": math.Inf(1)}, time.Now())
	batch[25] = influxdb2.NewPoint("bad", map[string]string{"pod": "p"}, map[string]any{"seq": "text"}, time.Now())
	w.Write(batch...)
	require.Equal(t, 1.0, w.Dropped(DropInvalid), "the infinite point is dropped when written")
	require.Equal(t, 39, w.Buffered())
	require.NoError(t, w.flush(context.Background()), "a refused point is not an error to retry")
	require.NoError(t, w.Close(context.Background()))

	written, retried, dropped := w.Counts()
	require.Equal(t, 1.0+38, written)
	require.Zero(t, retried)
	require.Equal(t, 2.0, dropped)
	require.Equal(t, 1.0, w.Dropped(DropRefused))
	require.Equal(t, int64(39), count(t, srv, "bad"))
	invalid := logs.FilterMessage("influx: dropped points that cannot be encoded").All()
	require.Len(t, invalid, 1)
	require.Contains(t, fmt.Sprint(invalid[0].ContextMap()["error"]), "field seq is +Inf, want a finite number")
	refused := logs.FilterMessage("influx refused points; dropped").All()
	require.Len(t, refused, 1)
	require.Contains(t, fmt.Sprint(refused[0].ContextMap()["error"]), "field type conflict")
	require.Contains(t, refused[0].ContextMap()["first"], `seq="text"`)
}

// TestWriterRetriesAsSoonAsInfluxAnswers: while InfluxDB is down the writer backs off
// (here ten minutes), but probes /ping meanwhile and writes as soon as InfluxDB is
// back, instead of waiting out the backoff while its buffer fills.
func TestWriterRetriesAsSoonAsInfluxAnswers(t *testing.T) {
	srv := influxtest.Start(t)
	core, logs := observer.New(zap.InfoLevel)
	w, err := NewWriter(WriterConfig{URL: srv.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond,
		MinBackoff: 10 * time.Minute, MaxBackoff: 10 * time.Minute, ProbeInterval: 50 * time.Millisecond}, nil, zap.New(core))
	require.NoError(t, err)
	srv.Stop()
	w.Write(points("probe", 0, 20)...)
	require.Eventually(t, func() bool { _, retried, _ := w.Counts(); return retried > 0 }, 30*time.Second, 20*time.Millisecond)
	srv.Restart()
	// Delivered long before the ten-minute backoff ends.
	require.Eventually(t, func() bool { written, _, _ := w.Counts(); return written == 20 }, 2*time.Minute, 20*time.Millisecond)
	require.Equal(t, 1, logs.FilterMessage("InfluxDB answers again; retrying now").Len())
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, int64(20), count(t, srv, "probe"))
}

// TestWriterRateLimitsItsWarnings: a long outage past the buffer drops points every
// cycle; the warning comes once per LogEvery with the count since the last one, not
// once per cycle.
func TestWriterRateLimitsItsWarnings(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	core, logs := observer.New(zap.InfoLevel)
	w, err := NewWriter(WriterConfig{URL: "http://127.0.0.1:1", Bucket: "qas/autogen", BufferPoints: 10, BatchPoints: 10,
		FlushInterval: time.Hour, LogEvery: 10 * time.Second, Now: func() time.Time { return now }}, nil, zap.New(core))
	require.NoError(t, err)
	t.Cleanup(func() { close(w.stop); <-w.stopped })
	w.Write(points("limit", 0, 10)...)
	for i := range 100 { // 100 cycles of 3 points each within one second
		w.Write(points("limit", 10+3*i, 3)...)
		now = now.Add(10 * time.Millisecond)
	}
	full := logs.FilterMessage("influx buffer full: dropped the oldest points").All()
	require.Len(t, full, 1)
	require.Equal(t, int64(3), full[0].ContextMap()["dropped"])
	now = now.Add(10 * time.Second)
	w.Write(points("limit", 400, 3)...)
	full = logs.FilterMessage("influx buffer full: dropped the oldest points").All()
	require.Len(t, full, 2)
	require.Equal(t, int64(300), full[1].ContextMap()["dropped"], "the 297 left unlogged and these 3")
	require.Equal(t, 303.0, w.Dropped(DropBufferFull))
	require.Equal(t, 10, w.Buffered())
}

func TestNewWriterValidates(t *testing.T) {
	_, err := NewWriter(WriterConfig{}, nil, zap.NewNop())
	require.ErrorContains(t, err, "URL and bucket are required")
	_, err = NewWriter(WriterConfig{URL: "http://127.0.0.1:1", Bucket: "b", BufferPoints: 10, BatchPoints: 100}, nil, zap.NewNop())
	require.ErrorContains(t, err, "smaller than a batch")
}

// TestWriterNeverWaitsOnAHungInflux: an InfluxDB that accepts connections and never
// answers (hung) costs the writer's callers nothing: Write returns at once, each
// attempt ends at Timeout and is counted, and Close ends within its context, counting
// what it could not write.
func TestWriterNeverWaitsOnAHungInflux(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	core, logs := observer.New(zap.InfoLevel)
	w, err := NewWriter(WriterConfig{URL: "http://" + ln.Addr().String(), Bucket: "qas/autogen", FlushInterval: 20 * time.Millisecond,
		Timeout: 200 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, ProbeInterval: 20 * time.Millisecond},
		nil, zap.New(core))
	require.NoError(t, err)
	w.Write(points("hung", 0, 10)...)
	require.Equal(t, 10, w.Buffered())
	require.Eventually(t, func() bool { _, retried, _ := w.Counts(); return retried >= 20 }, 30*time.Second, 10*time.Millisecond,
		"attempts end at Timeout and are retried")
	require.Zero(t, logs.FilterMessage("InfluxDB answers again; retrying now").Len(), "a hung /ping is no answer")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.Error(t, w.Close(ctx))
	require.Equal(t, 10.0, w.Dropped(DropClosed))
	written, _, _ := w.Counts()
	require.Zero(t, written)
}
