package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// otherRelease serves a real proxy's /stats as a proxy of another release
// would: it fetches the real document and rewrites it with edit.
func otherRelease(t *testing.T, statsURL string, edit func([]byte) ([]byte, error)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(statsURL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		doc, err := io.ReadAll(resp.Body)
		if err == nil {
			doc, err = edit(doc)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/stats"
}

// newer adds members this collector does not know, at the top and in the
// latency histogram.
func newer(doc []byte) ([]byte, error) {
	doc = bytes.Replace(doc, []byte(`{`), []byte(`{"added_later":{"n":1e999,"s":["NaN",[{}]]},`), 1)
	if !bytes.Contains(doc, []byte(`"latency":{`)) {
		return nil, fmt.Errorf("no latency histogram in %s", doc)
	}
	return bytes.Replace(doc, []byte(`"latency":{`), []byte(`"latency":{"exemplars":[{"trace_id":"abc"}],`), 1), nil
}

// older removes the members added last (the service histogram, the latency
// sum, the per-second series).
func older(doc []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	delete(m, "service")
	delete(m, "latency_seconds_sum")
	delete(m, "arrivals_per_second")
	return json.Marshal(m)
}

// TestMixedReleasesToInflux: a rolling upgrade's workload, three real proxies
// in front of the example app, one serving /stats as this release does, one as
// the next release (members this collector does not know) and one as the
// previous (without the members added last), scraped into a real InfluxDB and
// read back by the decider's Flux store. Every pod is read and written every
// cycle, the newer proxy's ignored members are logged once, and the workload's
// service samples count every pod's served requests (the older one's from its
// completions). Before, the newer proxy was refused every cycle.
func TestMixedReleasesToInflux(t *testing.T) {
	db := influxtest.Start(t)
	serving, targets := startPods(t, 3, func(i int) scrape.Target {
		return scrape.Target{Namespace: "ns", Workload: "w", Pod: []string{"current", "newer", "older"}[i], Node: "n"}
	})
	targets[1].URL = otherRelease(t, targets[1].URL, newer)
	targets[2].URL = otherRelease(t, targets[2].URL, older)
	core, logs := observer.New(zapcore.InfoLevel)
	sc := scrape.NewScraper(nil, 4, 2*time.Second, prometheus.NewRegistry(), zap.New(core))
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	st := collectInto(t, db, w, &pipeline.Pipeline{Scraper: sc, Sink: w}, targets, serving, 5)

	require.Zero(t, sc.Failures(scrape.FailDecode))
	require.Zero(t, logs.FilterLevelExact(zapcore.WarnLevel).Len(), "no proxy is at fault")
	written, retried, dropped := w.Counts()
	require.Zero(t, dropped)
	require.Zero(t, retried)
	require.Equal(t, 4.0*4, written, "4 intervals of 3 pods and their workload")
	skew := logs.FilterMessage("proxy's /stats has fields this collector does not know; they are ignored (the proxy is newer than the collector)")
	require.Equal(t, 1, skew.Len())
	require.Equal(t, "ns/newer", skew.All()[0].ContextMap()["pod"])
	require.Equal(t, []any{"added_later", "latency.exemplars"}, skew.All()[0].ContextMap()["fields"])

	snap, err := st.Snapshot(context.Background(), store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Minute})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 3)
	require.Len(t, snap.ArrivalRates, 4)
	for _, r := range snap.ArrivalRates {
		require.Positive(t, r.Rate)
	}
	require.Equal(t, 15.0, snap.ServiceSamples, "5 requests at each of the 3 pods in the last interval")
	require.NotNil(t, snap.ServiceQuantiles, "from the pods that send a service histogram")
}
