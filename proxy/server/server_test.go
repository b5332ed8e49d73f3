package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"golang.org/x/net/http2"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/stats"
)

type running struct {
	srv    *Server
	url    string
	admin  string
	cancel context.CancelFunc
	done   chan error
}

// start runs a proxy in front of upstream (host:port) on free loopback ports.
func start(t *testing.T, upstream string, cfg Config, opts Options) *running {
	t.Helper()
	cfg.Upstream = upstream
	opts.Listen, opts.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	if opts.ReadHeaderTimeout == 0 {
		opts.ReadHeaderTimeout = 2 * time.Second
	}
	srv, err := Listen(cfg, opts, measure.New(time.Now, cfg.ConcurrencyLimit, cfg.QueueLimit), zaptest.NewLogger(t))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, url: "http://" + srv.Addr(), admin: "http://" + srv.AdminAddr(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done //nolint:errcheck // nil or the cancellation: either way the test server has stopped
	})
	return r
}

// bothPaths runs f on the general path and on the fast path.
func bothPaths(t *testing.T, f func(t *testing.T, fast bool)) {
	for _, p := range []struct {
		name string
		fast bool
	}{{"general", false}, {"fast", true}} {
		t.Run(p.name, func(t *testing.T) { f(t, p.fast) })
	}
}

// requireServedBy checks which path served: with the fast path on, fastReqs requests
// on it and handed connections handed to the general path.
func requireServedBy(t *testing.T, r *running, fastReqs, handed uint64) {
	t.Helper()
	if r.srv.fast == nil {
		return
	}
	require.Equal(t, fastReqs, r.srv.fast.Served(), "requests served on the fast path")
	require.Equal(t, handed, r.srv.fast.HandedOver(), "connections handed to the general path")
}

func app(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// gatedApp is an app (made by newApp) whose requests wait until release is closed;
// inApp counts the requests that have reached it.
func gatedApp(t *testing.T, newApp func(*testing.T, http.HandlerFunc) string) (addr string, inApp *atomic.Int32, release chan struct{}) {
	inApp, release = new(atomic.Int32), make(chan struct{})
	addr = newApp(t, func(w http.ResponseWriter, r *http.Request) {
		inApp.Add(1)
		<-release
	})
	return addr, inApp, release
}

// fillSlotAndQueue sends two requests to a proxy with one slot and one queue
// place in front of a gated app: the first holds the slot (in the app), the
// second waits in the queue. Their status codes (−1: no response) arrive on
// the channel once the gate opens.
func fillSlotAndQueue(t *testing.T, p *running, inApp *atomic.Int32) <-chan int {
	t.Helper()
	codes := make(chan int, 2)
	get := func() {
		resp, err := http.Get(p.url + "/")
		if err != nil {
			codes <- -1
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	go get()
	require.Eventually(t, func() bool { return inApp.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	go get()
	require.Eventually(t, func() bool { return snapshot(t, p).Waiting == 1 }, 10*time.Second, 5*time.Millisecond)
	return codes
}

func snapshot(t *testing.T, r *running) stats.Snapshot {
	resp, err := http.Get(r.admin + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	s, err := stats.Decode(resp.Body)
	require.NoError(t, err)
	return s
}

func TestForwardsAndMeasures(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		var gotHost, gotXFF, gotProto, gotConn string
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			gotHost, gotXFF, gotProto, gotConn = r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Hop")
			time.Sleep(2 * time.Millisecond)
			_, _ = io.WriteString(w, "hello")
		})
		p := start(t, up, Config{}, Options{FastPath: fast})
		for i := 0; i < 20; i++ {
			req, _ := http.NewRequest(http.MethodGet, p.url+"/x", nil)
			req.Host = "shop.example"
			req.Header.Set("Connection", "X-Hop")
			req.Header.Set("X-Hop", "must not pass")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, "hello", string(body))
		}
		require.Equal(t, "shop.example", gotHost, "the app sees the client's Host")
		require.Equal(t, "127.0.0.1", gotXFF)
		require.Equal(t, "http", gotProto)
		require.Empty(t, gotConn, "headers named in Connection are hop-by-hop")
		requireServedBy(t, p, 20, 0)

		s := snapshot(t, p)
		require.Equal(t, uint64(20), s.Arrivals)
		require.Equal(t, uint64(20), s.Completions)
		require.Equal(t, uint64(20), s.Codes[1])
		require.Equal(t, uint64(20), s.Latency.Total())
		require.GreaterOrEqual(t, s.ServiceSecondsSum, 20*0.002, "each request slept 2 ms upstream")
		require.Greater(t, s.TTFBSecondsSum, 0.0)
		require.LessOrEqual(t, s.TTFBSecondsSum, s.ServiceSecondsSum)
		require.InDelta(t, s.ServiceSecondsSum, s.InFlightSeconds, 0.05, "sequential requests: ∫in-flight = Σ service")
	})
}

func TestStreamsWithoutBuffering(t *testing.T) {
	upstreamPaths(t, func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string) {
		release := make(chan struct{})
		up := newApp(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			http.NewResponseController(w).Flush()
			<-release
			fmt.Fprint(w, "data: second\n\n")
		})
		p := start(t, up, cfg, opts)
		resp, err := http.Get(p.url + "/events")
		require.NoError(t, err)
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err, "the first event must arrive while the app still holds the stream open")
		require.Equal(t, "data: first\n", line)
		close(release)
		requireServedBy(t, p, 1, 0)
	})
}

func TestUpgradePassesThrough(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") != "echo" {
				http.Error(w, "want upgrade", 400)
				return
			}
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			_ = buf.Flush()
			line, _ := buf.ReadString('\n')
			_, _ = conn.Write([]byte("echo:" + line))
		})
		p := start(t, up, Config{}, Options{FastPath: fast})
		conn, err := net.Dial("tcp", p.srv.Addr())
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprint(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		_, err = conn.Write([]byte("ping\n"))
		require.NoError(t, err)
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "echo:ping\n", line)
		requireServedBy(t, p, 0, 1)
	})
}

func TestH2C(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "proto="+r.Proto) })
		p := start(t, up, Config{}, Options{FastPath: fast})
		client := &http.Client{Transport: &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}}
		resp, err := client.Get(p.url + "/")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, "HTTP/2.0", resp.Proto, "client to proxy speaks h2c")
		require.Equal(t, "proto=HTTP/1.1", string(body), "proxy to app uses pooled HTTP/1.1")
		requireServedBy(t, p, 0, 1)
	})
}

func TestUpstreamFaults(t *testing.T) {
	upstreamPaths(t, func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string) {
		closed := func() string {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := l.Addr().String()
			l.Close()
			return addr
		}
		slow := newApp(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		})
		tests := []struct {
			name     string
			upstream string
			cfg      Config
			code     int
			check    func(*testing.T, stats.Snapshot)
		}{
			{"app down is 502", closed(), cfg, http.StatusBadGateway, func(t *testing.T, s stats.Snapshot) {
				require.Equal(t, uint64(1), s.UpstreamErrors)
			}},
			{"slow app is 504", slow, Config{UpstreamProtocol: cfg.UpstreamProtocol, UpstreamTimeout: 100 * time.Millisecond}, http.StatusGatewayTimeout, func(t *testing.T, s stats.Snapshot) {
				require.Equal(t, uint64(1), s.UpstreamTimeouts)
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := start(t, tt.upstream, tt.cfg, opts)
				resp, err := http.Get(p.url + "/")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, tt.code, resp.StatusCode)
				s := snapshot(t, p)
				require.Equal(t, uint64(1), s.Codes[4])
				tt.check(t, s)
				// The proxy keeps serving after a failure.
				resp, err = http.Get(p.url + "/")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, uint64(2), snapshot(t, p).Completions)
			})
		}
	})
}

func TestClientCancelReachesApp(t *testing.T) {
	upstreamPaths(t, func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string) {
		arrived, cancelled := make(chan struct{}), make(chan struct{})
		up := newApp(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
			close(cancelled)
		})
		p := start(t, up, cfg, opts)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/", nil)
		go func() {
			<-arrived // the client leaves while the app has its request
			cancel()
		}()
		_, err := http.DefaultClient.Do(req)
		require.Error(t, err)
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the app's request was never cancelled")
		}
		require.Eventually(t, func() bool { return snapshot(t, p).ClientCancels == 1 }, 10*time.Second, 20*time.Millisecond)
	})
}

func rawRequest(t *testing.T, addr, raw string) *http.Response {
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, raw)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	return resp
}

func TestBadClients(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		var hits atomic.Int32
		up := app(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
		p := start(t, up, Config{}, Options{FastPath: fast, MaxHeaderBytes: 4096})
		big := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, rawRequest(t, p.srv.Addr(), big).StatusCode)
		require.Equal(t, http.StatusBadRequest, rawRequest(t, p.srv.Addr(), "GARBAGE\r\n\r\n").StatusCode)
		require.Equal(t, http.StatusBadRequest, rawRequest(t, p.srv.Addr(), "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n").StatusCode)
		require.Zero(t, hits.Load(), "bad requests never reach the app")
		requireServedBy(t, p, 0, 3)
	})
}

func TestSlowHeaderClientIsCutOff(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {})
		p := start(t, up, Config{}, Options{FastPath: fast, ReadHeaderTimeout: 200 * time.Millisecond})
		conn, err := net.Dial("tcp", p.srv.Addr())
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n") // never finishes the headers
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadAll(conn)
		require.NoError(t, err, "the proxy closes the connection (EOF) instead of waiting forever")
	})
}

func TestAdminIsNotOnServingPort(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		var paths []string
		var mu sync.Mutex
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			http.NotFound(w, r)
		})
		p := start(t, up, Config{}, Options{FastPath: fast})
		for _, path := range []string{"/stats", "/metrics", "/healthz", "/readyz"} {
			resp, err := http.Get(p.url + path)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s on the serving port is the app's", path)
		}
		require.Equal(t, []string{"/stats", "/metrics", "/healthz", "/readyz"}, paths)

		families := scrapeMetrics(t, p.admin)
		require.Contains(t, families, "qas_proxy_requests_arrived_total")
		require.Equal(t, 4.0, families["qas_proxy_requests_arrived_total"].Metric[0].GetCounter().GetValue())
		for name := range families {
			require.True(t, strings.HasPrefix(name, "qas_proxy_") || strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_"), name)
		}
		for path, code := range map[string]int{"/healthz": 200, "/readyz": 200} {
			resp, err := http.Get(p.admin + path)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, code, resp.StatusCode, path)
		}
	})
}

func TestConcurrencyLimitQueuesThenRejects(t *testing.T) {
	upstreamPaths(t, func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string) {
		up, inApp, release := gatedApp(t, newApp)
		cfg.ConcurrencyLimit, cfg.QueueLimit = 1, 1
		p := start(t, up, cfg, opts)
		codes := fillSlotAndQueue(t, p, inApp)
		resp, err := http.Get(p.url + "/") // slot and queue are full
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		require.Equal(t, int32(1), inApp.Load(), "never more than k requests in the app")
		close(release)
		require.Equal(t, 200, <-codes)
		require.Equal(t, 200, <-codes)
		s := snapshot(t, p)
		require.Equal(t, uint64(1), s.Rejected)
		require.Equal(t, uint64(1), s.Queued)
		require.Greater(t, s.QueueWaitSecondsSum, 0.0)
		require.Equal(t, uint64(3), s.Completions)
	})
}

// TestDrainUnderLoad stops the proxy while clients keep sending, as a rolling update
// does: clients stop once /readyz fails (as endpoints controllers do), and not one
// request fails.
func TestDrainUnderLoad(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(5 * time.Millisecond)
			_, _ = io.WriteString(w, "ok")
		})
		p := start(t, up, Config{}, Options{FastPath: fast, DrainPeriod: 500 * time.Millisecond})
		var stop atomic.Bool
		var ok, failed atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					resp, err := http.Get(p.url + "/")
					if err != nil {
						failed.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						ok.Add(1)
					} else {
						failed.Add(1)
					}
				}
			}()
		}
		require.Eventually(t, func() bool { return ok.Load() > 50 }, 10*time.Second, 10*time.Millisecond)
		p.cancel()
		require.Eventually(t, func() bool {
			resp, err := http.Get(p.admin + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusServiceUnavailable
		}, 10*time.Second, 10*time.Millisecond)
		stop.Store(true)
		wg.Wait()
		require.NoError(t, <-p.done)
		p.done <- nil // for Cleanup
		require.Zero(t, failed.Load(), "requests failed during the drain (%d ok)", ok.Load())
		s := p.srv.Recorder.Snapshot()
		require.Equal(t, s.Arrivals, s.Completions)
	})
}

func TestStatsDocumentIsValidJSON(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := app(t, func(w http.ResponseWriter, r *http.Request) {})
		p := start(t, up, Config{}, Options{FastPath: fast})
		resp, err := http.Get(p.admin + "/stats")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var raw map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
		require.EqualValues(t, stats.SchemaVersion, raw["version"])
	})
}

// TestTimeoutsKeptBySweeper: the idle timeout closes a keep-alive connection only
// while it is idle, and the upstream timeout covers the response head, not a body
// that streams for longer.
func TestTimeoutsKeptBySweeper(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		const idle, upstream = 100 * time.Millisecond, 600 * time.Millisecond
		up := app(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/slow": // busy for longer than the idle timeout
				time.Sleep(3 * idle)
			case "/stream": // head at once, body over longer than the upstream timeout
				w.WriteHeader(http.StatusOK)
				for i := 0; i < 4; i++ {
					_, _ = io.WriteString(w, "part\n")
					w.(http.Flusher).Flush()
					time.Sleep(upstream / 3)
				}
			}
		})
		p := start(t, up, Config{UpstreamTimeout: upstream}, Options{FastPath: fast, IdleTimeout: idle})
		conn, err := net.Dial("tcp", p.srv.Addr())
		require.NoError(t, err)
		defer conn.Close()
		br := bufio.NewReader(conn)
		get := func(path string) (int, string) {
			t.Helper()
			_, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			require.NoError(t, err)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(body)
		}
		code, _ := get("/slow")
		require.Equal(t, http.StatusOK, code, "a request is not cut by the idle timeout")
		code, body := get("/stream")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, strings.Repeat("part\n", 4), body, "the upstream timeout does not cut a streaming body")
		// Now idle: the proxy closes the connection.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
		_, err = br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "an idle keep-alive connection is closed after the idle timeout")
		require.Equal(t, uint64(2), snapshot(t, p).Codes[1])
	})
}
