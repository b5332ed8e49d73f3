package store

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// goodPooled are a pooled workload point's fields the decider reads, all valid.
var goodPooled = map[string]float64{
	influx.FieldOverflowShare: 0.4, influx.FieldFrontQueueLength: 17,
	influx.FieldExpiredRequeuedRate: 1.5, influx.FieldExpiredRelayedRate: 0.25, influx.FieldFrontRefusedFullRate: 3,
}

// pooledRead is what a snapshot says of those fields.
func pooledRead(w measurement.Workload) map[string]float64 {
	return map[string]float64{
		influx.FieldOverflowShare: w.OverflowShare, influx.FieldFrontQueueLength: w.FrontQueue,
		influx.FieldExpiredRequeuedRate: w.ExpiredRequeuedRate, influx.FieldExpiredRelayedRate: w.ExpiredRelayedRate,
		influx.FieldFrontRefusedFullRate: w.FrontRefusedRate,
	}
}

// pooledPoint is workload ns/<workload>'s point at t0 with goodPooled, field
// set to v.
func pooledPoint(workload, field string, v float64) *write.Point {
	p := write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": workload},
		map[string]any{influx.FieldArrivalRate: 10.0, influx.FieldServiceMean: 0.02}, t0)
	for f, good := range goodPooled {
		if f == field {
			good = v
		}
		p.AddField(f, good)
	}
	return p
}

// badPooled are values no collector writes: each field with each of them.
type badPooledCase struct {
	field string
	v     float64
	msg   string
}

func badPooledCases(storable bool) []badPooledCase {
	var cases []badPooledCase
	for _, f := range []string{influx.FieldOverflowShare, influx.FieldFrontQueueLength, influx.FieldExpiredRequeuedRate,
		influx.FieldExpiredRelayedRate, influx.FieldFrontRefusedFullRate} {
		cases = append(cases, badPooledCase{f, -1, f + " = -1 is not a finite number ≥ 0: read as 0"})
		if !storable {
			// InfluxDB stores no NaN or infinity; the memory store (the
			// simulator's) holds whatever a writer gave it.
			cases = append(cases, badPooledCase{f, math.NaN(), f + " = NaN is not a finite number ≥ 0"},
				badPooledCase{f, math.Inf(1), f + " = +Inf is not a finite number ≥ 0"},
				badPooledCase{f, math.Inf(-1), f + " = -Inf is not a finite number ≥ 0"})
		}
	}
	return append(cases, badPooledCase{influx.FieldOverflowShare, 1.5, influx.FieldOverflowShare + " = 1.5 is above 1: read as 0"})
}

// checkPooledCase reads case i's workload and checks that only its bad field
// was dropped, and said.
func checkPooledCase(t *testing.T, st Store, i int, c badPooledCase) {
	t.Helper()
	w, err := st.Snapshot(context.Background(), Query{Namespace: "ns", Workload: fmt.Sprintf("w%d", i), Now: t0.Add(time.Second), Window: time.Minute})
	require.NoError(t, err)
	require.Contains(t, w.PooledError, c.msg)
	want := map[string]float64{}
	for f, v := range goodPooled {
		want[f] = v
	}
	want[c.field] = 0
	require.Equal(t, want, pooledRead(w), "only %s is dropped", c.field)
	require.Equal(t, 10.0, w.ArrivalRates[0].Rate, "the rest of the point stands")
	require.Equal(t, 0.02, w.ServiceTime)
}

// TestPooledFieldsAreValidated: a pooled field that is not a finite number
// ≥ 0 (an overflow share above 1) reads as 0 and PooledError names it with
// its value; the other pooled fields and the rest of the point stand. Good
// fields give no error.
func TestPooledFieldsAreValidated(t *testing.T) {
	m := NewMemory()
	cases := badPooledCases(false)
	for i, c := range cases {
		m.Write(pooledPoint(fmt.Sprintf("w%d", i), c.field, c.v))
	}
	m.Write(pooledPoint("good", "", 0))
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", c.field, c.v), func(t *testing.T) { checkPooledCase(t, m, i, c) })
	}
	w, err := m.Snapshot(context.Background(), Query{Namespace: "ns", Workload: "good", Now: t0.Add(time.Second), Window: time.Minute})
	require.NoError(t, err)
	require.Empty(t, w.PooledError)
	require.Equal(t, goodPooled, pooledRead(w))

	// Two bad fields: both named, the others kept.
	m.Write(pooledPoint("two", influx.FieldExpiredRelayedRate, -2).AddField(influx.FieldFrontQueueLength, math.NaN()))
	w, err = m.Snapshot(context.Background(), Query{Namespace: "ns", Workload: "two", Now: t0.Add(time.Second), Window: time.Minute})
	require.NoError(t, err)
	require.Contains(t, w.PooledError, "front_queue_length = NaN")
	require.Contains(t, w.PooledError, "expired_relayed_rate = -2")
	require.Equal(t, 1.5, w.ExpiredRequeuedRate)
	require.Equal(t, 3.0, w.FrontRefusedRate)
	require.Zero(t, w.ExpiredRelayedRate)
	require.Zero(t, w.FrontQueue)

	// A workload that does not pool has none of the fields: all 0, no error.
	m.Write(write.NewPoint(influx.Workload, map[string]string{"namespace": "ns", "workload": "plain"},
		map[string]any{influx.FieldArrivalRate: 10.0}, t0))
	w, err = m.Snapshot(context.Background(), Query{Namespace: "ns", Workload: "plain", Now: t0.Add(time.Second), Window: time.Minute})
	require.NoError(t, err)
	require.Empty(t, w.PooledError)
	require.Zero(t, w.ExpiredRequeuedRate+w.ExpiredRelayedRate+w.FrontRefusedRate+w.FrontQueue+w.OverflowShare)
}

// TestFluxValidatesPooledFields: the same checks through a real InfluxDB,
// with the bad values it can store.
func TestFluxValidatesPooledFields(t *testing.T) {
	cases := badPooledCases(true)
	var points []*write.Point
	for i, c := range cases {
		points = append(points, pooledPoint(fmt.Sprintf("w%d", i), c.field, c.v))
	}
	fl := &Flux{Query: influxWith(t, points...), Bucket: influxtest.Bucket}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", c.field, c.v), func(t *testing.T) { checkPooledCase(t, fl, i, c) })
	}
}
