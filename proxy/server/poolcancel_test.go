package server

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPulledClientCancelCountedOnce: a client of A whose request overflowed to B
// goes away while B's app serves it. A, whose client it was, counts the cancel; B,
// which served it, counts its service and completion but not the cancel (its relay
// of the response breaks only because the sender's client left), so the two
// sidecars' counts merged hold the request's cancel once, and no other failure.
// B's app answers 64 MiB only after the client left, more than the sockets on the
// way buffer, so its response cannot reach a gone client.
func TestPulledClientCancelCountedOnce(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		path := secretFile(t)
		front := startFront(t, path, 5*time.Second)
		held := newApps()
		a := startPooled(t, held.start(t, "A"), 1, path, []string{front.addr}, fast)
		entered, release := make(chan struct{}, 1), make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		t.Cleanup(unblock) // before the app's Close: it waits for the handler
		answered := make(chan error, 1)
		b := startPooled(t, app(t, func(w http.ResponseWriter, r *http.Request) {
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
		}), 1, path, []string{front.addr}, fast)
		waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })

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
		select {
		case <-entered:
		case <-time.After(hangGuard):
			t.Fatal("B's app never got the overflowed request")
		}
		cancel()
		require.ErrorIs(t, <-left, context.Canceled)
		waitFor(t, "A counts its client's cancel", func() bool { return snapshot(t, a).ClientCancels == 1 })

		unblock()
		select {
		case err := <-answered:
			require.Error(t, err, "B's relay of the response broke: its client was gone")
		case <-time.After(hangGuard):
			t.Fatal("B's app never finished writing")
		}
		waitFor(t, "B completes the pulled request", func() bool { return snapshot(t, b).Pool.Pulled == 1 })
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
