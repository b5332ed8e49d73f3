package server

import (
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// setForwarded sets the X-Forwarded fields of out, the request for the application,
// from in, the client's request, as a sidecar behind an ingress or another proxy
// must (nginx's $proxy_add_x_forwarded_for, Envoy, Knative's queue-proxy), and as the
// fast path does (fastpath's writeUpstreamHead):
//   - X-Forwarded-For is one field: the client's X-Forwarded-For values in order, then
//     the client's address, so the app sees the real client first.
//   - X-Forwarded-Host and X-Forwarded-Proto are kept as the client sent them, and set
//     to the Host and "http" only when absent: behind a TLS-terminating ingress the
//     app sees "https" (and does not redirect in a loop) and the public host.
//   - Forwarded passes through unchanged.
//
// Empty X-Forwarded values count as absent, and fields the client's Connection header
// names are hop-by-hop and not carried. httputil.ReverseProxy deletes all four fields
// before Rewrite, so they are taken from in.
func setForwarded(out http.Header, in *http.Request) {
	carried := func(name string) []string {
		if httpguts.HeaderValuesContainsToken(in.Header["Connection"], name) {
			return nil
		}
		var vs []string
		for _, v := range in.Header[name] {
			if v = strings.Trim(v, " \t"); v != "" {
				vs = append(vs, v)
			}
		}
		return vs
	}
	xff := carried("X-Forwarded-For")
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		xff = append(xff, ip)
	}
	if len(xff) > 0 {
		out["X-Forwarded-For"] = []string{strings.Join(xff, ", ")}
	}
	if v := carried("X-Forwarded-Host"); len(v) > 0 {
		out["X-Forwarded-Host"] = v
	} else {
		out["X-Forwarded-Host"] = []string{in.Host}
	}
	if v := carried("X-Forwarded-Proto"); len(v) > 0 {
		out["X-Forwarded-Proto"] = v
	} else {
		out["X-Forwarded-Proto"] = []string{"http"}
	}
	if v, ok := in.Header["Forwarded"]; ok && !httpguts.HeaderValuesContainsToken(in.Header["Connection"], "Forwarded") {
		out["Forwarded"] = v
	}
}
