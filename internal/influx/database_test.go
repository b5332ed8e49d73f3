package influx

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestDatabaseNames(t *testing.T) {
	for bucket, db := range map[string]string{"qas/autogen": "qas", "qas": "qas", "metrics/week": "metrics", "a/b/c": "a"} {
		require.Equal(t, db, v1Database(bucket), bucket)
	}
	require.Equal(t, `"qas"`, quoteIdent("qas"))
	require.Equal(t, `"my \"db\" \\ x"`, quoteIdent(`my "db" \ x`))
	for version, v1 := range map[string]bool{"1.8.10": true, "": true, "unknown": true, "2.7.4": false, "v2.7.4": false, "3.0.0": false} {
		require.Equal(t, v1, maybeV1(version), version)
	}
}

// TestWriterNeverSendsInfluxQLToV2 is a unit test of the version guard with a fake
// server (a real InfluxDB 2.x cannot be built here): a "database not found" from a
// server whose /ping says 2.x is dropped as refused, without a CREATE DATABASE.
func TestWriterNeverSendsInfluxQLToV2(t *testing.T) {
	var queries atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ping":
			w.Header().Set("X-Influxdb-Version", "v2.7.4")
			w.WriteHeader(http.StatusNoContent)
		case "/query":
			queries.Add(1)
		default: // as InfluxDB 1.8 answers a write into a missing database
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Influxdb-Error", `database not found: "qas"`)
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"database not found: \"qas\""}`))
		}
	}))
	defer srv.Close()
	core, logs := observer.New(zap.InfoLevel)
	w, err := NewWriter(WriterConfig{URL: srv.URL, Bucket: "qas/autogen", FlushInterval: 20 * time.Millisecond}, nil, zap.New(core))
	require.NoError(t, err)
	w.Write(points("v2", 0, 3)...)
	require.Eventually(t, func() bool { _, _, d := w.Counts(); return d == 3 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, w.Close(context.Background()))
	require.Zero(t, queries.Load())
	entries := logs.FilterMessage("the InfluxDB database does not exist and cannot be created: create it, or give the token of an admin user").All()
	require.Len(t, entries, 1)
	require.Contains(t, entries[0].ContextMap()["error"], "not InfluxDB 1.x")
}
