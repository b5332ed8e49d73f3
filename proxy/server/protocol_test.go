package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// protocolApp serves the endpoints the protocol cases use.
func protocolApp(t *testing.T, big []byte) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "a")
		http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "b")
		w.Header().Set("X-Sum", "ab")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = w.Write(big)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		// Read whole first: net/http's HTTP/1 server is not full duplex.
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		_, _ = io.WriteString(w, "hinted")
	})
	mux.HandleFunc("/eof", func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the connection closes")
		_ = buf.Flush()
		conn.Close()
	})
	mux.HandleFunc("/proto", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	return app(t, mux.ServeHTTP)
}

// rawExchange writes raw to the proxy and reads n responses from the connection.
func rawExchange(t *testing.T, addr, raw string, n int, method string) []*http.Response {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, raw)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	var out []*http.Response
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
	return out
}

func body(t *testing.T, r *http.Response) string {
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

func TestProtocolCases(t *testing.T) {
	big := make([]byte, 4<<20)
	_, _ = rand.Read(big)
	tests := []struct {
		name string
		// fastReqs is how many requests the fast path serves (with it on), handed
		// how many connections it hands to the general path.
		fastReqs, handed uint64
		run              func(t *testing.T, p *running)
	}{
		{"chunked with trailer", 1, 0, func(t *testing.T, p *running) {
			resp, err := http.Get(p.url + "/chunked")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, "ab", body(t, resp))
			require.Equal(t, "ab", resp.Trailer.Get("X-Sum"))
		}},
		{"large response streamed", 1, 0, func(t *testing.T, p *running) {
			resp, err := http.Get(p.url + "/big")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, big, []byte(body(t, resp)))
		}},
		{"large request body", 1, 0, func(t *testing.T, p *running) {
			resp, err := http.Post(p.url+"/echo", "application/octet-stream", bytes.NewReader(big))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, big, []byte(body(t, resp)))
		}},
		{"chunked request body", 0, 1, func(t *testing.T, p *running) {
			resp, err := http.Post(p.url+"/echo", "text/plain", io.MultiReader(strings.NewReader("streamed "), strings.NewReader("body")))
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, "streamed body", body(t, resp))
		}},
		{"HEAD", 1, 0, func(t *testing.T, p *running) {
			resp := rawExchange(t, p.srv.Addr(), "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n", 1, "HEAD")[0]
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, int64(len(big)), resp.ContentLength)
			require.Empty(t, body(t, resp))
		}},
		{"204", 1, 0, func(t *testing.T, p *running) {
			resp, err := http.Get(p.url + "/nocontent")
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusNoContent, resp.StatusCode)
		}},
		{"103 early hints then 200", 1, 0, func(t *testing.T, p *running) {
			conn, err := net.Dial("tcp", p.srv.Addr())
			require.NoError(t, err)
			defer conn.Close()
			_, err = io.WriteString(conn, "GET /hints HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			br := bufio.NewReader(conn)
			hint, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusEarlyHints, hint.StatusCode)
			require.Equal(t, "</style.css>; rel=preload", hint.Header.Get("Link"))
			final, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.Equal(t, 200, final.StatusCode)
			require.Equal(t, "hinted", body(t, final))
		}},
		{"response delimited by close", 1, 0, func(t *testing.T, p *running) {
			resp, err := http.Get(p.url + "/eof")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, "until the connection closes", body(t, resp))
		}},
		{"pipelined requests", 2, 0, func(t *testing.T, p *running) {
			rs := rawExchange(t, p.srv.Addr(), "GET /proto HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nping", 2, "GET")
			require.Equal(t, "HTTP/1.1", body(t, rs[0]))
			require.Equal(t, "ping", body(t, rs[1]))
		}},
		{"client asks to close", 1, 0, func(t *testing.T, p *running) {
			resp := rawExchange(t, p.srv.Addr(), "GET /proto HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1, "GET")[0]
			require.True(t, resp.Close, "the response says Connection: close")
		}},
		{"expect 100-continue", 0, 1, func(t *testing.T, p *running) {
			conn, err := net.Dial("tcp", p.srv.Addr())
			require.NoError(t, err)
			defer conn.Close()
			_, err = io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
			require.NoError(t, err)
			br := bufio.NewReader(conn)
			cont, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusContinue, cont.StatusCode)
			_, err = io.WriteString(conn, "pong")
			require.NoError(t, err)
			// The app's own 100 Continue may be relayed as well.
			final, err := http.ReadResponse(br, nil)
			for err == nil && final.StatusCode == http.StatusContinue {
				final, err = http.ReadResponse(br, nil)
			}
			require.NoError(t, err)
			require.Equal(t, "pong", body(t, final))
		}},
		{"HTTP/1.0", 0, 1, func(t *testing.T, p *running) {
			resp := rawExchange(t, p.srv.Addr(), "GET /proto HTTP/1.0\r\n\r\n", 1, "GET")[0]
			require.Equal(t, "HTTP/1.1", body(t, resp), "the app gets HTTP/1.1 from the pool")
		}},
	}
	bothPaths(t, func(t *testing.T, fast bool) {
		up := protocolApp(t, big)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := start(t, up, Config{}, Options{FastPath: fast})
				tt.run(t, p)
				requireServedBy(t, p, tt.fastReqs, tt.handed)
				s := snapshot(t, p)
				require.Equal(t, s.Arrivals, s.Completions)
				require.Zero(t, s.UpstreamErrors+s.ClientCancels)
			})
		}
	})
}

// TestAppClosesIdleConnections: an app that closes every connection after one
// response (without saying so) must not make pooled requests fail. GETs are resent on
// a new connection by both paths. A request with a body cannot be resent: the fast
// path checks a pooled connection is still open before using it for one; net/http's
// Transport notices the close only asynchronously, so on the general path that case
// races and is not asserted.
func TestAppClosesIdleConnections(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		closed := make(chan struct{}, 1)
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err == nil {
					_, _ = io.Copy(io.Discard, req.Body)
					_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
				conn.Close()
				closed <- struct{}{}
			}
		}()
		t.Cleanup(func() { l.Close() })
		p := start(t, l.Addr().String(), Config{}, Options{FastPath: fast})
		for i := 0; i < 6; i++ {
			var resp *http.Response
			if i%2 == 0 || !fast {
				resp, err = http.Get(p.url + "/")
			} else {
				resp, err = http.Post(p.url+"/", "text/plain", strings.NewReader("body"))
			}
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, "request %d", i)
			require.Equal(t, "ok", body(t, resp))
			resp.Body.Close()
			<-closed
		}
		require.Zero(t, snapshot(t, p).UpstreamErrors)
	})
}

// TestQueuedClientLeaves: a client that leaves while its request waits for a slot is
// taken out of the queue, counted as rejected, and never reaches the app.
func TestQueuedClientLeaves(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up, inApp, release := gatedApp(t, app)
		p := start(t, up, Config{ConcurrencyLimit: 1, QueueLimit: 1}, Options{FastPath: fast})
		first := make(chan error, 1)
		go func() {
			resp, err := http.Get(p.url + "/")
			if err == nil {
				resp.Body.Close()
			}
			first <- err
		}()
		require.Eventually(t, func() bool { return inApp.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		second := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
			_, err := http.DefaultClient.Do(req)
			second <- err
		}()
		require.Eventually(t, func() bool { return snapshot(t, p).Waiting == 1 }, 10*time.Second, 5*time.Millisecond)
		cancel()
		require.Error(t, <-second)
		require.Eventually(t, func() bool {
			s := snapshot(t, p)
			return s.Rejected == 1 && s.Waiting == 0
		}, 10*time.Second, 5*time.Millisecond)
		close(release)
		require.NoError(t, <-first)
		require.Equal(t, int32(1), inApp.Load(), "the request that left never reached the app")
		s := snapshot(t, p)
		require.Equal(t, s.Arrivals, s.Completions)
	})
}

// TestAppRestartLeavesNoDeadPool: when the app restarts, every pooled connection is
// dead; requests after it must still succeed.
func TestAppRestartLeavesNoDeadPool(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		release := make(chan struct{})
		var entered sync.WaitGroup
		handler := func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				entered.Done()
				<-release
			}
			_, _ = io.WriteString(w, "ok")
		}
		first := &http.Server{Handler: http.HandlerFunc(handler)}
		go func() { _ = first.Serve(l) }()
		p := start(t, addr, Config{}, Options{FastPath: fast})
		// Four requests at once leave four connections in the proxy's pool.
		const n = 4
		entered.Add(n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(p.url + "/hold")
				if err == nil {
					resp.Body.Close()
				}
			}()
		}
		entered.Wait()
		close(release)
		wg.Wait()
		require.NoError(t, first.Close()) // the app stops, closing every connection
		l2, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		second := &http.Server{Handler: http.HandlerFunc(handler)}
		go func() { _ = second.Serve(l2) }()
		t.Cleanup(func() { second.Close() })
		for i := 0; i < n+2; i++ {
			resp, err := http.Get(p.url + "/")
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode, "request %d after the restart", i)
			require.Equal(t, "ok", body(t, resp))
			resp.Body.Close()
		}
	})
}

// TestTruncatedUpstreamBodyIsRecorded: an app that breaks off its response body
// leaves the client with a cut connection, and the request is still recorded as an
// upstream error, not left in flight.
func TestTruncatedUpstreamBodyIsRecorded(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
			_ = buf.Flush()
			conn.Close()
		})
		p := start(t, up, Config{}, Options{FastPath: fast})
		resp, err := http.Get(p.url + "/")
		if err == nil { // the head may have reached the client, or not (general path)
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		require.Error(t, err, "the client sees the response cut short")
		require.Eventually(t, func() bool {
			s := snapshot(t, p)
			return s.Completions == 1 && s.InFlight == 0
		}, 10*time.Second, 10*time.Millisecond)
		s := snapshot(t, p)
		require.Equal(t, uint64(1), s.UpstreamErrors)
		require.Equal(t, uint64(1), s.Codes[1], "recorded with the status the app sent")
	})
}
