// Package server is qas-proxy's serving and admin HTTP: a measuring reverse proxy in
// front of the application on localhost, an optional concurrency limit with a bounded
// queue, and an admin listener with /metrics, /stats, /healthz and /readyz that the
// serving port never exposes.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/qas-dev/qas/proxy/limit"
	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
)

// Config configures the proxy.
type Config struct {
	// Upstream is the application's host:port, normally on 127.0.0.1.
	Upstream string
	// UpstreamTimeout bounds the wait for the application's response headers; past it
	// the client gets a 504.
	UpstreamTimeout time.Duration
	// DialTimeout bounds connecting to the application; a refused connection fails at
	// once with a 502.
	DialTimeout time.Duration
	// ConcurrencyLimit is k, the requests served at once (0 = unlimited); QueueLimit
	// bounds the requests waiting for a slot, beyond which the proxy answers 503.
	ConcurrencyLimit, QueueLimit int
	// MaxIdleConnsPerHost sizes the keep-alive pool to the application.
	MaxIdleConnsPerHost int
	// UpstreamIdleTimeout closes pooled connections to the application idle for
	// longer (0: never); keep it below the application's own keep-alive timeout.
	UpstreamIdleTimeout time.Duration
	// ClientBodyTimeout bounds each read of a request body from the client, and
	// ClientWriteTimeout each write of a response to it (0: none): a client that
	// stalls is cut off instead of holding an application connection.
	ClientBodyTimeout, ClientWriteTimeout time.Duration
	// UpstreamWriteTimeout bounds each write to the application (0: none): an
	// application that stops reading a request body fails the request instead of
	// holding it.
	UpstreamWriteTimeout time.Duration
	// UpstreamProtocol is how the proxy speaks to the application: UpstreamHTTP1 (the
	// default when empty) or UpstreamH2C. With h2c every request takes the general
	// path, whatever protocol the client speaks.
	UpstreamProtocol UpstreamProtocol
	// Pool, when set, turns on the pooled data plane (PoolConfig).
	Pool *PoolConfig
}

// UpstreamProtocol is the protocol spoken to the application.
type UpstreamProtocol string

const (
	// UpstreamHTTP1 is HTTP/1.1 over pooled keep-alive connections.
	UpstreamHTTP1 UpstreamProtocol = "http1"
	// UpstreamH2C is HTTP/2 over cleartext with prior knowledge (RFC 9113 §3.3), as
	// gRPC servers and other HTTP/2-only apps expect: requests are multiplexed on a
	// few connections, and trailers (gRPC's status) pass through.
	UpstreamH2C UpstreamProtocol = "h2c"
)

// UpstreamProtocols are the valid UpstreamProtocol values.
var UpstreamProtocols = []UpstreamProtocol{UpstreamHTTP1, UpstreamH2C}

// Proxy is the serving handler.
type Proxy struct {
	rec       *measure.Recorder
	rp        *httputil.ReverseProxy
	transport *http.Transport
	// traceConns: requests tell their appConn when they take it (HTTP/1.1 upstream).
	traceConns bool
	// draining: every HTTP/1 response closes its connection.
	draining atomic.Bool
	// Per-read and per-write limits on the client connection (0: none).
	bodyTimeout, writeTimeout time.Duration
	lim                       *limit.Limiter
	log                       *zap.Logger
	// The pooled data plane, when configured: the client of the fronts, the relay
	// of overflowed requests' responses, and the app's address for pulled ones.
	pool         *pool.Sidecar
	poolCounters *measure.PoolCounters
	relay        *httputil.ReverseProxy
	upstream     string
	// Bodies kept while their requests are at a front (PoolConfig.KeepMaxBody):
	// the bytes kept now, and the bounds.
	keptBytes           atomic.Int64
	keepMax, keepBudget int64
}

type ctxKey struct{}

// outcomeBox carries how the upstream call failed from the ReverseProxy's error
// handler back to the measuring handler.
type outcomeBox struct {
	outcome measure.Outcome
	body    *clientBody // the request's body, if it has one
}

// NewProxy returns the serving handler for cfg, recording into rec and admitting
// requests through lim (nil: no concurrency limit).
func NewProxy(cfg Config, rec *measure.Recorder, lim *limit.Limiter, log *zap.Logger) (*Proxy, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("upstream is empty")
	}
	if _, _, err := net.SplitHostPort(cfg.Upstream); err != nil {
		return nil, err
	}
	if cfg.UpstreamProtocol == "" {
		cfg.UpstreamProtocol = UpstreamHTTP1
	}
	if !slices.Contains(UpstreamProtocols, cfg.UpstreamProtocol) {
		return nil, fmt.Errorf("upstream protocol %q is not one of %v", cfg.UpstreamProtocol, UpstreamProtocols)
	}
	target := &url.URL{Scheme: "http", Host: cfg.Upstream}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = 1024
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          0, // no global cap: there is one upstream
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.UpstreamIdleTimeout,
		ResponseHeaderTimeout: cfg.UpstreamTimeout,
		DisableCompression:    true, // pass bodies through as the app sent them
	}
	if cfg.UpstreamProtocol == UpstreamHTTP1 {
		transport.DialContext = dialApp(dialer, cfg.UpstreamWriteTimeout)
	}
	if cfg.UpstreamProtocol == UpstreamH2C {
		// net/http's own HTTP/2 client, with prior knowledge on plain TCP. Unlike a
		// bare golang.org/x/net/http2.Transport it keeps ResponseHeaderTimeout (the
		// 504), and it dials and pools through the same DialContext; a connection
		// carries many requests at once, and more are opened when the app's
		// SETTINGS_MAX_CONCURRENT_STREAMS is reached.
		transport.Protocols = new(http.Protocols)
		transport.Protocols.SetUnencryptedHTTP2(true)
	}
	p := &Proxy{rec: rec, log: log, lim: lim, transport: transport, traceConns: cfg.UpstreamProtocol == UpstreamHTTP1,
		bodyTimeout: cfg.ClientBodyTimeout, writeTimeout: cfg.ClientWriteTimeout, upstream: cfg.Upstream}
	if cfg.Pool != nil {
		if lim == nil {
			return nil, errors.New("pooling needs a concurrency limit")
		}
		respTimeout := pool.MaxFrontWait + cfg.UpstreamTimeout
		if cfg.UpstreamTimeout == 0 {
			respTimeout = 0 // the default: the longest front wait plus a minute
		}
		p.keepMax, p.keepBudget = cfg.Pool.KeepMaxBody, cfg.Pool.KeepBudget
		if p.keepMax == 0 {
			p.keepMax = DefaultKeepMaxBody
		}
		if p.keepBudget <= 0 {
			p.keepBudget = DefaultKeepBudget
		}
		var err error
		p.poolCounters = rec.EnablePool()
		p.pool, err = pool.NewSidecar(pool.SidecarConfig{
			Workload: cfg.Pool.Workload, Keys: cfg.Pool.Keys, Fronts: cfg.Pool.Fronts,
			DecisionTimeout: cfg.Pool.DecisionTimeout, MaxBody: cfg.Pool.MaxBody, ResponseTimeout: respTimeout,
			Now: rec.Now, Counters: p.poolCounters, Log: log.Named("pool"),
		})
		if err != nil {
			return nil, err
		}
		p.relay = newRelay(log)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the app sees the Host the client asked for
			setForwarded(pr.Out.Header, pr.In)
		},
		Transport:      transport,
		ModifyResponse: keepTrailers,
		// Streams (SSE, unknown length) are flushed at once by ReverseProxy itself.
		ErrorHandler: p.upstreamError,
		ErrorLog:     zap.NewStdLog(log.Named("reverseproxy")),
	}
	return p, nil
}

// CloseIdle closes the idle connections to the application, once the proxy has
// stopped serving.
func (p *Proxy) CloseIdle() { p.transport.CloseIdleConnections() }

// keepTrailers makes a response that announces trailers reach an HTTP/1 client
// chunked, the only framing that carries them: an HTTP/2 app may send a
// Content-Length with trailers (Go's server does for a short body), and net/http's
// HTTP/1 server would then drop them. An HTTP/1.1 app's response has announced
// trailers only when chunked already.
func keepTrailers(res *http.Response) error {
	if len(res.Trailer) > 0 && res.Request.ProtoMajor == 1 {
		res.Header.Del("Content-Length")
		res.ContentLength = -1
	}
	return nil
}

// ServeHTTP measures and forwards one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f, ok := refusal(r); ok {
		p.refuse(w, r, f)
		return
	}
	arrived := p.rec.Arrive()
	if r.ProtoMajor == 1 {
		// A proxy streams both ways. Without this, net/http's HTTP/1 server reads
		// the rest of the request body and closes it when the response starts, and an
		// application that answers as soon as it has all the bytes of a body (before
		// the Transport's last read that sees its end) then has its connection torn
		// down mid-response ("invalid Read on closed Body").
		_ = http.NewResponseController(w).EnableFullDuplex()
		if p.draining.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	// drain, when set, makes a request waiting in the local queue leave it when the
	// pod begins to drain, to be offered to a front (served by pods that stay).
	var drain <-chan struct{}
	if p.pool != nil {
		// A client never chooses the data plane.
		pool.StripQasFields(r.Header)
		// Only a request that finds every slot busy can leave this pod, so only it
		// is checked (one that finds a slot is served here, as without pooling; a
		// slot taken just after the check only means it waits here). It is offered
		// to a front at most twice: at admission if every slot is busy and none
		// waits, and if it waits here when the drain begins (or would wait during
		// the drain).
		if p.lim.Busy() {
			m := p.mobility(r)
			if m != stays {
				drain = p.pool.Drained()
			}
			if m == movesOnceRead && p.lim.Saturated() {
				// It would wait: its body is read ahead meanwhile, once.
				whole, release := p.readAhead(r)
				defer release()
				if whole {
					m = moves
				} else {
					// Served here with what was read and the rest; never
					// offered, at the drain either.
					m, drain = stays, nil
				}
			}
			if m == moves && p.lim.Saturated() {
				answered, release := p.overflow(w, r, arrived, false)
				if answered {
					return
				}
				if release != nil {
					defer release()
				}
			}
			unread(r)
		}
	}
	res := p.lim.AdmitOrDrain(p.rec, arrived, r.Context().Done(), drain)
	if res == limit.Drained {
		// It keeps its place in the local queue while it is offered.
		readmitted := false
		defer func() {
			if !readmitted {
				p.lim.Leave()
			}
		}()
		offer := true
		if ab, ok := r.Body.(*aheadBody); ok {
			r.ContentLength = int64(len(ab.data))
		} else if r.ContentLength < 0 {
			// An HTTP/2 body of unknown length not read ahead at admission (a
			// request waited already): it is read now, while it keeps its place.
			whole, release := p.readAhead(r)
			defer release()
			offer = whole
		}
		if offer {
			answered, release := p.overflow(w, r, arrived, true)
			if answered {
				return
			}
			if release != nil {
				defer release()
			}
			unread(r)
		}
		// Refused, no decision in time, no front, given back unseen, or a body
		// that did not end in time: it waits in its place and is served here.
		p.poolCounters.DrainKept()
		readmitted = true
		res = p.lim.Readmit(p.rec, arrived, r.Context().Done())
	}
	switch res {
	case limit.Full:
		w.Header().Set("Retry-After", limit.RetryAfter)
		http.Error(w, "qas-proxy: concurrency limit reached and queue full", http.StatusServiceUnavailable)
		return
	case limit.Gone:
		// The client left while queued: nothing may be written, or net/http would
		// answer 200 for a request the app never saw (a client that only
		// half-closed still reads it).
		panic(http.ErrAbortHandler)
	}
	defer p.lim.Release()
	began := p.rec.Begin()
	mw := &measuringWriter{ResponseWriter: w, began: began, rec: p.rec}
	box := &outcomeBox{}
	var rc *http.ResponseController
	if p.writeTimeout > 0 {
		rc = http.NewResponseController(w)
		mw.rc, mw.writeTimeout = rc, p.writeTimeout
	}
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
		// A body that cannot be read to its end (malformed chunks, a client that
		// stalls) leaves the connection's framing lost: the answer is the client's
		// error and closes the connection, or the rest of the body would be read
		// as the next request.
		body := &clientBody{ReadCloser: r.Body, timeout: p.bodyTimeout}
		if p.bodyTimeout > 0 {
			if rc == nil {
				rc = http.NewResponseController(w)
			}
			body.rc = rc
		}
		r.Body, mw.body, box.body = body, body, body
	}
	recorded := false
	defer func() {
		// ReverseProxy aborts the response with a panic (http.ErrAbortHandler) when
		// copying the body fails; the request still ends and must be recorded, or it
		// would stay in flight forever.
		if v := recover(); v != nil {
			if recorded {
				panic(v)
			}
			outcome := measure.UpstreamError
			if r.Context().Err() != nil {
				outcome = measure.ClientCancel
			}
			p.rec.End(arrived, began, mw.ttfb, mw.status(), outcome)
			panic(v)
		}
	}()
	ctx := context.WithValue(r.Context(), ctxKey{}, box)
	if p.traceConns {
		ctx = traceAppConn(ctx)
	}
	p.rp.ServeHTTP(mw, r.WithContext(ctx))
	code := mw.status()
	outcome := box.outcome
	if outcome == measure.OK && r.Context().Err() != nil && !mw.done() {
		outcome = measure.ClientCancel
	}
	p.rec.End(arrived, began, mw.ttfb, code, outcome)
	if outcome == measure.ClientCancel && !mw.done() {
		// The client left (or half-closed) before any answer: abort the
		// connection rather than let net/http invent a 200 for a request the app
		// may never have seen.
		recorded = true
		panic(http.ErrAbortHandler)
	}
}

// refusal says why the proxy refuses r itself, if it does: a CONNECT
// (tunnelMethod), a malformed HTTP/2 method or target (wellFormedH2), an
// HTTP/1 target the app would get rewritten (forwardableH1Target).
func refusal(r *http.Request) (measure.Refusal, bool) {
	switch {
	case tunnelMethod(r.Method):
		return measure.RefusedConnect, true
	case r.ProtoMajor == 2 && !wellFormedH2(r):
		return measure.RefusedMalformedH2, true
	case r.ProtoMajor == 1 && !forwardableH1Target(r):
		return measure.RefusedRequestTarget, true
	}
	return 0, false
}

// refusals are the answers to the requests the proxy refuses itself.
var refusals = map[measure.Refusal]struct {
	code int
	msg  string
}{
	// 405, as nginx answers a CONNECT it can parse. No Allow field: the
	// application's methods are not the proxy's to list.
	measure.RefusedConnect:       {http.StatusMethodNotAllowed, "qas-proxy: CONNECT is not allowed: this is a reverse proxy and opens no tunnel"},
	measure.RefusedMalformedH2:   {http.StatusBadRequest, "qas-proxy: malformed request method or target"},
	measure.RefusedRequestTarget: {http.StatusBadRequest, "qas-proxy: request target is neither origin form nor an http or https absolute URI"},
}

// refuse answers a request the proxy refuses itself (refusal), before it
// counts as an arrival, as net/http refuses a malformed request line, and
// before any of it reaches the application, a peer or a front; it is counted
// by reason (/metrics). An HTTP/1 connection is closed: after a CONNECT head
// the client's bytes are meant for a tunnel (a TLS handshake, or a request
// smuggled past a proxy in front that took a 200 for an open tunnel), and
// after a target the proxy does not take, the rest of the connection is not
// to be trusted either. An HTTP/2 refusal ends only its stream.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, f measure.Refusal) {
	p.rec.Refuse(f)
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	a := refusals[f]
	http.Error(w, a.msg, a.code)
}

// tunnelMethod reports whether method asks for a tunnel: CONNECT, in any case. The
// proxy is in front of one application, not a forward proxy, and opens no tunnel:
// forwarded, a CONNECT reached an HTTP/1.1 app as "CONNECT / HTTP/1.1", which is
// not what the client sent, and the app's 200 told the client that a tunnel was
// open. Methods are case-sensitive (RFC 9110 section 9.1), so "connect" is another
// token, but one a parser that folds case reads as CONNECT; no application in front
// of which the proxy sits needs it, so it is refused alike.
func tunnelMethod(method string) bool { return strings.EqualFold(method, http.MethodConnect) }

// wellFormedH2 reports whether an HTTP/2 request's :method is a token and its :path
// a request target of visible ASCII (origin form, or "*"; a CONNECT, which has no
// :path, is refused before: refusal).
// net/http's HTTP/2 server lets through a space or a byte above 0x7e in the query
// (it rejects only control characters), which no HTTP/1.1 request line can carry:
// the app would get "GET /q?a b HTTP/1.1", which a lenient parser reads as another
// target and version. RFC 9113 section 8.3.1 makes such a request malformed, and an
// intermediary does not forward it (section 8.1.1).
func wellFormedH2(r *http.Request) bool {
	if !httpguts.ValidHeaderFieldName(r.Method) {
		return false
	}
	target := r.URL.RequestURI()
	return target == "*" || originForm(target)
}

// forwardableH1Target reports whether an HTTP/1 request's target is one the app gets
// as the client meant it: origin form ("/a?q"), or absolute form with the http or
// https scheme and a host (the app gets its path and query, as RFC 9112 section
// 3.2.2 has a server take it). net/http accepts any URI there, and the request to
// the app then carried another target: "x:443" became "443", "mailto:a@b" "a@b",
// "x:/admin" and "http:/admin" (no host) "/admin", "*" (other than OPTIONS *,
// which net/http answers itself) "/%2A". nginx refuses each with 400 and closes,
// and so does the proxy (refuse), before the request counts.
func forwardableH1Target(r *http.Request) bool {
	target := r.RequestURI
	if strings.HasPrefix(target, "/") {
		return true
	}
	u := r.URL
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == ""
}

// upstreamError answers when the application could not produce a response: 504 if it
// was too slow, nothing if the client left (the upstream request is already cancelled
// through the shared context), 502 otherwise.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	box, _ := r.Context().Value(ctxKey{}).(*outcomeBox)
	set := func(o measure.Outcome) {
		if box != nil {
			box.outcome = o
		}
	}
	var ne net.Error
	switch {
	case box != nil && box.body != nil && box.body.err != nil:
		// The client's body failed, not the app: 400 for a malformed body, 408
		// for one that stalled; the connection closes (clientBody.failed).
		set(measure.ClientCancel)
		code, msg := http.StatusBadRequest, "qas-proxy: malformed request body"
		if errors.As(box.body.err, &ne) && ne.Timeout() {
			code, msg = http.StatusRequestTimeout, "qas-proxy: request body timed out"
		}
		w.Header().Set("Connection", "close")
		http.Error(w, msg, code)
		p.log.Debug("client body", zap.String("path", r.URL.Path), zap.Error(box.body.err))
		return
	case r.Context().Err() != nil:
		set(measure.ClientCancel)
		// 499 in nginx's sense: recorded, never seen by the client.
		if mw, ok := w.(*measuringWriter); ok {
			mw.code = 499
		}
		return
	case errors.As(err, &ne) && ne.Timeout():
		set(measure.UpstreamTimeout)
		http.Error(w, "qas-proxy: upstream timed out", http.StatusGatewayTimeout)
	default:
		set(measure.UpstreamError)
		http.Error(w, "qas-proxy: upstream unavailable", http.StatusBadGateway)
	}
	p.log.Debug("upstream error", zap.String("path", r.URL.Path), zap.Error(err))
}

// measuringWriter notes the status code and the time of the first byte, and bounds
// each write to the client (writeTimeout, through rc) so a client that reads nothing
// cannot hold the request and its application connection.
type measuringWriter struct {
	http.ResponseWriter
	rec          *measure.Recorder
	began        time.Time
	code         int
	ttfb         time.Duration
	wrote        bool
	rc           *http.ResponseController
	writeTimeout time.Duration
	body         *clientBody // the request's, if it has one
}

// deadline extends the write deadline before a write; a response to a request whose
// body could not be read closes the connection.
func (m *measuringWriter) deadline() {
	if m.body.failed() {
		m.ResponseWriter.Header().Set("Connection", "close")
	}
	if m.rc != nil {
		_ = m.rc.SetWriteDeadline(time.Now().Add(m.writeTimeout))
	}
}

// clientBody is a request body from an HTTP/1 client. It notes a failure to read it
// (malformed chunks, a stall) so the response closes the connection, and bounds each
// read (timeout, through rc) when set. It clears the deadline at the body's end:
// net/http's background read of the connection, which follows, would otherwise take
// a deadline's expiry for the client leaving; after a failure the deadline stays, so
// net/http's discarding of the rest of the body fails at once.
type clientBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.rc != nil {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if b.rc != nil {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	case err != nil && !errors.Is(err, http.ErrBodyReadAfterClose):
		b.err = err
	}
	return n, err
}

// failed reports whether reading the body failed.
func (b *clientBody) failed() bool { return b != nil && b.err != nil }

func (m *measuringWriter) WriteHeader(code int) {
	if !m.wrote {
		m.first()
		m.code = code
		if code >= 200 || code == http.StatusSwitchingProtocols {
			m.wrote = true
		}
	}
	m.deadline()
	m.ResponseWriter.WriteHeader(code)
}

func (m *measuringWriter) Write(b []byte) (int, error) {
	if !m.wrote {
		m.first()
		m.wrote = true
		if m.code == 0 {
			m.code = http.StatusOK
		}
	}
	m.deadline()
	return m.ResponseWriter.Write(b)
}

func (m *measuringWriter) first() {
	if m.ttfb == 0 {
		m.ttfb = max(m.rec.Now().Sub(m.began), 1)
	}
}

func (m *measuringWriter) done() bool { return m.wrote }

// status is the response's status code so far (200 if the handler wrote none).
func (m *measuringWriter) status() int {
	if m.code == 0 {
		return http.StatusOK
	}
	return m.code
}

// Unwrap lets http.ResponseController reach Flush and Hijack (streaming, Upgrade).
func (m *measuringWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }

// Flush forwards flushes for handlers that type-assert http.Flusher.
func (m *measuringWriter) Flush() {
	if !m.wrote {
		m.first()
		m.wrote = true
		if m.code == 0 {
			m.code = http.StatusOK
		}
	}
	m.deadline()
	_ = http.NewResponseController(m.ResponseWriter).Flush()
}
