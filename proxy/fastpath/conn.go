package fastpath

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/qas-dev/qas/proxy/limit"
	"github.com/qas-dev/qas/proxy/measure"
)

// Connection states, for Shutdown.
const (
	stateNew int32 = iota
	stateActive
	stateIdle
	stateClosed
)

// watchTick is how often the server's sweeper runs. It looks for requests that have
// waited for the application between one and two ticks, and starts watching their
// clients for leaving. Watching costs a goroutine and two system calls; fast requests
// never need it, and a client that leaves is still noticed within two ticks, and its
// request cancelled upstream by closing the application connection. The sweeper also
// keeps the idle and upstream timeouts, to within a tick, so that no request sets or
// clears a deadline.
const watchTick = 10 * time.Millisecond

// States of the wait for a response head from the application.
const (
	upDone int32 = iota
	upWaiting
	upTimedOut
)

// Watcher states.
const (
	watchOff int32 = iota
	watchArmed
	watchRunning
)

// aLongTimeAgo is a deadline in the past, to interrupt a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one client connection on the fast path.
type conn struct {
	s        *Server
	rwc      net.Conn
	sock     *sock // rwc's socket for raw reads and writes; nil: use rwc
	br       *bufio.Reader
	bw       *bufio.Writer
	state    atomic.Int32
	accepted time.Time
	clientIP string
	req      requestHead
	resp     responseHead

	// The watcher: a read on the client connection while its request is with the
	// application, which sees the client leave.
	watchState atomic.Int32
	armedGen   atomic.Uint64
	aborting   atomic.Bool
	dlMu       sync.Mutex // orders the watcher's and disarm's deadline changes
	watchDone  chan struct{}
	gone       atomic.Bool
	goneCh     chan struct{}
	up         atomic.Pointer[upConn]
	stash      [1]byte
	stashed    bool

	// Timeouts kept by the sweeper (Server.sweep), in its generations.
	idleGen      atomic.Uint64 // when the connection last became idle
	upGen        atomic.Uint64 // when the wait for the application's response began
	upWait       atomic.Int32  // upDone, upWaiting or upTimedOut
	readDeadline bool          // a read deadline (the header timeout) is set

	// What the current copy waits on, for the sweeper's stall limits
	// (Config.ClientBodyTimeout, UpstreamWriteTimeout, ClientWriteTimeout).
	track tracker
	// The sweeper's own view of track (used by the sweeper goroutine only).
	seenMoved uint64
	seenPhase int32
	stallGen  uint64
	stalled   atomic.Int32 // the phase that stalled past its limit, if any

	// The early answer: while a request body is sent (sending), the sweeper looks
	// for a response from the application; if one has come (early), it interrupts
	// the body's copy, and the response is relayed at once.
	sendMu  sync.Mutex
	sending bool
	sendGen uint64
	early   bool
	noReuse bool // the application connection must not be pooled after this request

	// The current request's measurement.
	began time.Time
	ttfb  time.Duration
	code  int
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, rwc: nc, sock: newSock(nc), accepted: s.rec.Now(), watchDone: make(chan struct{}, 1), goneCh: make(chan struct{}, 1)}
	c.req.dropQas = s.cfg.HandOver != nil
	c.br = bufio.NewReaderSize(connReader{c}, s.readSize)
	if c.sock != nil {
		c.bw = bufio.NewWriterSize(c.sock, 4<<10)
	} else {
		c.bw = bufio.NewWriterSize(nc, 4<<10)
	}
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.clientIP = host
	}
	return c
}

// connReader reads the client connection, first giving back a byte the watcher read.
type connReader struct{ c *conn }

func (r connReader) Read(p []byte) (int, error) {
	if r.c.stashed && len(p) > 0 {
		p[0] = r.c.stash[0]
		r.c.stashed = false
		return 1, nil
	}
	if r.c.sock != nil {
		return r.c.sock.Read(p)
	}
	return r.c.rwc.Read(p)
}

func (c *conn) serve() {
	handed := false
	defer func() {
		c.s.forget(c)
		if !handed {
			c.rwc.Close()
		}
	}()
	for first := true; ; first = false {
		if !first {
			// The sweeper closes the connection if it stays idle too long (no
			// deadline to set and clear on every request); during the drain, after
			// drainIdle. It is not closed at once when the drain began after the last
			// response went out keep-alive: the client may have sent its next request
			// already, and closing with it unread resets the connection. That request
			// is served, and its response closes the connection.
			c.idleGen.Store(c.s.gen.Load())
			c.state.Store(stateIdle)
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			if !c.state.CompareAndSwap(stateIdle, stateActive) {
				return // closed by Shutdown
			}
		} else {
			c.setReadDeadline(c.accepted.Add(c.s.cfg.ReadHeaderTimeout))
			c.readDeadline = true
			if _, err := c.br.Peek(1); err != nil {
				return
			}
			if !c.state.CompareAndSwap(stateNew, stateActive) {
				return
			}
		}
		head, err := c.readHead()
		if err != nil {
			return // EOF, or a slow client cut off by the header deadline
		}
		v := handOver
		if head != nil {
			v = parseRequest(head, &c.req)
			if v == forward && c.s.cfg.HandOver != nil && c.s.cfg.HandOver() {
				v = handOver
			}
		}
		switch v {
		case handOver:
			handed = true
			c.handOver()
			return
		case refuse:
			// Not an arrival, as the general path's refusals are not: it never
			// reaches the application. Counted by reason, once: the fast path
			// never hands an ambiguous head over.
			c.s.rec.Refuse(measure.RefusedAmbiguousFraming)
			c.writeError(400, "qas-proxy: ambiguous request framing (RFC 9112 section 6.3)", "", true)
			_ = c.bw.Flush()
			return
		}
		if c.readDeadline {
			c.setReadDeadline(time.Time{})
			c.readDeadline = false
		}
		if !c.forward(head) {
			return
		}
	}
}

// setReadDeadline sets the client connection's read deadline, unless the watcher is
// being stopped.
func (c *conn) setReadDeadline(t time.Time) {
	c.dlMu.Lock()
	_ = c.rwc.SetReadDeadline(t)
	c.dlMu.Unlock()
}

// handOver gives the connection, with what was buffered of it, to the general path.
func (c *conn) handOver() {
	c.s.handedOver.Add(1)
	c.s.forget(c)
	_ = c.rwc.SetReadDeadline(time.Time{})
	c.s.fallback.push(Guard(&handedConn{Conn: c.rwc, br: c.br}, c.s.cfg.MaxHeaderBytes+4<<10, c.s.rec))
}

// readHead peeks at the client's bytes until a whole request head is buffered and
// returns it (still unread), or nil if it does not fit in the buffer. A head that did
// not come whole with its first bytes must come within ReadHeaderTimeout (from the
// connection's start for its first request, whose deadline is set already).
func (c *conn) readHead() ([]byte, error) {
	scanned := 0
	for {
		n := c.br.Buffered()
		b, _ := c.br.Peek(n)
		if e := headEnd(b, scanned-3); e >= 0 {
			return b[:e], nil
		}
		if !c.readDeadline {
			c.setReadDeadline(time.Now().Add(c.s.cfg.ReadHeaderTimeout))
			c.readDeadline = true
		}
		scanned = n
		if n == c.br.Size() {
			return nil, nil
		}
		if _, err := c.br.Peek(n + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// forward serves one parsed request and reports whether the connection stays open.
func (c *conn) forward(head []byte) bool {
	s := c.s
	arrived := s.rec.Arrive()
	s.served.Add(1)
	if s.lim != nil {
		c.arm(len(head))
		res := s.lim.Admit(s.rec, arrived, c.goneCh)
		c.disarm()
		switch res {
		case limit.Full:
			_, _ = c.br.Discard(len(head))
			closeAfter := c.req.close || c.req.contentLength > 0
			c.writeError(503, "qas-proxy: concurrency limit reached and queue full", "Retry-After: "+limit.RetryAfter+"\r\n", closeAfter)
			return c.bw.Flush() == nil && !closeAfter
		case limit.Gone:
			return false
		}
		defer s.lim.Release()
	}
	c.began, c.ttfb, c.code = s.rec.Begin(), 0, 0
	c.noReuse = false
	c.stalled.Store(phaseNone)
	outcome, keep := c.roundTrip(head)
	code := c.code
	if code == 0 {
		code = 200
	}
	s.rec.End(arrived, c.began, c.ttfb, code, outcome)
	// As on the general path, the request is recorded before the response's last
	// buffered bytes are flushed, so a client that has its response sees it counted.
	c.track.phase.Store(phaseClientWrite)
	err := c.bw.Flush()
	c.track.phase.Store(phaseNone)
	if err != nil {
		return false
	}
	// The connection's fate is what its response told the client: keep tells
	// whether the head said keep-alive (closeAfter when it was written). A drain
	// that began after that head went out does not close the connection here: the
	// client may have written its next request already, and closing with it
	// unread resets the connection under a request the client cannot know
	// unseen. That request is served, and its response says Connection: close.
	return keep && !c.req.close
}

// closeAfter reports whether the response must close the client connection.
func (c *conn) closeAfter() bool { return c.req.close || c.s.closing.Load() }

// roundTrip sends the request to the application and its response to the client.
//
// A request is sent again, on a new connection, only if the application provably
// read none of it or may read it twice: every reused connection is checked before
// anything is sent on it (pool.take: a connection the application closed or sent on
// while idle is never sent on, and the request goes out on another), and a request
// that then meets a connection closed without an answer is resent
// only if it has no body and its method is idempotent (RFC 9110 §9.2.2: GET, HEAD,
// OPTIONS, TRACE, as net/http's Transport resends, or it carries an Idempotency-Key).
func (c *conn) roundTrip(head []byte) (measure.Outcome, bool) {
	s := c.s
	isHead := string(head[:5]) == "HEAD "
	hasBody := c.req.contentLength > 0
	resend := !hasBody && (c.req.idempotencyKey || idempotent(head))
	consumed := false // the head is taken from the client's buffer once, whatever happens
	consume := func() {
		if !consumed {
			_, _ = c.br.Discard(len(head))
			consumed = true
		}
	}
	sent := false // the request went out once already
	for {
		var up *upConn
		var err error
		if !sent {
			// A request without a body is sent only by relay's first read, which
			// checks a reused connection first (pool.take); one with a body is
			// checked now, before any of its body is taken from the client.
			up, err = s.pool.take(!hasBody)
		} else {
			// A reused connection died under the request: the retry dials.
			up, err = s.pool.dial()
		}
		if err != nil {
			s.log.Debug("upstream dial", zap.Error(err))
			consume()
			return c.failed(measure.UpstreamError, hasBody)
		}
		// A request without a body is sent by relay's first read (deferSend), which
		// then waits for the reply without an empty read first.
		up.deferSend = !hasBody
		c.writeUpstreamHead(up.bw, head)
		consume()
		if hasBody {
			c.beginSend(up)
			rerr, werr := sink{w: up.bw, t: &c.track, readWait: phaseBodyRead, writeWait: phaseAppWrite}.copyN(c.br, c.req.contentLength)
			if c.endSend(up) && (rerr != nil || werr != nil) {
				// The application answered before taking the whole body (a
				// 413, a 401): its answer is relayed, the rest of the body is
				// never read, so both connections close after it.
				c.req.close, c.noReuse = true, true
				outcome, _, _ := c.relay(up, isHead, false)
				return outcome, false
			}
			if rerr != nil { // the client left, broke off its body, or stalled
				up.nc.Close()
				c.up.Store(nil)
				c.code = 499
				return measure.ClientCancel, false
			}
			if werr != nil {
				up.nc.Close()
				c.up.Store(nil)
				if c.stalled.Load() == phaseAppWrite {
					return c.failed(measure.UpstreamTimeout, true)
				}
				return c.failed(measure.UpstreamError, true)
			}
		}
		err = up.bw.Flush()
		up.deferSend = false
		retry := up.reused && resend && !sent
		if err != nil {
			up.nc.Close()
			if errors.Is(err, errStale) {
				continue // nothing was sent: another connection is taken
			}
			if retry {
				sent = true
				continue
			}
			return c.failed(measure.UpstreamError, hasBody)
		}
		outcome, keep, again := c.relay(up, isHead, retry)
		switch again {
		case againStale:
			continue
		case againResend:
			sent = true
			continue
		}
		return outcome, keep
	}
}

// What relay asks roundTrip to do again.
const (
	againNone   = iota
	againStale  // nothing was sent: the request goes out on another connection
	againResend // sent on a connection that closed without an answer: resent on a new one
)

// idempotent reports whether the request line's method is one net/http's Transport
// resends: GET, HEAD, OPTIONS or TRACE. PUT and DELETE are idempotent too, but an
// application may not implement them so, and net/http does not resend them.
func idempotent(head []byte) bool {
	switch head[0] {
	case 'G':
		return string(head[:4]) == "GET "
	case 'H':
		return string(head[:5]) == "HEAD "
	case 'O':
		return len(head) > 8 && string(head[:8]) == "OPTIONS "
	case 'T':
		return len(head) > 6 && string(head[:6]) == "TRACE "
	}
	return false
}

// relay reads the application's response and copies it to the client, all but the
// last buffered bytes, which forward flushes once the request is recorded. retryable
// says the request may be sent again on a new connection if this one turns out to
// have been closed by the application before answering.
func (c *conn) relay(up *upConn, isHead, retryable bool) (_ measure.Outcome, keep bool, again int) {
	s := c.s
	c.up.Store(up)
	c.arm(0)
	release := func(reuse bool) {
		c.disarm()
		c.up.Store(nil)
		if reuse && up.br.Buffered() == 0 && !c.gone.Load() && !c.noReuse {
			s.pool.put(up)
		} else {
			up.nc.Close()
		}
	}
	// The sweeper times the wait for the response head (upstreamTimedOut).
	c.upGen.Store(s.gen.Load())
	c.upWait.Store(upWaiting)
	defer c.upWait.Store(upDone)
	var h *responseHead
	var headLen int
	for {
		rh, n, err := c.readResponseHead(up, isHead)
		if err != nil {
			release(false)
			switch {
			case c.gone.Load():
				c.code = 499
				return measure.ClientCancel, false, againNone
			case errors.Is(err, errStale):
				return 0, false, againStale
			case c.upWait.Load() == upTimedOut:
				o, k := c.failed(measure.UpstreamTimeout, false)
				return o, k, againNone
			case retryable && n == 0:
				return 0, false, againResend
			}
			s.log.Debug("upstream response", zap.Error(err))
			o, k := c.failed(measure.UpstreamError, false)
			return o, k, againNone
		}
		h, headLen = rh, n
		if h.code >= 200 {
			if !c.upWait.CompareAndSwap(upWaiting, upDone) {
				// Timed out as the head came: answer as if it had not.
				release(false)
				o, k := c.failed(measure.UpstreamTimeout, false)
				return o, k, againNone
			}
			break
		}
		// 1xx: forwarded as they come; the final response follows.
		c.writeResponseHead(up, h, false, false)
		_, _ = up.br.Discard(n)
	}
	noBody := isHead || h.code == 204 || h.code == 304
	toEOF := !noBody && !h.chunked && h.contentLength < 0
	// The body may take its time (streams): only the head is timed.
	closeClient := c.closeAfter()
	c.writeResponseHead(up, h, h.chunked && !noBody || toEOF, closeClient)
	_, _ = up.br.Discard(headLen)
	out := sink{w: c.bw, t: &c.track, writeWait: phaseClientWrite}
	var rerr, werr error
	switch {
	case noBody:
	case h.chunked:
		rerr, werr = out.copyChunked(up.br)
	case toEOF:
		rerr, werr = out.copyToEOF(up.br)
	default:
		rerr, werr = out.copyN(up.br, h.contentLength)
	}
	release(rerr == nil && werr == nil && !h.close && !toEOF)
	switch {
	case werr != nil || c.gone.Load():
		return measure.ClientCancel, false, againNone
	case rerr != nil:
		s.log.Debug("upstream body", zap.Error(rerr))
		return measure.UpstreamError, false, againNone
	}
	return measure.OK, !closeClient, againNone
}

// readResponseHead reads a response head from the application. It returns the head's
// length and, on failure, how many bytes had arrived.
func (c *conn) readResponseHead(up *upConn, isHead bool) (*responseHead, int, error) {
	scanned := 0
	for {
		n := up.br.Buffered()
		b, _ := up.br.Peek(n)
		if e := headEnd(b, scanned-3); e >= 0 {
			if err := parseResponse(b[:e], &c.resp); err != nil {
				return nil, n, err
			}
			if c.resp.code == 101 {
				return nil, n, errHead("101 Switching Protocols to a request without Upgrade")
			}
			return &c.resp, e, nil
		}
		scanned = n
		if n == up.br.Size() {
			return nil, n, errHead("head larger than " + strconv.Itoa(upReadSize) + " bytes")
		}
		if _, err := up.br.Peek(n + 1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, n, err
		}
	}
}

// writeUpstreamHead writes the request head for the application: the client's,
// without hop-by-hop fields, and with the X-Forwarded fields a sidecar adds (as the
// general path's setForwarded does). X-Forwarded-For becomes one field: the client's
// X-Forwarded-For values in order, then the client's address. The client's
// X-Forwarded-Host and X-Forwarded-Proto are kept, and set to the Host and "http"
// only when absent, so that an app behind a TLS-terminating ingress still sees
// "https" and the public host. Forwarded passes through. Empty X-Forwarded values
// count as absent.
func (c *conn) writeUpstreamHead(w *bufio.Writer, head []byte) {
	h := &c.req
	_, _ = w.Write(head[:h.lineEnd])
	var hasHost, hasProto bool
	for i := range h.fields {
		f := &h.fields[i]
		if f.drop || f.kind == hdrXForwardedFor {
			continue
		}
		if f.kind == hdrXForwardedHost || f.kind == hdrXForwardedProto {
			if f.value[0] == f.value[1] {
				continue
			}
			hasHost = hasHost || f.kind == hdrXForwardedHost
			hasProto = hasProto || f.kind == hdrXForwardedProto
		}
		_, _ = w.Write(head[f.start:f.end])
	}
	sep := false
	if h.xff > 0 {
		for i := range h.fields {
			f := &h.fields[i]
			if f.kind != hdrXForwardedFor || f.drop || f.value[0] == f.value[1] {
				continue
			}
			if sep {
				_, _ = w.WriteString(", ")
			} else {
				_, _ = w.WriteString("X-Forwarded-For: ")
			}
			_, _ = w.Write(head[f.value[0]:f.value[1]])
			sep = true
		}
	}
	if c.clientIP != "" {
		if sep {
			_, _ = w.WriteString(", ")
		} else {
			_, _ = w.WriteString("X-Forwarded-For: ")
		}
		_, _ = w.WriteString(c.clientIP)
		sep = true
	}
	if sep {
		_, _ = w.WriteString("\r\n")
	}
	if !hasHost {
		_, _ = w.WriteString("X-Forwarded-Host: ")
		_, _ = w.Write(head[h.host[0]:h.host[1]])
		_, _ = w.WriteString("\r\n")
	}
	if !hasProto {
		_, _ = w.WriteString("X-Forwarded-Proto: http\r\n")
	}
	_, _ = w.WriteString("\r\n")
}

// writeResponseHead writes the application's response head to the client, without
// hop-by-hop fields.
func (c *conn) writeResponseHead(up *upConn, h *responseHead, chunked, closeConn bool) {
	if c.ttfb == 0 {
		c.ttfb = max(c.s.rec.Now().Sub(c.began), 1)
	}
	if h.code >= 200 {
		c.code = h.code
	}
	head, _ := up.br.Peek(up.br.Buffered())
	w := c.bw
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.Write(head[h.status[0]:h.status[1]])
	_, _ = w.WriteString("\r\n")
	for i := range h.fields {
		if f := &h.fields[i]; !f.drop {
			_, _ = w.Write(head[f.start:f.end])
		}
	}
	if chunked {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closeConn {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
}

// failed writes (without flushing) a 502 or 504 for an application that could not answer; unread says a
// request body may be left unread, so the connection must close.
func (c *conn) failed(o measure.Outcome, unread bool) (measure.Outcome, bool) {
	code, msg := 502, "qas-proxy: upstream unavailable"
	if o == measure.UpstreamTimeout {
		code, msg = 504, "qas-proxy: upstream timed out"
	}
	closeConn := unread || c.closeAfter()
	c.writeError(code, msg, "", closeConn)
	return o, !closeConn
}

// writeError writes a short text response as http.Error does.
func (c *conn) writeError(code int, msg, extra string, closeConn bool) {
	if c.ttfb == 0 && !c.began.IsZero() {
		c.ttfb = max(c.s.rec.Now().Sub(c.began), 1)
	}
	c.code = code
	w := c.bw
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.WriteString(strconv.Itoa(code))
	_, _ = w.WriteString(" ")
	_, _ = w.WriteString(statusText[code])
	_, _ = w.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.Itoa(len(msg) + 1))
	_, _ = w.WriteString("\r\n")
	_, _ = w.WriteString(extra)
	if closeConn {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
	_, _ = w.WriteString(msg)
	_, _ = w.WriteString("\n")
}

var statusText = map[int]string{400: "Bad Request", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}

// beginSend notes that the request body is being sent on up, for the sweeper's early
// answer check.
func (c *conn) beginSend(up *upConn) {
	c.up.Store(up)
	c.sendMu.Lock()
	c.sending, c.early, c.sendGen = true, false, c.s.gen.Load()
	c.sendMu.Unlock()
}

// endSend ends the body's sending and reports whether the application answered
// early; the deadlines the sweeper set to interrupt the copy are cleared.
func (c *conn) endSend(up *upConn) bool {
	c.sendMu.Lock()
	early := c.early
	c.sending, c.early = false, false
	c.sendMu.Unlock()
	if early {
		c.setReadDeadline(time.Time{})
		_ = up.nc.SetWriteDeadline(time.Time{})
	}
	return early
}

// checkEarly is called by the sweeper at generation gen: if a request body has been
// sent for at least a tick and the application has answered (or closed) meanwhile,
// the body's copy is interrupted so the answer reaches the client at once. A copy
// the sweeper has cut off (checkStall, just before) is not an early answer: the
// connection it closed reads as pending, and relaying it answered 502 where the
// stall's 504 was due (TestStallsAreCutOff, now and then under load).
func (c *conn) checkEarly(gen uint64) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if !c.sending || c.early || gen-c.sendGen < 1 || c.stalled.Load() != phaseNone {
		return
	}
	up := c.up.Load()
	if up == nil || !Pending(up.nc) {
		return
	}
	c.early = true
	c.dlMu.Lock()
	_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	c.dlMu.Unlock()
	_ = up.nc.SetWriteDeadline(aLongTimeAgo)
}

// checkStall is called by the sweeper at generation gen: a copy that has made no
// progress in its phase for longer than the phase's limit (in ticks; 0: none) is cut
// off by closing the connections it waits on.
func (c *conn) checkStall(gen uint64, limits *[4]uint64) {
	ph, moved := c.track.phase.Load(), c.track.moved.Load()
	if ph != c.seenPhase || moved != c.seenMoved || ph == phaseNone {
		c.seenPhase, c.seenMoved, c.stallGen = ph, moved, gen
		return
	}
	limit := limits[ph]
	if limit == 0 || gen-c.stallGen <= limit || !c.stalled.CompareAndSwap(phaseNone, ph) {
		return
	}
	up := c.up.Load()
	switch ph {
	case phaseAppWrite:
		if up != nil {
			up.nc.Close() // the client's request fails with 504; the client may go on
		}
	default:
		c.rwc.Close()
		if up != nil {
			up.nc.Close()
		}
	}
}

// arm has the sweeper start watching the client if the request is still with the
// application a tick from now, unless the client has already sent more than the
// pending bytes of this request still buffered (pipelining), which the watcher could
// not read without taking.
func (c *conn) arm(pending int) {
	if c.br.Buffered() > pending || c.stashed || c.gone.Load() {
		return
	}
	c.armedGen.Store(c.s.gen.Load())
	c.watchState.Store(watchArmed)
}

// disarm stops the watcher, interrupting its read if it has started.
func (c *conn) disarm() {
	if c.watchState.CompareAndSwap(watchArmed, watchOff) || c.watchState.Load() == watchOff {
		return
	}
	c.dlMu.Lock()
	c.aborting.Store(true)
	_ = c.rwc.SetReadDeadline(aLongTimeAgo)
	c.dlMu.Unlock()
	<-c.watchDone
	c.aborting.Store(false)
	c.watchState.Store(watchOff)
	c.setReadDeadline(time.Time{})
}

// expire is called by the sweeper at generation gen: it closes the connection if it
// has been idle for more than idleTicks generations, and times out a request whose
// response head has been awaited for more than upTicks (0: no limit).
func (c *conn) expire(gen, idleTicks, upTicks uint64) {
	if idleTicks > 0 && c.state.Load() == stateIdle && gen-c.idleGen.Load() > idleTicks &&
		c.state.CompareAndSwap(stateIdle, stateClosed) {
		c.rwc.Close()
		return
	}
	if upTicks > 0 && c.upWait.Load() == upWaiting && gen-c.upGen.Load() > upTicks &&
		c.upWait.CompareAndSwap(upWaiting, upTimedOut) {
		if up := c.up.Load(); up != nil {
			_ = up.nc.SetReadDeadline(aLongTimeAgo) // interrupts the read; the connection is not reused
		}
	}
}

// startWatch is called by the sweeper at generation gen: it starts the watcher if the
// connection has been armed since before the previous sweep.
func (c *conn) startWatch(gen uint64) {
	if c.watchState.Load() == watchArmed && gen-c.armedGen.Load() >= 2 &&
		c.watchState.CompareAndSwap(watchArmed, watchRunning) {
		go c.watch()
	}
}

// watch runs in its own goroutine: a byte read is kept for the next request; an
// error not caused by disarm means the client left, so the application connection is
// closed (which cancels the request there) and a queued request stops waiting.
func (c *conn) watch() {
	c.dlMu.Lock()
	if c.aborting.Load() {
		c.dlMu.Unlock()
		c.watchDone <- struct{}{}
		return
	}
	_ = c.rwc.SetReadDeadline(time.Time{}) // the idle or header deadline may be set
	c.dlMu.Unlock()
	n, err := c.rwc.Read(c.stash[:])
	if n == 1 {
		c.stashed = true
	} else if err != nil && !c.aborting.Load() {
		c.gone.Store(true)
		if up := c.up.Load(); up != nil {
			up.nc.Close()
		}
		select {
		case c.goneCh <- struct{}{}:
		default:
		}
	}
	c.watchDone <- struct{}{}
}
