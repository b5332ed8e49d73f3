package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// h2cClient speaks HTTP/2 with prior knowledge to the proxy.
func h2cClient() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

// TestH2CUpstream: with --upstream-protocol=h2c the proxy speaks HTTP/2 to an app that
// speaks nothing else, for HTTP/1.1 and h2c clients alike, and keeps trailers, request
// bodies and the measurements. Streaming, the timeouts, client cancels and the
// concurrency limit are checked on h2c too, by the tests that run on upstreamPaths.
func TestH2CUpstream(t *testing.T) {
	big := make([]byte, 4<<20)
	_, _ = rand.Read(big)
	mux := http.NewServeMux()
	mux.HandleFunc("/proto", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		// One trailer announced before the body, one not (as gRPC's status is not).
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "ab")
		w.Header().Set("X-Sum", "ab")
		w.Header().Set(http.TrailerPrefix+"X-Status", "0")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	up := h2cApp(t, mux.ServeHTTP)
	h2c := Config{UpstreamProtocol: UpstreamH2C}

	t.Run("HTTP/1.1 client", func(t *testing.T) {
		p := start(t, up, h2c, Options{FastPath: true})
		require.False(t, p.srv.FastPath(), "the fast path speaks only HTTP/1.1 upstream")
		for range 3 {
			resp, err := http.Get(p.url + "/proto")
			require.NoError(t, err)
			require.Equal(t, "HTTP/1.1", resp.Proto)
			require.Equal(t, "HTTP/2.0", body(t, resp), "the proxy converts to HTTP/2 for the app")
			resp.Body.Close()
		}
		s := snapshot(t, p)
		require.Equal(t, uint64(3), s.Arrivals)
		require.Equal(t, uint64(3), s.Completions)
		require.Equal(t, uint64(3), s.Codes[1])
	})
	t.Run("h2c client", func(t *testing.T) {
		p := start(t, up, h2c, Options{FastPath: true})
		resp, err := h2cClient().Get(p.url + "/proto")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, "HTTP/2.0", resp.Proto)
		require.Equal(t, "HTTP/2.0", body(t, resp))
		require.Equal(t, uint64(1), snapshot(t, p).Completions)
	})
	t.Run("trailers", func(t *testing.T) {
		p := start(t, up, h2c, Options{})
		for name, c := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": h2cClient()} {
			resp, err := c.Get(p.url + "/trailers")
			require.NoError(t, err, name)
			require.Equal(t, "ab", body(t, resp), name)
			resp.Body.Close()
			require.Equal(t, "ab", resp.Trailer.Get("X-Sum"), name)
			require.Equal(t, "0", resp.Trailer.Get("X-Status"), "%s: a trailer the app did not announce", name)
		}
	})
	t.Run("large request and response body", func(t *testing.T) {
		p := start(t, up, h2c, Options{})
		resp, err := http.Post(p.url+"/echo", "application/octet-stream", bytes.NewReader(big))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, big, []byte(body(t, resp)))
	})
	t.Run("Upgrade is 502", func(t *testing.T) {
		// HTTP/2 has no Upgrade (and Go's client no extended CONNECT): a WebSocket
		// app needs --upstream-protocol=http1.
		p := start(t, up, h2c, Options{})
		resp := rawRequest(t, p.srv.Addr(), "GET /proto HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		resp.Body.Close()
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.Equal(t, uint64(1), snapshot(t, p).UpstreamErrors)
	})
}

// TestHTTP1UpstreamToH2COnlyApp: with the default --upstream-protocol=http1, an app that
// speaks only h2c closes the connection on the HTTP/1.1 request, and the client gets
// a 502 at once, counted as an upstream error.
func TestHTTP1UpstreamToH2COnlyApp(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		up := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {})
		p := start(t, up, Config{}, Options{FastPath: fast})
		resp, err := http.Get(p.url + "/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.Equal(t, uint64(1), snapshot(t, p).UpstreamErrors)
	})
}

// TestH2CConnectRefused sends raw HTTP/2 CONNECTs (h2c, prior knowledge) to a proxy
// without pooling, in front of an HTTP/1.1 app and of an h2c app: the proxy opens no
// tunnel, so a CONNECT, in any case and with tunnel bytes after it, gets 405 on its
// stream before any of it reaches the app, and is not counted, as the other requests
// the proxy refuses are not. The connection stays usable (HTTP/2 frames each
// stream apart): a GET after them reaches the app, the only request it gets. An
// extended CONNECT (:protocol) is reset by net/http's HTTP/2 server, as on the
// pooled path (TestH2HostileFieldsPooled). Until 2026-11-26 the HTTP/1.1 app got
// "CONNECT / HTTP/1.1" and the client its 200.
func TestH2CConnectRefused(t *testing.T) {
	connect := []h2Field{{":method", "CONNECT"}, {":authority", "shop.example:443"}}
	for _, tt := range []struct {
		name   string
		fields []h2Field
		data   []string // tunnel bytes: the stream is left open after them
		status string
		reset  bool
	}{
		{name: "CONNECT", fields: connect, status: "405"},
		{name: "CONNECT with tunnel bytes", fields: connect, data: []string{"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"}, status: "405"},
		{name: "lower-case connect", fields: pseudo("connect", "/", "shop.example"), status: "405"},
		{name: "extended CONNECT", fields: append(pseudo("CONNECT", "/ws", "shop.example"), h2Field{":protocol", "websocket"}), reset: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, up := range []struct {
				name string
				cfg  Config
			}{{"HTTP/1.1 app", Config{}}, {"h2c app", Config{UpstreamProtocol: UpstreamH2C}}} {
				t.Run(up.name, func(t *testing.T) {
					var got []string // what the app received: method and target
					var mu sync.Mutex
					var addr string
					var rec *recordingApp
					if up.cfg.UpstreamProtocol == UpstreamH2C {
						addr = h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
							mu.Lock()
							got = append(got, r.Method+" "+r.RequestURI)
							mu.Unlock()
						})
					} else {
						rec = newRecordingApp(t)
						addr = rec.addr
					}
					p := start(t, addr, up.cfg, Options{})
					c := dialH2(t, p.srv.Addr())
					var id uint32
					if len(tt.data) > 0 {
						id = c.open(tt.fields, tt.data...)
					} else {
						id = c.request(tt.fields)
					}
					a := c.answer(id)
					if tt.reset {
						require.True(t, a.reset, "the stream is reset, got %+v", a)
						require.Equal(t, http2.ErrCodeProtocol, a.code)
					} else {
						require.False(t, a.reset, "got %+v", a)
						require.Equal(t, tt.status, a.status, "body %q", a.body)
						require.Contains(t, a.body, "CONNECT is not allowed")
					}
					s := snapshot(t, p)
					require.Zero(t, s.Arrivals, "a refused CONNECT is not an arrival")
					require.Zero(t, s.Completions)
					// The connection serves the next stream.
					next := c.answer(c.request(pseudo("GET", "/after", "shop.example")))
					require.Equal(t, "200", next.status)
					require.Equal(t, uint64(1), snapshot(t, p).Arrivals)
					if rec != nil {
						var reqs []string
						for _, r := range rec.settled(t, p) {
							reqs = append(reqs, r.method+" "+r.target)
						}
						got = reqs
					}
					mu.Lock()
					defer mu.Unlock()
					require.Equal(t, []string{"GET /after"}, got, "the app gets the GET and nothing of the CONNECT")
				})
			}
		})
	}
}

// TestH2CExtendedConnectRefused: with extended CONNECT turned on in net/http's HTTP/2
// server (GODEBUG=http2xconnect=1, read once at start, so the test runs itself in a
// child process), a CONNECT with :protocol (a WebSocket over HTTP/2) reaches the
// proxy, which refuses it as any CONNECT: 405, not counted, nothing to the app.
// The server's reset (TestH2CConnectRefused) is the default, not the only guard.
func TestH2CExtendedConnectRefused(t *testing.T) {
	if os.Getenv("QAS_TEST_XCONNECT_CHILD") != "1" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestH2CExtendedConnectRefused$", "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=http2xconnect=1", "QAS_TEST_XCONNECT_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "server offers extended CONNECT", "the child ran the check")
		require.Contains(t, string(out), "--- PASS: TestH2CExtendedConnectRefused")
		return
	}
	rec := newRecordingApp(t)
	p := start(t, rec.addr, Config{}, Options{})
	c := dialH2(t, p.srv.Addr())
	f, err := c.fr.ReadFrame()
	require.NoError(t, err)
	settings, ok := f.(*http2.SettingsFrame)
	require.True(t, ok, "the server's first frame is its SETTINGS, got %T", f)
	v, ok := settings.Value(http2.SettingEnableConnectProtocol)
	require.True(t, ok && v == 1, "the server offers extended CONNECT (RFC 8441)")
	t.Log("server offers extended CONNECT")
	require.NoError(t, c.fr.WriteSettingsAck())
	a := c.answer(c.open(append(pseudo("CONNECT", "/ws", "shop.example"), h2Field{":protocol", "websocket"}), "tunnel bytes"))
	require.False(t, a.reset, "got %+v", a)
	require.Equal(t, "405", a.status, "body %q", a.body)
	require.Zero(t, snapshot(t, p).Arrivals, "a refused CONNECT is not an arrival")
	require.Empty(t, rec.settled(t, p), "the app gets nothing")
}
