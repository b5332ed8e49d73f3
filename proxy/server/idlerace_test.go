package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAppIdleCloseRace: bursts of POSTs against an app that closes connections idle
// for appIdle, each burst starting about when the app closes the previous burst's
// connections. With the proxy's upstream idle timeout below the app's, the proxy
// closes them first and no request meets a connection the app is closing: none fails
// (issue #17, defect 6). The sleeps pace the bursts; nothing is timed.
func TestAppIdleCloseRace(t *testing.T) {
	const appIdle = 150 * time.Millisecond
	bothPaths(t, func(t *testing.T, fast bool) {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}))
		s.Config.IdleTimeout = appIdle
		s.Start()
		t.Cleanup(s.Close)
		p := start(t, s.Listener.Addr().String(), Config{UpstreamIdleTimeout: appIdle / 3}, Options{FastPath: fast})
		var mu sync.Mutex
		var failures []string
		for burst := range 8 {
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := http.Post(p.url+"/pay", "text/plain", strings.NewReader("once"))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("burst %d: %v", burst, err))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			time.Sleep(appIdle)
		}
		require.Empty(t, failures)
	})
}
