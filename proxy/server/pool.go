package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
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

// mobility says whether a request may be sent to another pod.
type mobility uint8

const (
	// stays: served here.
	stays mobility = iota
	// moves: a body of known length within the pool's bound.
	moves
	// movesOnceRead: an HTTP/2 body of unknown length (a gRPC call's), which may
	// move once it has been read ahead whole within the bound and the deadline
	// (Proxy.readAhead).
	movesOnceRead
)

// mobility says whether r may be sent to another pod. HTTP/1.1 without
// Transfer-Encoding, Upgrade or Connection: upgrade; or HTTP/2 with an :authority,
// no declared trailers, and a content-length field, if any, equal to the length the
// request has (net/http's HTTP/2 server has refused connection-specific fields, a
// TE other than "trailers", a Host other than :authority, and CR, LF and NUL in
// any field). Either one not CONNECT, without Expect, with a body within the pool's
// bound. What overflowHead writes must parse as this request and nothing else, so
// the method is a token, the target is in origin form of visible ASCII, Host is
// valid, and every field name and value is valid: checked here, whatever the
// server in front checked. Everything else is served here.
func (p *Proxy) mobility(r *http.Request) mobility {
	switch {
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		if len(r.TransferEncoding) > 0 || len(r.Header["Upgrade"]) > 0 ||
			httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") {
			return stays
		}
	case r.ProtoMajor == 2 && r.ProtoMinor == 0:
		// Without :authority the local path sends the app its own address as
		// Host, which another pod's app would not get; a request's trailers
		// would not survive a Content-Length.
		if r.Host == "" || r.Trailer != nil {
			return stays
		}
		// net/http's HTTP/2 server takes a content-length it cannot parse for 0
		// while DATA may follow (then resets the stream), and ignores one on a
		// request that has ended: only a field that states the length it has is
		// taken at its word.
		if cl, ok := r.Header["Content-Length"]; ok && (len(cl) != 1 || cl[0] != strconv.FormatInt(r.ContentLength, 10)) {
			return stays
		}
	default:
		return stays
	}
	if r.Method == http.MethodConnect || !httpguts.ValidHeaderFieldName(r.Method) || len(r.Header["Expect"]) > 0 ||
		!originForm(r.URL.RequestURI()) || !httpguts.ValidHostHeader(r.Host) || !validFields(r.Header) {
		return stays
	}
	switch {
	case r.ContentLength >= 0 && r.ContentLength <= p.pool.MaxBody():
		return moves
	case r.ContentLength < 0 && r.ProtoMajor == 2:
		return movesOnceRead
	}
	return stays
}

// originForm reports whether target is an origin-form request target of visible
// ASCII (RFC 9112 section 3.2.1), so that it cannot split a request line.
func originForm(target string) bool {
	if !strings.HasPrefix(target, "/") {
		return false
	}
	for i := range len(target) {
		if target[i] <= ' ' || target[i] >= 0x7f {
			return false
		}
	}
	return true
}

// validFields reports whether every field name is a token and every value is free
// of control characters other than tab.
func validFields(h http.Header) bool {
	for name, vs := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			return false
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
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
	return n <= p.keepMax && p.reserveBytes(n)
}

// overflow offers r to a front (drained: r left this draining pod's local queue to
// be offered). It returns answered when the response was relayed (the request is
// recorded as overflowed). Otherwise r is to be served here, and it is untouched:
// the front did not accept it in time and nothing of it was read, or the front gave
// it back unseen and its bytes were kept (r.Body gives them again); release, when
// not nil, frees the kept bytes once the request ends. A body read ahead (an
// *aheadBody) is in memory already: it is sent from there and never read or kept
// again.
func (p *Proxy) overflow(w http.ResponseWriter, r *http.Request, arrived time.Time, drained bool) (answered bool, release func()) {
	var body io.Reader = http.NoBody
	var cb *clientBody
	var kept *keptBody
	ahead, _ := r.Body.(*aheadBody)
	switch {
	case r.ContentLength > 0 && ahead != nil:
		body = bytes.NewReader(ahead.data)
	case r.ContentLength > 0:
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
		switch {
		case r.ContentLength > 0 && ahead != nil:
			again = ahead.data // r.Body gives it, unread
		case r.ContentLength > 0 && kept != nil:
			again = kept.whole(r.ContentLength)
			if again != nil {
				r.Body = io.NopCloser(bytes.NewReader(again))
			}
		}
		if r.ContentLength == 0 || again != nil {
			resp.Body.Close()
			p.poolCounters.Expired(true)
			return false, release
		}
		p.poolCounters.Expired(false)
	}
	release()
	if drained {
		p.poolCounters.DrainPushed()
	}
	mw := &measuringWriter{ResponseWriter: w, began: arrived, rec: p.rec}
	if r.ProtoMajor == 1 {
		// A failed body leaves an HTTP/1 connection's framing lost, so the
		// answer closes it; an HTTP/2 stream's end is framed apart.
		mw.body = cb
	}
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
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
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

// writeCarried writes resp, the app's response to a pulled request (method), to out
// as an HTTP/1.1 message for the front to relay to the sender. http.Response.Write
// would not do for an HTTP/2 (h2c) app: it writes the version the response came
// with, "HTTP/2.0", frames a body of unknown length by closing, and drops the
// trailers the app did not announce (gRPC's status among them). Here the status,
// the fields and the body are the app's, framed as HTTP/1.1: a body that an
// HTTP/1.1 app framed by its length keeps its Content-Length, as does an HTTP/2
// app's body of declared length up to carriedWhole bytes when no trailer follows
// it; every other body is chunked (an HTTP/2 app may send trailers after any
// body), followed by every trailer the app sent, announced (Trailer) or not. Each
// read of the app's body is written at once, so streams stream.
func writeCarried(out io.Writer, resp *http.Response, method string) error {
	// The trailers announced before the body, not those that came after it.
	announced := slices.Sorted(maps.Keys(resp.Trailer))
	var head bytes.Buffer
	text := strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)+" ")
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	head.WriteString("HTTP/1.1 " + strconv.Itoa(resp.StatusCode) + " " + text + "\r\n")
	h := resp.Header.Clone()
	for _, name := range []string{"Content-Length", "Transfer-Encoding", "Trailer"} {
		delete(h, name)
	}
	_ = h.Write(&head)
	noBody := method == http.MethodHead || resp.StatusCode/100 == 1 || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified
	chunked := false
	switch {
	case noBody:
		// A HEAD response's length is the GET's, a 304's the cached one's.
		if cl := resp.Header["Content-Length"]; len(cl) == 1 && resp.StatusCode != http.StatusNoContent && resp.StatusCode/100 != 1 {
			if _, err := strconv.ParseUint(cl[0], 10, 63); err == nil {
				head.WriteString("Content-Length: " + cl[0] + "\r\n")
			}
		}
	case resp.ProtoMajor == 1 && resp.ContentLength >= 0:
		head.WriteString("Content-Length: " + strconv.FormatInt(resp.ContentLength, 10) + "\r\n")
	case resp.ContentLength >= 0 && resp.ContentLength <= carriedWhole:
		// An HTTP/2 app's short body of declared length (Go's server declares
		// it for whatever a handler wrote in one go) may still be followed by
		// trailers: it is read whole, then framed by its length if none was
		// announced or came, as the local path relays it.
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if len(resp.Trailer) == 0 {
			head.WriteString("Content-Length: " + strconv.Itoa(len(b)) + "\r\n\r\n")
			_, err = out.Write(append(head.Bytes(), b...))
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		chunked = true
	default:
		chunked = true
	}
	if chunked {
		if len(announced) > 0 {
			head.WriteString("Trailer: " + strings.Join(announced, ", ") + "\r\n")
		}
		head.WriteString("Transfer-Encoding: chunked\r\n")
	}
	head.WriteString("\r\n")
	if _, err := out.Write(head.Bytes()); err != nil {
		return err
	}
	if noBody {
		return nil
	}
	buf := make([]byte, 32<<10)
	var chunk []byte
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			b := buf[:n]
			if chunked {
				chunk = strconv.AppendInt(chunk[:0], int64(n), 16)
				chunk = append(chunk, "\r\n"...)
				chunk = append(append(chunk, b...), "\r\n"...)
				b = chunk
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// No last chunk: the sender sees a cut-off response, never a whole one.
			return rerr
		}
	}
	if !chunked {
		return nil
	}
	// The trailers are complete once the body has ended.
	var tail bytes.Buffer
	tail.WriteString("0\r\n")
	_ = resp.Trailer.Write(&tail)
	tail.WriteString("\r\n")
	_, err := out.Write(tail.Bytes())
	return err
}

// carriedWhole is the longest HTTP/2 app body of declared length that a puller
// reads whole before framing it, to keep its Content-Length if no trailer follows.
const carriedWhole = 64 << 10

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
	if werr := writeCarried(out, resp, req.Method); werr != nil {
		// The response did not reach the front whole (the sender's client left,
		// the front or the sender failed, or the app broke it off): no failure
		// here, as the sender counts what its client felt, the cancel or the
		// cut-off response included, so the merged counts hold it once.
		p.log.Debug("pulled request relay", zap.Error(werr))
	}
	resp.Body.Close()
	p.rec.EndPulled(began, ttfb, measure.OK)
}
