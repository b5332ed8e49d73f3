package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// h2cApp is an application that speaks only HTTP/2 over cleartext with prior
// knowledge: an HTTP/1.1 request to it fails.
func h2cApp(t *testing.T, h http.HandlerFunc) string {
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// upstreamPaths runs f on the general and the fast path to an HTTP/1.1 app, and on
// the general path to an h2c app (--upstream-protocol=h2c); start it with the
// Config and Options f is given, and the app from newApp.
func upstreamPaths(t *testing.T, f func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string)) {
	for _, p := range []struct {
		name   string
		fast   bool
		proto  UpstreamProtocol
		newApp func(*testing.T, http.HandlerFunc) string
	}{
		{"general", false, UpstreamHTTP1, app},
		{"fast", true, UpstreamHTTP1, app},
		{"h2c upstream", true, UpstreamH2C, h2cApp},
	} {
		t.Run(p.name, func(t *testing.T) { f(t, Config{UpstreamProtocol: p.proto}, Options{FastPath: p.fast}, p.newApp) })
	}
}

// TestForwardedHeaders: what the app reads from X-Forwarded-For, -Host, -Proto and
// Forwarded, for what a client (or an ingress in front of the proxy) sends. The proxy
// appends the peer to X-Forwarded-For, keeps the rest and fills in what is missing,
// as nginx's $proxy_add_x_forwarded_for, Envoy and Knative's queue-proxy do.
func TestForwardedHeaders(t *testing.T) {
	const peer = "127.0.0.1"
	tests := []struct {
		name    string
		headers string // header lines the client adds, each ending in CRLF
		want    map[string][]string
	}{
		{"none", "", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
		}},
		{"X-Forwarded-For, one line", "X-Forwarded-For: 203.0.113.7\r\n", map[string][]string{
			"X-Forwarded-For": {"203.0.113.7, " + peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
		}},
		{"X-Forwarded-For, two lines", "X-Forwarded-For: 203.0.113.7, 198.51.100.2\r\nAccept: */*\r\nX-Forwarded-For: 10.1.0.9\r\n", map[string][]string{
			"X-Forwarded-For": {"203.0.113.7, 198.51.100.2, 10.1.0.9, " + peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
		}},
		{"X-Forwarded-Proto https", "X-Forwarded-Proto: https\r\n", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"https"},
		}},
		{"X-Forwarded-Host", "X-Forwarded-Host: www.example.com\r\n", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"www.example.com"}, "X-Forwarded-Proto": {"http"},
		}},
		{"Forwarded", "Forwarded: for=203.0.113.7;proto=https;host=www.example.com\r\n", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
			"Forwarded": {"for=203.0.113.7;proto=https;host=www.example.com"},
		}},
		{"behind a TLS-terminating ingress", "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: www.example.com\r\n" +
			"Forwarded: for=203.0.113.7;proto=https\r\n", map[string][]string{
			"X-Forwarded-For": {"203.0.113.7, " + peer}, "X-Forwarded-Host": {"www.example.com"}, "X-Forwarded-Proto": {"https"},
			"Forwarded": {"for=203.0.113.7;proto=https"},
		}},
		{"empty values count as absent", "X-Forwarded-For:\r\nX-Forwarded-Proto: \r\n", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
		}},
		{"fields named in Connection are hop-by-hop", "Connection: X-Forwarded-For, X-Forwarded-Proto\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n", map[string][]string{
			"X-Forwarded-For": {peer}, "X-Forwarded-Host": {"shop.example"}, "X-Forwarded-Proto": {"http"},
		}},
	}
	upstreamPaths(t, func(t *testing.T, cfg Config, opts Options, newApp func(*testing.T, http.HandlerFunc) string) {
		got := make(chan map[string][]string, 1)
		up := newApp(t, func(w http.ResponseWriter, r *http.Request) {
			seen := map[string][]string{}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
				if v, ok := r.Header[k]; ok {
					seen[k] = v
				}
			}
			got <- seen
		})
		p := start(t, up, cfg, opts)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				resp := rawExchange(t, p.srv.Addr(), "GET /x HTTP/1.1\r\nHost: shop.example\r\n"+tt.headers+"\r\n", 1, "GET")[0]
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, tt.want, <-got)
			})
		}
		if opts.FastPath && cfg.UpstreamProtocol == UpstreamHTTP1 {
			requireServedBy(t, p, uint64(len(tests)), 0)
		} else {
			require.False(t, p.srv.FastPath())
		}
	})
}
