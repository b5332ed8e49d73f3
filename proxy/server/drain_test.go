package server

import (
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
// connect, which a client or balancer can safely send elsewhere.
func TestDrainLeavesNoKeepAliveRace(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		})
		p := start(t, up, Config{}, Options{FastPath: fast, DrainPeriod: 300 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
		var stop atomic.Bool
		var ok, closing atomic.Int64
		var mu sync.Mutex
		var failures []string
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: hangGuard}
				defer client.CloseIdleConnections()
				for !stop.Load() {
					var reused bool
					trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
					req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, p.url+"/", strings.NewReader("charge"))
					resp, err := client.Do(req)
					if err != nil {
						if reused {
							mu.Lock()
							failures = append(failures, err.Error())
							mu.Unlock()
						}
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
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
		require.Empty(t, failures, "requests failed on reused connections (%d ok)", ok.Load())
		require.NotZero(t, closing.Load(), "responses during the drain say Connection: close")
		s := p.srv.Recorder.Snapshot()
		require.Equal(t, s.Arrivals, s.Completions)
	})
}
