package server

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppGoneAnswers502AtOnce: when the app has crashed, a request that meets a dead
// pooled connection gets a 502 at once, and the client's connection stays in step for
// its next request (issue #17, defect 2: the retry's failed dial discarded the head a
// second time and blocked reading the client).
func TestAppGoneAnswers502AtOnce(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		p := start(t, a.addr, Config{}, Options{FastPath: fast})
		c := dialRaw(t, p.srv.Addr())
		c.send("GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body, err := c.response("GET")
		require.NoError(t, err)
		require.Equal(t, "seen GET /warm", body, "the pool now holds a connection to the app")
		a.crash()
		for i := range 2 {
			c.send("GET /after-crash HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, _, err := c.response("GET")
			require.NoError(t, err, "request %d after the crash", i)
			require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		}
	})
}

// TestNonIdempotentRequestNeverReplayed: a bodiless POST whose reused connection the
// app closes after reading it is not sent again (the app may have acted on it); the
// client gets a 502 and the app reads the POST once. A GET in the same case is resent
// (RFC 9110 §9.2.2), as net/http's Transport does (issue #17, defect 4).
func TestNonIdempotentRequestNeverReplayed(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		var calls atomic.Int32
		a.handle = func(nc net.Conn, req *http.Request, _ string) bool {
			if req.URL.Path == "/close-once" {
				if calls.Add(1)%2 == 1 {
					return false // read, then the connection dies without an answer
				}
			}
			_, err := nc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			return err == nil
		}
		p := start(t, a.addr, Config{}, Options{FastPath: fast})
		c := dialRaw(t, p.srv.Addr())
		exchange := func(method string) *http.Response {
			c.send("GET /warm HTTP/1.1\r\nHost: x\r\n\r\n")
			_, _, err := c.response("GET")
			require.NoError(t, err)
			c.send(method + " /close-once HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, _, err := c.response(method)
			require.NoError(t, err)
			return resp
		}
		for _, method := range []string{"POST", "PATCH", "DELETE"} {
			calls.Store(0)
			require.Equal(t, http.StatusBadGateway, exchange(method).StatusCode, method)
		}
		calls.Store(0)
		require.Equal(t, http.StatusOK, exchange("GET").StatusCode, "a GET is resent on a new connection")
		var got []string
		for _, r := range a.settled(t, p) {
			if r.target == "/close-once" {
				got = append(got, r.method)
			}
		}
		require.Equal(t, []string{"POST", "PATCH", "DELETE", "GET", "GET"}, got, "each non-idempotent request reached the app once")
	})
}

// TestIdleAppBytesNeverReachAnotherClient: bytes the app sends on an idle pooled
// connection (a 408 on idle, a late body) are never read as the response to the next
// request, whoever sends it (issue #17, defect 3: only requests with a body checked a
// reused connection). Several pooled connections have such bytes, so a request meets
// one after another; nothing is ever sent on them, and each request, idempotent or
// not, reaches the app once, on a connection that was quiet.
func TestIdleAppBytesNeverReachAnotherClient(t *testing.T) {
	const stale = 3
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		var arrived, staleSent sync.WaitGroup
		arrived.Add(stale)
		staleSent.Add(stale)
		sendStale := make(chan struct{})
		a.handle = func(nc net.Conn, req *http.Request, _ string) bool {
			first := strings.HasPrefix(req.URL.Path, "/first")
			if first {
				// Every /first is answered once all have arrived: each has a
				// connection of its own.
				arrived.Done()
				arrived.Wait()
			}
			msg := "seen " + req.URL.Path
			if _, err := nc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: " + itoa(len(msg)) + "\r\n\r\n" + msg)); err != nil {
				return false
			}
			if first {
				// Once the proxy has pooled the connection: bytes nobody asked for.
				<-sendStale
				_, err := nc.Write([]byte("HTTP/1.1 408 Request Timeout\r\nContent-Length: 7\r\n\r\nstale!!"))
				staleSent.Done()
				return err == nil
			}
			return true
		}
		p := start(t, a.addr, Config{}, Options{FastPath: fast})
		var wg sync.WaitGroup
		for i := range stale {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := dialRaw(t, p.srv.Addr())
				path := "/first" + itoa(i)
				first.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
				_, body, err := first.response("GET")
				if err != nil || body != "seen "+path {
					t.Errorf("%s: %q, %v", path, body, err)
				}
			}()
		}
		wg.Wait()
		close(sendStale)
		staleSent.Wait()
		for _, method := range []string{"POST", "GET"} {
			other := dialRaw(t, p.srv.Addr())
			other.send(method + " /second HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
			resp, body, err := other.response(method)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, method)
			require.Equal(t, "seen /second", body, method)
		}
		staleConns := map[int]bool{}
		var seconds []string
		for _, r := range a.settled(t, p) {
			if strings.HasPrefix(r.target, "/first") {
				staleConns[r.conn] = true
			}
		}
		require.Len(t, staleConns, stale, "each /first had a connection of its own")
		for _, r := range a.requests() {
			if r.target == "/second" {
				require.False(t, staleConns[r.conn], "a request was sent on a connection with stray bytes")
				seconds = append(seconds, r.method)
			}
		}
		require.Equal(t, []string{"POST", "GET"}, seconds, "each request reached the app once")
	})
}
