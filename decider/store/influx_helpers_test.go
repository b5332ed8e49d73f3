package store

import (
	"context"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// influxWith starts a real InfluxDB, writes points through the project's
// writer (every one written: none dropped) and returns a query API on it, the
// one the Flux store reads through.
func influxWith(t testing.TB, points ...*write.Point) api.QueryAPI {
	t.Helper()
	db := influxDBWith(t, points...)
	client := influxdb2.NewClient(db.URL, "")
	t.Cleanup(client.Close)
	return client.QueryAPI("")
}

// influxDBWith starts a real InfluxDB and writes points through the project's
// writer, every one written (none dropped).
func influxDBWith(t testing.TB, points ...*write.Point) *influxtest.Server {
	t.Helper()
	db := influxtest.Start(t)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	w.Write(points...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(ctx))
	_, _, dropped := w.Counts()
	require.Zero(t, dropped, "points the writer dropped")
	return db
}
