package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
	"github.com/qas-dev/qas/proxy/pool/auth"
)

// PoolConfig turns on the pooled data plane (issue #20, docs/pooling.md): requests
// that find every slot busy overflow to a shared front, and a free slot pulls from
// it. It needs a concurrency limit.
type PoolConfig struct {
	Workload        string
	Keys            *auth.Keyring
	Fronts          pool.FrontSource
	DecisionTimeout time.Duration
	MaxBody         int64
	// KeepMaxBody is the largest request body the sender keeps while the request is
	// at a front, so that it can serve the request itself if the front gives it back
	// unseen (0: DefaultKeepMaxBody; negative: keep none, so only bodiless requests
	// come back). KeepBudget bounds the bytes all such requests keep at once (0:
	// DefaultKeepBudget); a body that does not fit is not kept.
	KeepMaxBody, KeepBudget int64
}

// The bounds on the bodies a sender keeps (PoolConfig.KeepMaxBody, KeepBudget): 64
// KiB covers the usual JSON or form request, and 4 MiB of a sidecar's memory holds
// 64 such bodies at a front at once; bodiless requests (most GETs) cost nothing.
const (
	DefaultKeepMaxBody = 64 << 10
	DefaultKeepBudget  = 4 << 20
)

// hopByHop are the fields a proxy never forwards (RFC 9110 section 7.6.1), as
// httputil.ReverseProxy drops them.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// movable reports whether r may be sent to another pod: plain HTTP/1.1, not CONNECT,
// no Upgrade or Expect, a body of known length within the limit. Everything else is
// served here.
func (p *Proxy) movable(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.ProtoMinor == 1 && r.Method != http.MethodConnect &&
		r.ContentLength >= 0 && r.ContentLength <= p.pool.MaxBody() && len(r.TransferEncoding) == 0 &&
		len(r.Header["Upgrade"]) == 0 && len(r.Header["Expect"]) == 0 &&
		!httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") &&
		strings.HasPrefix(r.URL.RequestURI(), "/")
}

// overflowHead is r's head as the local path would send it to the app: hop-by-hop
// fields dropped, X-Forwarded fields set, Content-Length as the body has it.
func overflowHead(r *http.Request) []byte {
	out := r.Header.Clone()
	te := httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers")
	for _, name := range r.Header["Connection"] {
		for _, f := range strings.Split(name, ",") {
			if f = textprotoTrim(f); f != "" {
				out.Del(f)
			}
		}
	}
	for _, name := range hopByHop {
		delete(out, name)
	}
	if te {
		out["Te"] = []string{"trailers"}
	}
	for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "Content-Length", "Host"} {
		delete(out, name)
	}
	setForwarded(out, r)
	var b bytes.Buffer
	b.WriteString(r.Method + " " + r.URL.RequestURI() + " HTTP/1.1\r\nHost: " + r.Host + "\r\n")
	_ = out.Write(&b)
	if r.ContentLength > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		b.WriteString("Content-Length: " + strconv.FormatInt(r.ContentLength, 10) + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

func textprotoTrim(s string) string { return strings.Trim(s, " \t") }

type cannedKey struct{}

// cannedTransport returns the response the request's context carries: the overflow
// relay uses httputil.ReverseProxy for what it does to a response (hop-by-hop
// fields, trailers, flushing streams), with the response already in hand.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, _ := r.Context().Value(cannedKey{}).(*http.Response)
	if resp == nil {
		return nil, errors.New("no overflow response")
	}
	resp.Request = r
	return resp, nil
}

func newRelay(log *zap.Logger) *httputil.ReverseProxy {
	target := &url.URL{Scheme: "http", Host: "overflow.invalid"}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Body = http.NoBody
			pr.Out.ContentLength = 0
		},
		Transport:      cannedTransport{},
		ModifyResponse: keepTrailers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "qas-proxy: overflow relay failed", http.StatusBadGateway)
		},
		ErrorLog: zap.NewStdLog(log.Named("overflow")),
	}
}

// keptBody keeps the bytes of a request body as the overflow reads them, so that a
// request the front gives back unseen can be served here whole (Answer Expired).
// The mutex orders the transport's reads with the handler's look at the bytes.
type keptBody struct {
	r   io.Reader
	mu  sync.Mutex
	buf []byte
}

func (k *keptBody) Read(b []byte) (int, error) {
	n, err := k.r.Read(b)
	k.mu.Lock()
	k.buf = append(k.buf, b[:n]...)
	k.mu.Unlock()
	return n, err
}

// whole returns the body if all of its want bytes were read, else nil.
func (k *keptBody) whole(want int64) []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if int64(len(k.buf)) != want {
		return nil
	}
	return k.buf
}

// reserveKept reserves n bytes of the budget for keeping a body: false if n is over
// the per-request bound or the budget has no room (the body is then not kept).
func (p *Proxy) reserveKept(n int64) bool {
	if n > p.keepMax {
		return false
	}
	for {
		used := p.keptBytes.Load()
		if used+n > p.keepBudget {
			return false
		}
		if p.keptBytes.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// overflow offers r to a front (drained: r left this draining pod's local queue to
// be offered). It returns answered when the response was relayed (the request is
// recorded as overflowed). Otherwise r is to be served here, and it is untouched:
// the front did not accept it in time and nothing of it was read, or the front gave
// it back unseen and its bytes were kept (r.Body gives them again); release, when
// not nil, frees the kept bytes once the request ends.
func (p *Proxy) overflow(w http.ResponseWriter, r *http.Request, arrived time.Time, drained bool) (answered bool, release func()) {
	var body io.Reader = http.NoBody
	var cb *clientBody
	var kept *keptBody
	if r.ContentLength > 0 {
		cb = &clientBody{ReadCloser: r.Body, timeout: p.bodyTimeout}
		if p.bodyTimeout > 0 {
			cb.rc = http.NewResponseController(w)
		}
		body = cb
		if p.reserveKept(r.ContentLength) {
			kept = &keptBody{r: cb, buf: make([]byte, 0, r.ContentLength)}
			body = kept
			n := r.ContentLength
			release = sync.OnceFunc(func() { p.keptBytes.Add(-n) })
		}
	}
	if release == nil {
		release = func() {}
	}
	resp, answer, err := p.pool.Overflow(r.Context(), r.Method, overflowHead(r), body, r.ContentLength)
	if answer == pool.NotAccepted {
		release()
		return false, nil
	}
	if answer == pool.Expired {
		// No app saw it. Served here if it can be sent again byte for byte: a
		// request without a body, or one whose body was kept whole.
		var again []byte
		if r.ContentLength > 0 && kept != nil {
			again = kept.whole(r.ContentLength)
		}
		if r.ContentLength == 0 || again != nil {
			resp.Body.Close()
			p.poolCounters.Expired(true)
			if again != nil {
				r.Body = io.NopCloser(bytes.NewReader(again))
			}
			return false, release
		}
		p.poolCounters.Expired(false)
	}
	release()
	if drained {
		p.poolCounters.DrainPushed()
	}
	mw := &measuringWriter{ResponseWriter: w, began: arrived, rec: p.rec, body: cb}
	if p.writeTimeout > 0 {
		mw.rc, mw.writeTimeout = http.NewResponseController(w), p.writeTimeout
	}
	if err != nil {
		var ne net.Error
		switch {
		case cb.failed():
			code, msg := http.StatusBadRequest, "qas-proxy: malformed request body"
			if errors.As(cb.err, &ne) && ne.Timeout() {
				code, msg = http.StatusRequestTimeout, "qas-proxy: request body timed out"
			}
			w.Header().Set("Connection", "close")
			http.Error(mw, msg, code)
			p.rec.EndOverflowed(arrived, code, measure.ClientCancel)
		case r.Context().Err() != nil:
			p.rec.EndOverflowed(arrived, 499, measure.ClientCancel)
			panic(http.ErrAbortHandler)
		case errors.Is(err, pool.ErrResponseTimeout):
			http.Error(mw, "qas-proxy: pooled upstream timed out", http.StatusGatewayTimeout)
			p.rec.EndOverflowed(arrived, http.StatusGatewayTimeout, measure.UpstreamTimeout)
		default:
			// Accepted, then broken: the app of another pod may have seen it, so
			// it is never sent again.
			p.log.Debug("overflow relay", zap.Error(err))
			http.Error(mw, "qas-proxy: pooled upstream failed", http.StatusBadGateway)
			p.rec.EndOverflowed(arrived, http.StatusBadGateway, measure.UpstreamError)
		}
		return true, nil
	}
	recorded := false
	defer func() {
		if v := recover(); v != nil {
			if !recorded {
				outcome := measure.UpstreamError
				if r.Context().Err() != nil {
					outcome = measure.ClientCancel
				}
				p.rec.EndOverflowed(arrived, mw.status(), outcome)
			}
			panic(v)
		}
	}()
	if answer == pool.Expired {
		// HeaderExpired is between the front and this sidecar.
		delete(resp.Header, pool.HeaderExpired)
	}
	ctx := context.WithValue(r.Context(), cannedKey{}, resp)
	p.relay.ServeHTTP(mw, r.WithContext(ctx))
	recorded = true
	p.rec.EndOverflowed(arrived, mw.status(), measure.OK)
	return true, nil
}

// servePulled serves a request pulled from a front in the slot the caller holds:
// straight to the app (it is never overflowed again: hop limit 1), its response
// written to out as an HTTP/1.1 message, measured as this proxy's own request
// except for its latency and status code, which the sender observes
// (Recorder.EndPulled).
func (p *Proxy) servePulled(req *http.Request, out io.Writer) {
	p.rec.ArrivePulled()
	began := p.rec.Begin()
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host = "http", p.upstream
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // none, as the client sent none
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := p.transport.RoundTrip(req.WithContext(ctx))
	if err != nil {
		code, outcome, text := http.StatusBadGateway, measure.UpstreamError, "Bad Gateway"
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			code, outcome, text = http.StatusGatewayTimeout, measure.UpstreamTimeout, "Gateway Timeout"
		}
		p.log.Debug("pulled request upstream", zap.Error(err))
		msg := "qas-proxy: upstream " + strings.ToLower(text) + "\n"
		_, _ = io.WriteString(out, "HTTP/1.1 "+strconv.Itoa(code)+" "+text+"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "+
			strconv.Itoa(len(msg))+"\r\n\r\n"+msg)
		p.rec.EndPulled(began, 0, outcome)
		return
	}
	ttfb := max(p.rec.Now().Sub(began), 1)
	outcome := measure.OK
	if werr := resp.Write(out); werr != nil {
		outcome = measure.ClientCancel
		p.log.Debug("pulled request relay", zap.Error(werr))
	}
	resp.Body.Close()
	p.rec.EndPulled(began, ttfb, outcome)
}
