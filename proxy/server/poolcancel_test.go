package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pulledPair is a front and two pooled sidecars (k = 1): A, whose app holds
// /block-a until held.unblock, and B, whose app is bApp.
func pulledPair(t *testing.T, fast bool, bApp http.HandlerFunc) (held *apps, a, b *running) {
	t.Helper()
	path := secretFile(t)
	front := startFront(t, path, 5*time.Second)
	held = newApps()
	a = startPooled(t, held.start(t, "A"), 1, path, []string{front.addr}, fast)
	b = startPooled(t, app(t, bApp), 1, path, []string{front.addr}, fast)
	waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })
	return held, a, b
}

// waitChan waits for ch, failing the test with what after hangGuard.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatal(what)
	}
	var zero T
	return zero
}

// TestPulledClientCancelCountedOnce: a client of A whose request overflowed to B
// goes away while B's app serves it. A, whose client it was, counts the cancel; B,
// which served it, counts its service and completion but not the cancel (its relay
// of the response breaks only because the sender's client left), so the two
// sidecars' counts merged hold the request's cancel once, and no other failure.
// B's app answers 64 MiB only after the client left, more than the loopback
// sockets on the way buffer, so its response cannot reach a gone client.
func TestPulledClientCancelCountedOnce(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock) // before the app's Close: it waits for the handler
		answered := make(chan error, 1)
		held, a, b := pulledPair(t, fast, func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-release
			chunk := make([]byte, 64<<10)
			for range 1024 {
				if _, err := w.Write(chunk); err != nil {
					answered <- err
					return
				}
			}
			answered <- nil
		})

		blocked := sendAsync(a.url, "GET", "/block-a", "held", "")
		waitFor(t, "A's slot is busy", func() bool { return held.inApp.Load() == 1 })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/moved", nil)
		require.NoError(t, err)
		left := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			left <- err
		}()
		waitChan(t, entered, "B's app never got the overflowed request")
		cancel()
		require.ErrorIs(t, <-left, context.Canceled)
		waitFor(t, "A counts its client's cancel", func() bool { return snapshot(t, a).ClientCancels == 1 })

		unblock()
		require.Error(t, waitChan(t, answered, "B's app never finished writing"), "B's relay of the response broke: its client was gone")
		waitForPulls(t, b, 1) // B completes the pulled request
		held.unblock()
		require.Equal(t, http.StatusOK, (<-blocked).code)
		waitFor(t, "A completes both", func() bool { return snapshot(t, a).Completions == 2 })

		sa, sb := snapshot(t, a), snapshot(t, b)
		require.EqualValues(t, 1, sb.Completions, "B served it")
		require.EqualValues(t, 1, sb.Service.Total())
		require.EqualValues(t, 1, sa.ClientCancels+sb.ClientCancels, "the merged counts hold the cancel once")
		require.EqualValues(t, 1, sa.ClientCancels, "counted by the sender, whose client left")
		require.Zero(t, sa.UpstreamErrors+sb.UpstreamErrors+sa.UpstreamTimeouts+sb.UpstreamTimeouts, "no other failure")
		require.Equal(t, [5]uint64{}, sb.Codes, "B counts no status of a request its sender answers")
		require.EqualValues(t, 2, sa.Latency.Total(), "A observes both its clients' latencies")
		require.Zero(t, sb.Latency.Total())
	})
}

// TestPulledAppBreakCountedOnce: B's app breaks off a pulled request's response
// midway (half of its Content-Length sent). A's client gets a cut-off response, which
// A counts as an upstream failure; B's relay of the response breaks with it, and B
// counts no client cancel for it: no client left. The merged counts hold one
// failure, an upstream error, and no cancel.
func TestPulledAppBreakCountedOnce(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		const size = 1 << 20
		held, a, b := pulledPair(t, fast, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			_, _ = w.Write(make([]byte, size/2))
			panic(http.ErrAbortHandler) // the app breaks the connection
		})

		blocked := sendAsync(a.url, "GET", "/block-a", "held", "")
		waitFor(t, "A's slot is busy", func() bool { return held.inApp.Load() == 1 })
		resp, err := (&http.Client{Timeout: hangGuard}).Get(a.url + "/moved")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees the response cut off (%d of %d bytes)", n, size)
		waitForPulls(t, b, 1) // B completes the pulled request
		held.unblock()
		require.Equal(t, http.StatusOK, (<-blocked).code)
		waitFor(t, "A completes both", func() bool { return snapshot(t, a).Completions == 2 })

		sa, sb := snapshot(t, a), snapshot(t, b)
		require.EqualValues(t, 1, sb.Completions, "B served it")
		require.Zero(t, sa.ClientCancels+sb.ClientCancels, "no client left")
		require.EqualValues(t, 1, sa.UpstreamErrors+sb.UpstreamErrors+sa.UpstreamTimeouts+sb.UpstreamTimeouts, "one failure in the merged counts")
		require.EqualValues(t, 1, sa.UpstreamErrors+sb.UpstreamErrors)
	})
}
