package store

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"github.com/influxdata/influxdb-client-go/v2/api"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// The parts of a snapshot, as its errors name them.
const (
	workloadPart   = "workload points"
	newestPart     = "newest workload point"
	bucketsPart    = "latency and service buckets"
	podsPart       = "pods"
	nodesPart      = "nodes"
	neighboursPart = "neighbours"
)

// snapshotPart names the part of a snapshot a Flux query reads.
func snapshotPart(flux string) string {
	switch {
	case strings.Contains(flux, influx.LatencyBucketPrefix):
		return bucketsPart
	case strings.Contains(flux, "|> filter(fn: (r) => r.namespace != "):
		return neighboursPart
	case strings.Contains(flux, "r._measurement == "+FluxString(influx.Pod)):
		return podsPart
	case strings.Contains(flux, "r._measurement == "+FluxString(influx.Node)):
		return nodesPart
	case strings.Contains(flux, "r._field == "+FluxString(influx.FieldServiceMean)):
		return newestPart
	}
	return workloadPart
}

// faultyQueries is a QueryAPI on a real InfluxDB that spoils one part's query
// so that the server rejects it, holds another part's until its context ends
// (a query InfluxDB is slow to answer), and cancels the snapshot's context when
// a third part's query starts.
type faultyQueries struct {
	api.QueryAPI
	reject, hold, cancelAt string
	cancel                 context.CancelFunc
	// held receives why the held query ended: its context's error, or that
	// it was never cancelled.
	held chan error
	// asked receives the part of every query asked.
	asked chan string
}

// undefinedFlux makes any query one InfluxDB rejects: it calls a function
// Flux does not have.
const undefinedFlux = "  |> qasUndefinedFunction()\n"

func (f *faultyQueries) Query(ctx context.Context, flux string) (*api.QueryTableResult, error) {
	part := snapshotPart(flux)
	f.asked <- part
	switch part {
	case f.reject:
		flux += undefinedFlux
	case f.hold:
		select {
		case <-ctx.Done():
			f.held <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			f.held <- errors.New("held a minute, never cancelled")
			return nil, errors.New("held a minute, never cancelled")
		}
	case f.cancelAt:
		f.cancel()
	}
	return f.QueryAPI.Query(ctx, flux)
}

// TestAFailedReadFailsTheSnapshotAndCancelsItsRound: a snapshot reads in
// rounds, the queries of a round at once, from a real InfluxDB. A query the
// server rejects fails the snapshot with an error naming its part, and the
// other query of its round, still waiting for InfluxDB, is cancelled rather
// than read on; the buckets' failure alone fails nothing (the histograms are
// dropped with its error) and cancels nothing; a snapshot whose context is
// cancelled mid-way fails with the read it cancelled. No goroutine is left
// when Snapshot returns, and the client keeps no connection alive, so a
// response left open would show as one.
func TestAFailedReadFailsTheSnapshotAndCancelsItsRound(t *testing.T) {
	db := influxDBWith(t, fixture()...)
	client := influxdb2.NewClientWithOptions(db.URL, "",
		influxdb2.DefaultOptions().SetHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	t.Cleanup(client.Close)
	q := Query{Namespace: "ns", Workload: "w", Now: t0.Add(20 * time.Second), Window: time.Minute, Nodes: []string{"n3"}}
	for _, tc := range []struct {
		name                   string
		reject, hold, cancelAt string
		// err is what the snapshot's error begins with ("": none), or orErr
		// where two reads of a round fail alike and either may be first.
		err, orErr, contains string
		// asked are the parts read.
		asked []string
	}{
		{name: "the workload points rejected", reject: workloadPart,
			err: "store: workload points: flux query: ", contains: "qasUndefinedFunction",
			asked: []string{workloadPart}},
		{name: "the pods rejected while the buckets are read", reject: podsPart, hold: bucketsPart,
			err: "store: pods: flux query: ", contains: "qasUndefinedFunction",
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart}},
		{name: "the newest point's fields rejected while the pods are read", reject: newestPart, hold: podsPart,
			err: "store: newest workload point: flux query: ", contains: "qasUndefinedFunction",
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart}},
		{name: "the nodes rejected while the neighbours are read", reject: nodesPart, hold: neighboursPart,
			err: "store: nodes: flux query: ", contains: "qasUndefinedFunction",
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart, nodesPart, neighboursPart}},
		{name: "the neighbours rejected while the nodes are read", reject: neighboursPart, hold: nodesPart,
			err: "store: neighbours: flux query: ", contains: "qasUndefinedFunction",
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart, nodesPart, neighboursPart}},
		{name: "the buckets rejected", reject: bucketsPart,
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart, nodesPart, neighboursPart}},
		// The newest point's fields are read beside the pods: the cancelled
		// context fails both, and either error may come first.
		{name: "the context cancelled as the pods are read", cancelAt: podsPart,
			err: "store: pods: flux query: ", orErr: "store: newest workload point: flux query: ", contains: context.Canceled.Error(),
			asked: []string{workloadPart, newestPart, bucketsPart, podsPart}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			faulty := &faultyQueries{QueryAPI: client.QueryAPI(""), reject: tc.reject, hold: tc.hold, cancelAt: tc.cancelAt, cancel: cancel,
				held: make(chan error, 1), asked: make(chan string, 6)}
			got, err := (&Flux{Query: faulty, Bucket: influxtest.Bucket}).Snapshot(ctx, q)
			goleak.VerifyNone(t, before)

			if tc.err == "" {
				require.NoError(t, err)
				rejected := "store: latency and service buckets: flux query: "
				require.True(t, strings.HasPrefix(got.LatencyBucketsError, rejected), got.LatencyBucketsError)
				require.Contains(t, got.LatencyBucketsError, "qasUndefinedFunction")
				whole := want()
				whole.LatencyBuckets, whole.LatencyBucketsError = nil, got.LatencyBucketsError
				whole.ServiceBuckets, whole.ServiceBucketsError = nil, got.LatencyBucketsError
				require.Equal(t, whole, utcTimes(got), "everything else as read without the failure")
			} else {
				require.Error(t, err)
				require.True(t, strings.HasPrefix(err.Error(), tc.err) || (tc.orErr != "" && strings.HasPrefix(err.Error(), tc.orErr)),
					"%q begins with %q or %q", err, tc.err, tc.orErr)
				require.Contains(t, err.Error(), tc.contains)
			}
			if tc.hold != "" {
				select {
				case why := <-faulty.held:
					require.ErrorIs(t, why, context.Canceled, "the %s were read on after the %s failed", tc.hold, tc.reject)
				default:
					require.Fail(t, "never asked", "the %s", tc.hold)
				}
			}
			close(faulty.asked)
			var asked []string
			for part := range faulty.asked {
				asked = append(asked, part)
			}
			require.ElementsMatch(t, tc.asked, asked)
			require.True(t, slices.IsSortedFunc(asked, func(a, b string) int { return round[a] - round[b] }), "asked %q: a round after the one before", asked)
		})
	}
}

// round is the round of a snapshot each part is read in.
var round = map[string]int{workloadPart: 1, newestPart: 2, bucketsPart: 2, podsPart: 2, nodesPart: 3, neighboursPart: 3}

// TestAFailedHistoryReadNamesItself: the long λ history's read, rejected by a
// real InfluxDB, fails with an error that names it, and returns no samples.
func TestAFailedHistoryReadNamesItself(t *testing.T) {
	db := influxDBWith(t, fixture()...)
	client := influxdb2.NewClient(db.URL, "")
	t.Cleanup(client.Close)
	faulty := &faultyQueries{QueryAPI: client.QueryAPI(""), reject: workloadPart, held: make(chan error, 1), asked: make(chan string, 1)}
	got, err := (&Flux{Query: faulty, Bucket: influxtest.Bucket}).History(context.Background(),
		HistoryQuery{Namespace: "ns", Workload: "w", Now: t0.Add(time.Hour), Span: time.Hour, Step: time.Minute})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "store: λ history: flux query: "), err.Error())
	require.Contains(t, err.Error(), "qasUndefinedFunction")
	require.Nil(t, got)
}
