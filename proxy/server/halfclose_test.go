package server

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHalfClosedClientGetsNoInventedResponse: a client that half-closes its connection
// while its request is with the app, or queued for a slot, has the request cancelled
// and gets no response at all, never a 200 for a request the app did not answer
// (issue #17, defect 7).
func TestHalfClosedClientGetsNoInventedResponse(t *testing.T) {
	for _, queued := range []bool{false, true} {
		name := map[bool]string{false: "in the app", true: "queued"}[queued]
		t.Run(name, func(t *testing.T) {
			bothPaths(t, func(t *testing.T, fast bool) {
				up, inApp, release := gatedApp(t, app)
				defer close(release)
				cfg := Config{}
				if queued {
					cfg = Config{ConcurrencyLimit: 1, QueueLimit: 4}
				}
				p := start(t, up, cfg, Options{FastPath: fast})
				if queued {
					holder := dialRaw(t, p.srv.Addr())
					holder.send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
					require.Eventually(t, func() bool { return inApp.Load() == 1 }, hangGuard, time.Millisecond)
				}
				c := dialRaw(t, p.srv.Addr())
				c.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
				if queued {
					require.Eventually(t, func() bool { return snapshot(t, p).Waiting == 1 }, hangGuard, time.Millisecond)
				} else {
					require.Eventually(t, func() bool { return inApp.Load() == 1 }, hangGuard, time.Millisecond)
				}
				require.NoError(t, c.nc.(*net.TCPConn).CloseWrite())
				resp, _, err := c.response("GET")
				require.Error(t, err, "no response, got %v", resp)
			})
		})
	}
}
