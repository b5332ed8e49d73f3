package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/pool"
)

// queueBehindChunked fills sidecar r's only slot with a blocked request and queues,
// behind a chunked request (which may never move, so it waits here first), the
// requests of ids locally: none is offered to a front at admission, since one
// waits already. It returns the blocked request's reply and the chunked request's
// connection.
func queueBehindChunked(t *testing.T, r *running, as *apps, held string, ids ...string) (<-chan reply, <-chan *rawConn, []<-chan reply) {
	t.Helper()
	before := as.inApp.Load()
	blocked := sendAsync(r.url, "GET", "/block-"+held, "held-"+held, "")
	waitFor(t, "the slot is busy", func() bool { return as.inApp.Load() == before+1 })
	rc := dialRaw(t, r.srv.Addr())
	chunked := make(chan *rawConn, 1)
	go func() {
		rc.send("POST /chunked HTTP/1.1\r\nHost: x\r\nX-Id: chunked-" + held + "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		chunked <- rc
	}()
	waitFor(t, "the chunked request waits", func() bool { return snapshot(t, r).Waiting == 1 })
	var queued []<-chan reply
	for i, id := range ids {
		queued = append(queued, sendAsync(r.url, "POST", "/"+id, id, "body of "+id))
		waitFor(t, "queued locally", func() bool { return snapshot(t, r).Waiting == int64(i+2) })
	}
	return blocked, chunked, queued
}

// TestDrainPushesTheLocalQueue: when a pooled sidecar drains, the requests waiting in
// its local queue, which its app has not seen, are offered to the front and served
// by another pod's app, exactly once; its app never sees them. A request that may
// not move (chunked) stays and is served by the draining pod, as is the one its
// app holds.
func TestDrainPushesTheLocalQueue(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		p := newPair(t, fast, 5*time.Second)
		t.Cleanup(p.apps.unblock) // first, if the test fails: the drain waits for B's app
		blocked, chunked, queued := queueBehindChunked(t, p.b, p.apps, "b", "q1", "q2")
		require.Zero(t, frontStats(t, p.front).Accepted, "nothing was offered at admission")

		p.b.cancel() // SIGTERM
		for i, ch := range queued {
			r := <-ch
			require.NoError(t, r.err)
			require.Equal(t, 200, r.code)
			require.Equal(t, "A", r.by, "served by the pod that stays")
			require.Equal(t, fmt.Sprintf("A:/q%d:body of q%d", i+1, i+1), r.body)
		}
		p.apps.unblock()
		require.Equal(t, "B", (<-blocked).by)
		rc := <-chunked
		resp, body, err := rc.response("POST")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "B:/chunked:hello", body)

		require.Equal(t, map[string][]string{"held-b": {"B"}, "chunked-b": {"B"}, "q1": {"A"}, "q2": {"A"}}, p.apps.byID(),
			"each request reached exactly one app, once; the draining pod's app saw none of its queue")
		for _, s := range p.apps.requests() {
			if s.id == "q2" {
				require.Equal(t, "body of q2", s.body)
				require.Equal(t, "127.0.0.1", s.header.Get("X-Forwarded-For"))
				for name := range s.header {
					require.False(t, strings.HasPrefix(name, "Qas-"), "the app sees no pooling field: %s", name)
				}
			}
		}
		// B's admin port closes as it drains: its recorder is read directly.
		sb := p.b.srv.Recorder.Snapshot()
		require.Equal(t, uint64(2), sb.Pool.DrainPushed)
		require.Zero(t, sb.Pool.DrainKept)
		require.Equal(t, uint64(2), sb.Pool.OverflowAccepted)
		require.Equal(t, uint64(4), sb.Arrivals)
		require.Zero(t, sb.Waiting)
		waitForPulls(t, p.a, 2)
		f := frontStats(t, p.front)
		require.Equal(t, uint64(2), f.Accepted)
		require.Equal(t, uint64(2), f.Dispatched)
	})
}

// TestDrainWithTheFrontUnavailable: a draining sidecar whose front refuses (it is
// draining too) or is gone (killed) serves its local queue itself: no request is
// lost, each reaches its app exactly once.
func TestDrainWithTheFrontUnavailable(t *testing.T) {
	for _, tt := range []struct {
		name string
		down func(f *runningFront)
	}{
		{"front refuses", func(f *runningFront) { f.srv.front.StartDrain() }},
		{"front killed", func(f *runningFront) { f.kill() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bothPaths(t, func(t *testing.T, fast bool) {
				p := newPair(t, fast, 5*time.Second)
				t.Cleanup(p.apps.unblock)
				blocked, chunked, queued := queueBehindChunked(t, p.b, p.apps, "b", "q1", "q2")
				tt.down(p.front)
				p.b.cancel()
				// The offers fail (or, once the replica is suspect, are not made)
				// and the requests take their places again.
				waitFor(t, "back in the local queue", func() bool { return p.b.srv.Recorder.Snapshot().Pool.DrainKept == 2 })
				p.apps.unblock()
				for i, ch := range queued {
					r := <-ch
					require.NoError(t, r.err)
					require.Equal(t, 200, r.code)
					require.Equal(t, "B", r.by)
					require.Equal(t, fmt.Sprintf("B:/q%d:body of q%d", i+1, i+1), r.body, "the body reached the app whole")
				}
				require.Equal(t, "B", (<-blocked).by)
				resp, _, err := (<-chunked).response("POST")
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, map[string][]string{"held-b": {"B"}, "chunked-b": {"B"}, "q1": {"B"}, "q2": {"B"}}, p.apps.byID())
				sb := p.b.srv.Recorder.Snapshot()
				require.Zero(t, sb.Pool.OverflowAccepted)
				require.Zero(t, sb.Pool.DrainPushed)
				require.Equal(t, uint64(2), sb.Pool.DrainKept)
				require.Equal(t, uint64(3), sb.Queued, "each queued request's wait is counted once")
			})
		})
	}
}

// TestExpiredAtTheFrontIsServedHere: a request the front accepted and then expired
// (no pod pulled it within the front's max wait: its 503 says no app saw it) is
// served by its sender's own app when the sender can send it again byte for byte:
// bodiless, or with a body within the kept bound. A body beyond the bound was not
// kept: the front's 503 is relayed, and no app sees that request at all.
func TestExpiredAtTheFrontIsServedHere(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		path := secretFile(t)
		as := newApps()
		front := startFront(t, path, 200*time.Millisecond)
		s := startPooled(t, as.start(t, "A"), 1, path, []string{front.addr}, fast)
		t.Cleanup(as.unblock)
		blocked := sendAsync(s.url, "GET", "/block", "held", "")
		waitFor(t, "busy", func() bool { return as.inApp.Load() == 1 })
		// Nobody pulls (the only pod is busy): each overflows and expires.
		bodiless := sendAsync(s.url, "GET", "/bodiless?x=1", "bodiless", "")
		kept := sendAsync(s.url, "POST", "/kept", "kept", "a body within the bound")
		big := strings.Repeat("b", DefaultKeepMaxBody+1)
		relayed := sendAsync(s.url, "POST", "/big", "big", big)
		waitFor(t, "the front expired all three", func() bool { return frontStats(t, front).Expired == 3 })

		r := <-relayed
		require.NoError(t, r.err)
		require.Equal(t, http.StatusServiceUnavailable, r.code)
		require.Equal(t, "1", r.retry)
		require.Empty(t, r.header.Values(pool.HeaderExpired), "the front's mark stays between it and the sidecar")

		waitFor(t, "the other two wait in the local queue", func() bool { return snapshot(t, s).Waiting == 2 })
		as.unblock()
		for ch, want := range map[<-chan reply]string{bodiless: "A:/bodiless:", kept: "A:/kept:a body within the bound"} {
			r := <-ch
			require.NoError(t, r.err)
			require.Equal(t, 200, r.code)
			require.Equal(t, want, r.body)
		}
		require.Equal(t, "A", (<-blocked).by)
		require.Equal(t, map[string][]string{"held": {"A"}, "bodiless": {"A"}, "kept": {"A"}}, as.byID(),
			"served once each; the relayed one by no app")
		for _, got := range as.requests() {
			if got.id == "kept" {
				require.Equal(t, "POST", got.method)
				require.Equal(t, "a body within the bound", got.body)
				require.Equal(t, []string{"127.0.0.1"}, got.header.Values("X-Forwarded-For"))
				for name := range got.header {
					require.False(t, strings.HasPrefix(name, "Qas-"), "the app sees no pooling field: %s", name)
				}
			}
		}
		sp := snapshot(t, s)
		require.Equal(t, uint64(3), sp.Pool.OverflowAccepted)
		require.Equal(t, uint64(2), sp.Pool.ExpiredRequeued)
		require.Equal(t, uint64(1), sp.Pool.ExpiredRelayed)
		require.Equal(t, uint64(4), sp.Arrivals)
		require.Equal(t, uint64(4), sp.Completions)
		require.Equal(t, uint64(1), sp.Codes[4], "one 503")
		require.Zero(t, s.srv.proxy.keptBytes.Load(), "the kept bodies' budget is given back")
	})
}

// TestKeptBodiesBounded: a body is kept only within the per-request bound and while
// the budget has room; released bytes make room again; a negative bound keeps none.
func TestKeptBodiesBounded(t *testing.T) {
	p := &Proxy{keepMax: 10, keepBudget: 15}
	require.True(t, p.reserveKept(10))
	require.False(t, p.reserveKept(10), "the budget has 5 bytes left")
	require.True(t, p.reserveKept(5))
	require.False(t, p.reserveKept(11), "over the per-request bound")
	p.keptBytes.Add(-10)
	require.True(t, p.reserveKept(10), "room again")
	require.Equal(t, int64(15), p.keptBytes.Load())
	none := &Proxy{keepMax: -1, keepBudget: 15}
	require.False(t, none.reserveKept(1))
}

// TestDrainPushedAndGivenBack: a request a draining pod pushed to the front that no
// pod takes in time (the other pod is busy) comes back unseen and is served by the
// draining pod itself, exactly once.
func TestDrainPushedAndGivenBack(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		p := newPair(t, fast, 300*time.Millisecond)
		t.Cleanup(p.apps.unblock)
		busyA := sendAsync(p.a.url, "GET", "/block-a", "held-a", "")
		waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
		blocked, chunked, queued := queueBehindChunked(t, p.b, p.apps, "b", "q1", "q2")
		p.b.cancel()
		waitFor(t, "pushed, expired and back", func() bool { return p.b.srv.Recorder.Snapshot().Pool.DrainKept == 2 })
		p.apps.unblock()
		for i, ch := range queued {
			r := <-ch
			require.NoError(t, r.err)
			require.Equal(t, 200, r.code)
			require.Equal(t, fmt.Sprintf("B:/q%d:body of q%d", i+1, i+1), r.body)
		}
		require.Equal(t, "A", (<-busyA).by)
		require.Equal(t, "B", (<-blocked).by)
		resp, _, err := (<-chunked).response("POST")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, map[string][]string{"held-a": {"A"}, "held-b": {"B"}, "chunked-b": {"B"}, "q1": {"B"}, "q2": {"B"}}, p.apps.byID())
		sb := p.b.srv.Recorder.Snapshot()
		require.Equal(t, uint64(2), sb.Pool.OverflowAccepted)
		require.Equal(t, uint64(2), sb.Pool.ExpiredRequeued)
		require.Zero(t, sb.Pool.DrainPushed)
		require.NoError(t, sb.Validate())
		require.Equal(t, uint64(2), frontStats(t, p.front).Expired)
	})
}
