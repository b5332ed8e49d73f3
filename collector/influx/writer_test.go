package influx

import (
	"context"
	"fmt"
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
	client := influxdb2.NewClient(srv.URL, "")
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
	require.Eventually(t, func() bool { return w.Buffered() == 0 }, 60*time.Second, 50*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	_, _, dropped := w.Counts()
	require.Zero(t, dropped)
	require.Equal(t, int64(400), count(t, srv, "outage"))
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
	core, logs := observer.New(zap.InfoLevel)
	w, err := NewWriter(WriterConfig{URL: srv.URL, Bucket: "nosuchdb/autogen", FlushInterval: 50 * time.Millisecond}, nil, zap.New(core))
	require.NoError(t, err)
	w.Write(points("refused", 0, 5)...)
	require.Eventually(t, func() bool { _, _, d := w.Counts(); return d == 5 }, 30*time.Second, 20*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 1, logs.FilterMessage("influx rejected a batch; dropped").Len())
	_, retried, _ := w.Counts()
	require.Zero(t, retried, "a refused batch is not retried forever")
}

func TestNewWriterValidates(t *testing.T) {
	_, err := NewWriter(WriterConfig{}, nil, zap.NewNop())
	require.ErrorContains(t, err, "URL and bucket are required")
	_, err = NewWriter(WriterConfig{URL: "http://127.0.0.1:1", Bucket: "b", BufferPoints: 10, BatchPoints: 100}, nil, zap.NewNop())
	require.ErrorContains(t, err, "smaller than a batch")
}
