package server

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/stats"
)

// TestLatencySumCountsOverflowedRequests: the sender's latency histogram counts the
// requests it relayed from a front, and its sum (in /stats and as
// qas_proxy_latency_seconds_sum) counts their latency too, which service plus queue
// wait does not (they were neither served nor queued here). A's slot is held; five
// requests overflow through the front to B, whose app sleeps 30 ms on each, so each
// lasted at least 30 ms at A. The sum lies within the histogram's own bucket bounds
// (the exact sum of what it counts), within what the clients measured (each request's
// latency at the proxy is inside its client's round trip), and exceeds A's service
// plus queue wait by at least the five relayed requests' 30 ms. B, which served them,
// counts their service and not their latency or status, so the two pods'
// histograms and codes merged count each request once.
func TestLatencySumCountsOverflowedRequests(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		const moved, sleep = 5, 30 * time.Millisecond
		p := newPair(t, fast, 5*time.Second)
		start := time.Now()
		blocked := sendAsync(p.a.url, "GET", "/block", "held", "")
		waitFor(t, "A's slot is busy", func() bool { return p.apps.inApp.Load() == 1 })
		var clients time.Duration
		for i := range moved {
			sent := time.Now()
			r := send(p.a.url, "GET", fmt.Sprintf("/moved?sleep=%s", sleep), fmt.Sprint("m", i), "")
			clients += time.Since(sent)
			require.NoError(t, r.err)
			require.Equal(t, http.StatusOK, r.code)
			require.Equal(t, "B", r.by, "relayed from the front")
		}
		p.apps.unblock()
		require.Equal(t, http.StatusOK, (<-blocked).code)
		clients += time.Since(start) // at least the held request's round trip
		waitFor(t, "A recorded all six", func() bool { return snapshot(t, p.a).Completions == moved+1 })

		s := snapshot(t, p.a)
		require.EqualValues(t, moved, s.Pool.OverflowAccepted)
		require.EqualValues(t, moved+1, s.Latency.Total(), "the relayed requests are observed")
		require.EqualValues(t, 1, s.Service.Total(), "only the held request was served here")
		lo, hi := bucketRange(s.Latency)
		require.GreaterOrEqual(t, s.LatencySecondsSum, lo, "within the histogram's buckets")
		require.LessOrEqual(t, s.LatencySecondsSum, hi)
		require.LessOrEqual(t, s.LatencySecondsSum, clients.Seconds(), "within what the clients measured")
		require.GreaterOrEqual(t, s.LatencySecondsSum-s.ServiceSecondsSum-s.QueueWaitSecondsSum, moved*sleep.Seconds(),
			"the relayed requests' latency, which service plus queue wait leaves out")

		// B served the five, and observed none of their latencies: their clients
		// were A's, and A observed them.
		waitForPulls(t, p.b, moved)
		sb := snapshot(t, p.b)
		require.EqualValues(t, moved, sb.Pool.Pulled)
		require.EqualValues(t, moved, sb.Service.Total())
		require.GreaterOrEqual(t, sb.ServiceSecondsSum, moved*sleep.Seconds())
		require.Zero(t, sb.Latency.Total(), "a pulled request's latency is its sender's")
		require.Zero(t, sb.LatencySecondsSum)
		require.Zero(t, sb.Codes[1], "and its status")
		require.EqualValues(t, moved+1, s.Codes[1], "A counts its clients' six answers")

		families := scrapeMetrics(t, p.a.admin)
		h := families["qas_proxy_latency_seconds"].Metric[0].GetHistogram()
		require.Equal(t, s.Latency.Total(), h.GetSampleCount())
		require.Equal(t, s.LatencySecondsSum, h.GetSampleSum(), "no request since the snapshot: the same sum")
		require.GreaterOrEqual(t, h.GetSampleSum(), lo)
	})
}

// bucketRange returns the least and the greatest sum the observations h counts can
// have: each is in (Bounds[i-1], Bounds[i]], the last bucket unbounded.
func bucketRange(h stats.Histogram) (lo, hi float64) {
	for i, c := range h.Counts {
		if i > 0 {
			lo += float64(c) * h.Bounds[i-1]
		}
		if i < len(h.Bounds) {
			hi += float64(c) * h.Bounds[i]
		} else if c > 0 {
			hi = math.Inf(1)
		}
	}
	return lo, hi
}
