package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// TestRunWithJoinsCPU scrapes two recorders' real /stats handlers and checks the points:
// only declared fields, CPU joined onto the pod that has it, read back by the store.
func TestRunWithJoinsCPU(t *testing.T) {
	var targets []scrape.Target
	var recs []*measure.Recorder
	for _, name := range []string{"a", "b"} {
		rec := measure.New(nil, 0, 0)
		srv := httptest.NewServer(server.NewAdmin(rec, "127.0.0.1:1", new(atomic.Bool)))
		t.Cleanup(srv.Close)
		recs = append(recs, rec)
		targets = append(targets, scrape.Target{Namespace: "ns", Workload: "w", Pod: name, Node: "n", URL: srv.URL + "/stats"})
	}
	mem := store.NewMemory()
	var sink recording
	p := &Pipeline{Scraper: scrape.NewScraper(nil, 2, time.Second, nil, zap.NewNop()), Sink: multi{mem, &sink}}
	ctx := context.Background()
	require.Zero(t, p.Run(ctx, targets).Points)
	for _, r := range recs {
		a := r.Arrive()
		r.End(a, r.Begin(), 0, http.StatusOK, measure.OK)
	}
	c := p.RunWith(ctx, targets, map[string]Resources{"ns/a": {Usage: 0.3, HasUsage: true, Request: 250, Limit: 500}})
	require.Equal(t, 3, c.Points)
	require.EqualValues(t, 2, c.Workloads[WorkloadKey{"ns", "w"}].Completions)
	for _, pt := range sink.points {
		m, ok := influx.Lookup(pt.Name())
		require.True(t, ok)
		for _, f := range pt.FieldList() {
			found := false
			for _, d := range m.Fields {
				found = found || d.Name == f.Key
			}
			require.True(t, found, "%s.%s is declared in the schema", pt.Name(), f.Key)
		}
		for _, tag := range pt.TagList() {
			require.Contains(t, m.Tags, tag.Key)
		}
	}
	snap, err := mem.Snapshot(ctx, store.Query{Namespace: "ns", Workload: "w", Now: time.Now(), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, snap.Pods, 2)
	require.Equal(t, 0.3, snap.Pods[0].CPUUsage)
	require.EqualValues(t, 250, snap.Pods[0].CPURequest)
	require.EqualValues(t, 500, snap.Pods[0].CPULimit)
	require.Zero(t, snap.Pods[1].CPUUsage)
}
