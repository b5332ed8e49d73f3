package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDrainLeavesNoKeepAliveRace: clients that keep sending POSTs on keep-alive
// connections through the whole drain and past it never have a request fail on a
// connection they reused: from the drain's start every response says Connection:
// close, so when the listener closes nobody is on a keep-alive connection (issue #17,
// defect 9). Requests on new connections after the listener closed are refused at
// connect, which a client or balancer can safely send elsewhere. One race is HTTP/1.1's
// own and is excused: a connection whose last response went out keep-alive before the
// drain began and whose client then sent nothing for the whole drain is closed when the
// drain ends, and a request its client writes at that moment meets the close (no
// server can tell it is coming; on a loaded machine a client goroutine can stall that
// long). Every other failure on a reused connection fails the test, among them the
// fast path's race at the drain's start (fixed 2026-11-26): a response whose head said
// keep-alive just before the drain began had its connection closed after it, and the
// client's next request, written at once, was reset (under load, 6 of 45 runs); that
// request is now served, and its response closes the connection. A failure says how
// long the client had been idle and whether its last response kept the connection.
func TestDrainLeavesNoKeepAliveRace(t *testing.T) {
	const drainPeriod = 300 * time.Millisecond
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		})
		p := start(t, up, Config{}, Options{FastPath: fast, DrainPeriod: drainPeriod, ShutdownTimeout: 5 * time.Second})
		var stop atomic.Bool
		var ok, closing, excused atomic.Int64
		var drainStart atomic.Int64 // UnixNano; 0 before the drain
		var mu sync.Mutex
		var failures []string
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: hangGuard}
				defer client.CloseIdleConnections()
				var lastResponse time.Time
				var lastKeptAlive bool // the last response left the connection open
				for !stop.Load() {
					var reused bool
					sent := time.Now()
					trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
					req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, p.url+"/", strings.NewReader("charge"))
					resp, err := client.Do(req)
					if err != nil {
						if reused && idleThroughDrain(lastResponse, sent, drainStart.Load(), drainPeriod) {
							excused.Add(1)
							continue
						}
						if reused {
							mu.Lock()
							failures = append(failures, fmt.Sprintf("%v (idle %s, kept alive %v, sent %s after the drain began, last %s)", err, sent.Sub(lastResponse), lastKeptAlive, sent.Sub(time.Unix(0, drainStart.Load())), lastResponse.Sub(time.Unix(0, drainStart.Load()))))
							mu.Unlock()
						}
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					lastResponse, lastKeptAlive = time.Now(), !resp.Close
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
					if resp.Close {
						closing.Add(1)
					}
				}
			}()
		}
		require.Eventually(t, func() bool { return ok.Load() > 100 }, hangGuard, time.Millisecond)
		drainStart.Store(time.Now().UnixNano())
		p.cancel()
		select {
		case err := <-p.done:
			require.NoError(t, err)
			p.done <- nil // for Cleanup
		case <-time.After(hangGuard):
			t.Fatal("the proxy did not stop")
		}
		stop.Store(true)
		wg.Wait()
		require.Empty(t, failures, "requests failed on reused connections (%d ok, %d excused: idle through the whole drain)", ok.Load(), excused.Load())
		require.LessOrEqual(t, excused.Load(), int64(8), "at most one excused failure per client: its next request is on a new connection")
		require.NotZero(t, closing.Load(), "responses during the drain say Connection: close")
		s := p.srv.Recorder.Snapshot()
		require.Equal(t, s.Arrivals, s.Completions)
	})
}

// idleThroughDrain reports whether a request sent at sent on a connection whose last
// response came at last met HTTP/1.1's idle-close race at the drain's end: the response
// went out before the drain began (drainStart, UnixNano; 0: not yet) and the client sent
// nothing for at least the whole drain period.
func idleThroughDrain(last, sent time.Time, drainStart int64, period time.Duration) bool {
	return drainStart != 0 && !last.IsZero() && last.UnixNano() < drainStart && sent.Sub(last) >= period
}
