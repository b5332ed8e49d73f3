package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// historyPoints are ns/web's λ every 15 s from t0 − 3 h to t0 + 1 min: 100/s,
// 400/s in the minutes 10:20–10:25 of each hour (a recurring burst), and
// another workload's points that must not be read.
func historyPoints() []*write.Point {
	var pts []*write.Point
	for at := t0.Add(-3 * time.Hour); !at.After(t0.Add(time.Minute)); at = at.Add(15 * time.Second) {
		rate := 100.0
		if m := at.Minute(); m >= 20 && m < 25 {
			rate = 400
		}
		// A second point in some windows at another rate: the mean counts both.
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "web"},
			map[string]any{"arrival_rate": rate, "service_mean_seconds": 0.05}, at))
		pts = append(pts, write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "other"},
			map[string]any{"arrival_rate": 9999.0}, at))
	}
	return pts
}

// checkHistory asserts what st reads of historyPoints over a span.
func checkHistory(t *testing.T, st HistoryStore) {
	t.Helper()
	ctx := context.Background()
	now := t0.Add(30 * time.Second) // inside the window ending t0+1m: left out
	got, err := st.History(ctx, HistoryQuery{Namespace: "ns", Workload: "web", Now: now, Span: 2 * time.Hour, Step: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 120, "whole minutes in (t0 − 2 h, t0]")
	require.Equal(t, t0.Add(-2*time.Hour+time.Minute), got[0].Time)
	require.Equal(t, t0, got[len(got)-1].Time)
	for _, s := range got {
		// The window ending at s.Time began a minute before.
		want := 100.0
		if m := s.Time.Add(-time.Minute).Minute(); m >= 20 && m < 25 {
			want = 400
		}
		require.InDelta(t, want, s.Rate, 1e-9, "window ending %s", s.Time)
	}
	// A refresh from a later From reads only the windows after it.
	got, err = st.History(ctx, HistoryQuery{Namespace: "ns", Workload: "web", Now: now, Span: 2 * time.Hour, Step: time.Minute, From: t0.Add(-3 * time.Minute)})
	require.NoError(t, err)
	require.Len(t, got, 3)
	// Five-minute steps: means over five minutes.
	got, err = st.History(ctx, HistoryQuery{Namespace: "ns", Workload: "web", Now: t0, Span: time.Hour, Step: 5 * time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 12)
	for _, s := range got {
		want := 100.0
		if s.Time.Minute() == 25 {
			want = 400
		}
		require.InDelta(t, want, s.Rate, 1e-9, "window ending %s", s.Time)
	}
	// Nothing there: empty, not an error.
	got, err = st.History(ctx, HistoryQuery{Namespace: "ns", Workload: "missing", Now: now, Span: time.Hour, Step: time.Minute})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestMemoryHistory(t *testing.T) {
	m := NewMemory()
	m.Write(historyPoints()...)
	checkHistory(t, m)
}

// TestFluxHistoryMatchesMemory: the same points in a real InfluxDB give the
// same downsampled history through aggregateWindow.
func TestFluxHistoryMatchesMemory(t *testing.T) {
	db := influxtest.Start(t)
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, FlushInterval: 50 * time.Millisecond}, nil, zap.NewNop())
	require.NoError(t, err)
	w.Write(historyPoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(ctx))
	client := influxdb2.NewClient(db.URL, "")
	defer client.Close()
	fl := &Flux{Query: client.QueryAPI(""), Bucket: influxtest.Bucket}
	checkHistory(t, fl)

	// Through the source and its cache, as the controller reads it: the
	// same as Memory's.
	mem := NewMemory()
	mem.Write(historyPoints()...)
	now := t0.Add(30 * time.Second)
	lh := &LongHistory{Store: fl, Span: 2 * time.Hour, Step: time.Minute}
	src := Source{Store: fl, Window: 5 * time.Minute, History: lh}
	got, err := src.Measure(ctx, measurement.Query{Namespace: "ns", Workload: "web", Now: now})
	require.NoError(t, err)
	wantH, err := mem.History(ctx, HistoryQuery{Namespace: "ns", Workload: "web", Now: now, Span: 2 * time.Hour, Step: time.Minute})
	require.NoError(t, err)
	require.Equal(t, wantH, got.History)
	require.Empty(t, got.HistoryError)

	// InfluxDB down: a refresh fails with an error (the source then leaves
	// the history empty; TestSourceHistory).
	db.Stop()
	_, err = lh.Read(ctx, "ns", "web", now.Add(time.Minute))
	require.Error(t, err)
}

// countingHistory counts the reads and the windows each asked for.
type countingHistory struct {
	HistoryStore
	mu    sync.Mutex
	reads []HistoryQuery
	fail  error
}

func (c *countingHistory) History(ctx context.Context, q HistoryQuery) ([]decide.Sample, error) {
	c.mu.Lock()
	c.reads = append(c.reads, q)
	fail := c.fail
	c.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	return c.HistoryStore.History(ctx, q)
}

// TestLongHistoryReadsOnlyWhatIsNew: the first read of a workload reads the
// span; a read within the same step reads nothing; a read a step later reads
// only the newest windows (the last two again, for late points), and what it
// returns equals a full read.
func TestLongHistoryReadsOnlyWhatIsNew(t *testing.T) {
	m := NewMemory()
	m.Write(historyPoints()...)
	c := &countingHistory{HistoryStore: m}
	lh := &LongHistory{Store: c, Span: 2 * time.Hour, Step: time.Minute}
	ctx := context.Background()
	full := func(now time.Time) []decide.Sample {
		s, err := m.History(ctx, HistoryQuery{Namespace: "ns", Workload: "web", Now: now, Span: 2 * time.Hour, Step: time.Minute})
		require.NoError(t, err)
		return s
	}
	steps := []struct {
		now      time.Time
		reads    int
		fromZero bool
		from     time.Time
	}{
		{now: t0.Add(-time.Hour + 10*time.Second), reads: 1, fromZero: true},
		{now: t0.Add(-time.Hour + 50*time.Second), reads: 1},
		{now: t0.Add(-time.Hour + 70*time.Second), reads: 2, from: t0.Add(-time.Hour - 2*time.Minute)},
		{now: t0.Add(-time.Hour + 5*time.Minute), reads: 3, from: t0.Add(-time.Hour - time.Minute)},
		// Back in time (a clock step): read it all again.
		{now: t0.Add(-2 * time.Hour), reads: 4, fromZero: true},
		// Later than the span since the last read: all again.
		{now: t0, reads: 5, fromZero: true},
	}
	for i, st := range steps {
		got, err := lh.Read(ctx, "ns", "web", st.now)
		require.NoError(t, err)
		require.Equal(t, full(st.now), got, "step %d", i)
		require.Len(t, c.reads, st.reads, "step %d", i)
		last := c.reads[len(c.reads)-1]
		if st.fromZero {
			require.True(t, last.From.IsZero(), "step %d reads the whole span", i)
		} else if !st.from.IsZero() {
			require.Equal(t, st.from, last.From, "step %d", i)
		}
	}
	// A failing store: an error, and the next read retries.
	c.fail = errors.New("influx down")
	_, err := lh.Read(ctx, "ns", "web", t0.Add(time.Minute))
	require.ErrorContains(t, err, "influx down")
	c.fail = nil
	got, err := lh.Read(ctx, "ns", "web", t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, full(t0.Add(time.Minute)), got)

	// A workload not read for a span is forgotten.
	_, err = lh.Read(ctx, "ns", "other", t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, lh.Workloads())
	_, err = lh.Read(ctx, "ns", "other", t0.Add(3*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, lh.Workloads())
}

// TestSourceHistory: the source adds the long history to the measurement; a
// failed history read leaves it empty, says why, and loses nothing else.
func TestSourceHistory(t *testing.T) {
	m := NewMemory()
	m.Write(historyPoints()...)
	c := &countingHistory{HistoryStore: m}
	src := Source{Store: m, Window: 5 * time.Minute, History: &LongHistory{Store: c, Span: time.Hour, Step: time.Minute}}
	q := measurement.Query{Namespace: "ns", Workload: "web", Now: t0.Add(30 * time.Second)}
	got, err := src.Measure(context.Background(), q)
	require.NoError(t, err)
	require.Len(t, got.History, 60)
	require.NotEmpty(t, got.ArrivalRates)

	c.fail = errors.New("query timed out")
	got, err = src.Measure(context.Background(), measurement.Query{Namespace: "ns", Workload: "web", Now: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.Empty(t, got.History)
	require.Contains(t, got.HistoryError, "ns/web")
	require.Contains(t, got.HistoryError, "query timed out")
	require.NotEmpty(t, got.ArrivalRates)
}

func TestHistoryQuery(t *testing.T) {
	ok := HistoryQuery{Namespace: "ns", Workload: "w", Now: t0, Span: time.Hour, Step: time.Minute}
	for _, tc := range []struct {
		name string
		mod  func(*HistoryQuery)
		msg  string
	}{
		{"namespace", func(q *HistoryQuery) { q.Namespace = "" }, "namespace"},
		{"workload", func(q *HistoryQuery) { q.Workload = "" }, "workload"},
		{"now", func(q *HistoryQuery) { q.Now = time.Time{} }, "now"},
		{"step", func(q *HistoryQuery) { q.Step = 0 }, "step 0s"},
		{"step fraction", func(q *HistoryQuery) { q.Step = 1500 * time.Millisecond }, "whole number of seconds"},
		{"span", func(q *HistoryQuery) { q.Span = time.Second }, "shorter than its step"},
		{"samples", func(q *HistoryQuery) { q.Span, q.Step = 1000*time.Hour, time.Second }, "more than 100000 samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ok
			tc.mod(&q)
			require.ErrorContains(t, q.Validate(), tc.msg)
			_, err := NewMemory().History(context.Background(), q)
			require.ErrorContains(t, err, tc.msg)
			_, err = (&LongHistory{Store: NewMemory(), Span: q.Span, Step: q.Step}).Read(context.Background(), q.Namespace, q.Workload, q.Now)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	require.NoError(t, ok.Validate())

	q := ok
	q.Namespace, q.Now = `n"s`, t0.Add(42*time.Second)
	fq := HistoryFluxQuery("qas/autogen", q)
	require.Contains(t, fq, `range(start: 2026-11-22T09:00:00Z, stop: 2026-11-22T10:00:00Z)`, "whole windows only")
	require.Contains(t, fq, `r.namespace == "n\"s" and r.workload == "w"`)
	require.Contains(t, fq, `r._field == "arrival_rate"`)
	require.Contains(t, fq, `aggregateWindow(every: 60s, fn: mean, createEmpty: false)`)
	q.From = t0.Add(-10*time.Minute + 5*time.Second)
	require.Contains(t, HistoryFluxQuery("b", q), `range(start: 2026-11-22T09:50:00Z, stop: 2026-11-22T10:00:00Z)`)
}
