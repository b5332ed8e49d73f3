package server

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/stats"
)

// steppedClock is a clock the test sets, with a sleep that returns only when
// the test lets it: each call is announced on asked, and returns after the
// test sends on wake (having set the clock).
type steppedClock struct {
	mu    sync.Mutex
	t     time.Time
	asked chan time.Duration
	wake  chan struct{}
}

func (c *steppedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *steppedClock) sleep(ctx context.Context, d time.Duration) error {
	select {
	case c.asked <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tickAt waits for the per-second loop to sleep, sets the clock to t and wakes
// it, then waits for it to sleep again: the second that ended is recorded.
func (c *steppedClock) tickAt(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-c.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the per-second loop did not sleep")
	}
	c.mu.Lock()
	c.t = at
	c.mu.Unlock()
	c.wake <- struct{}{}
}

// TestStatsArrivalsPerSecondAddUpToTheRequestsSent runs a real proxy on
// loopback whose clock and per-second wakes the test steps: the /stats series
// holds, second by second, the requests sent in that second.
func TestStatsArrivalsPerSecondAddUpToTheRequestsSent(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {})
		// The fast path dates its connections' header deadlines by the recorder's
		// clock, so the stepped clock stays within seconds of the real one, and the
		// header timeout is far longer than that.
		base := time.Now().Unix()
		clock := &steppedClock{t: time.Unix(base, 400e6), asked: make(chan time.Duration), wake: make(chan struct{})}
		srv, err := Listen(Config{Upstream: up}, Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
			ReadHeaderTimeout: time.Minute, FastPath: fast, Sleep: clock.sleep},
			measure.New(clock.now, 0, 0), zaptest.NewLogger(t))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		stopped := false
		stop := func() {
			if !stopped {
				stopped = true
				cancel()
				require.NoError(t, <-done)
			}
		}
		t.Cleanup(stop)
		p := &running{srv: srv, url: "http://" + srv.Addr(), admin: "http://" + srv.AdminAddr()}

		send := func(n int) {
			for range n {
				resp, err := http.Get(p.url + "/")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
		}
		send(2) // in the second the proxy started in: not counted whole
		clock.tickAt(t, time.Unix(base+1, 1e6))
		require.Nil(t, snapshot(t, p).ArrivalsPerSecond, "omitted until a second is counted")
		sent := []int{3, 0, 7, 1}
		for i, n := range sent {
			send(n)
			clock.tickAt(t, time.Unix(base+2+int64(i), 2e6))
		}
		// The loop has recorded the last second once it sleeps again.
		select {
		case <-clock.asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the per-second loop did not sleep")
		}
		snap := snapshot(t, p)
		require.Equal(t, uint64(2+3+0+7+1), snap.Arrivals)
		require.NotNil(t, snap.ArrivalsPerSecond)
		want := make([]int64, measure.PerSecondRing)
		for i := range want {
			want[i] = ratevar.Missing
		}
		copy(want[len(want)-4:], []int64{3, 0, 7, 1})
		// The first wake closed the second the proxy started in, which the counter
		// did not see whole.
		require.Equal(t, &stats.PerSecond{EndUnix: base + 4, Counts: want}, snap.ArrivalsPerSecond)
		var total int64
		for _, c := range snap.ArrivalsPerSecond.Counts {
			total += max(c, 0)
		}
		require.Equal(t, int64(3+0+7+1), total, "every request sent after the first wake is in one second")

		// Shutdown stops the loop: Serve returns although its sleep is never woken.
		go func() {
			for range clock.asked {
			}
		}()
		stop()
	})
}
