package fastpath

import (
	"bytes"
	"iter"
)

// field is one header line of a head, as offsets into it.
type field struct {
	start, end int // the line, CRLF included
	name       [2]int
	value      [2]int // trimmed of optional white space
	drop       bool   // not forwarded (hop-by-hop, or replaced by the proxy)
	kind       hdr    // which of the names the fast path looks at
}

// maxFields bounds the header lines of a head the fast path handles; more go to the
// general path (requests) or fail (responses).
const maxFields = 100

// maxConnTokens bounds the header names a Connection header may list.
const maxConnTokens = 16

// requestHead is a parsed HTTP/1.1 request head that the fast path can forward.
type requestHead struct {
	fields        []field
	lineEnd       int // end of the request line, CRLF included
	host          [2]int
	contentLength int64 // -1: no body
	close         bool  // the client asked to close after this response
	xff           int   // X-Forwarded-For fields, combined into one by writeUpstreamHead
	// idempotencyKey: the request has an Idempotency-Key or X-Idempotency-Key field,
	// which makes it one net/http's Transport resends.
	idempotencyKey bool
	// dropQas (set per connection, not per request) drops the fields whose names
	// start with "Qas-": the pooled data plane's, which no client may send the app.
	dropQas bool
}

// responseHead is a parsed response head from the application.
type responseHead struct {
	fields        []field
	code          int
	status        [2]int // "200 OK": the code and the reason phrase
	contentLength int64  // -1: not given
	chunked       bool
	close         bool // the application will close the connection after it
}

// headEnd returns the length of the head at the start of b (through the empty line
// that ends it), or -1 if b holds no complete head. Lines may end in CRLF or LF.
func headEnd(b []byte, from int) int {
	for i := max(from, 0); i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j
		// i is at a '\n'; an empty line follows if the next is "\n" or "\r\n".
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

// alnumAnd is a byte class: ASCII letters and digits, and extra.
func alnumAnd(extra string) (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

// tokenChar is RFC 9110's tchar.
var tokenChar = alnumAnd("!#$%&'*+-.^_`|~")

// targetChar is what the fast path forwards unchanged in an origin-form request
// target: unreserved, sub-delims, ':', '@', '/', '?' and '%' (escapes are checked
// apart). Anything else is left to the general path, which rejects or normalises it as
// net/http does.
var targetChar = alnumAnd("-._~!$&'()*+,;=:@/?%")

// hostChar is what the fast path accepts in a Host header: names, IPv4 and IPv6
// literals, and a port.
var hostChar = alnumAnd("-._:[]")

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// validTarget reports whether t is an origin-form target the fast path forwards as is.
func validTarget(t []byte) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !targetChar[c] {
			return false
		}
		if c == '%' && (i+2 >= len(t) || !isHex(t[i+1]) || !isHex(t[i+2])) {
			return false
		}
	}
	return true
}

// parseFields splits the header lines of head[from:] (which ends with the empty line)
// into fields, appending to fs. It fails on anything but "name: value" lines with a
// token name and a value free of control characters other than tab, each ending in
// CRLF.
func parseFields(head []byte, from int, fs []field) ([]field, bool) {
	i := from
	for {
		j := bytes.IndexByte(head[i:], '\n')
		if j < 1 || head[i+j-1] != '\r' {
			return fs, false // bare LF, or no line end
		}
		lineEnd := i + j + 1
		line := head[i : i+j-1]
		if len(line) == 0 {
			return fs, lineEnd == len(head)
		}
		if len(fs) == maxFields {
			return fs, false
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 1 {
			return fs, false // also rejects obs-fold (a line starting with white space)
		}
		for _, c := range line[:colon] {
			if !tokenChar[c] {
				return fs, false
			}
		}
		vs, ve := colon+1, len(line)
		for vs < ve && (line[vs] == ' ' || line[vs] == '\t') {
			vs++
		}
		for ve > vs && (line[ve-1] == ' ' || line[ve-1] == '\t') {
			ve--
		}
		for _, c := range line[vs:ve] {
			if c < ' ' && c != '\t' || c == 0x7f {
				return fs, false
			}
		}
		fs = append(fs, field{start: i, end: lineEnd, name: [2]int{i, i + colon}, value: [2]int{i + vs, i + ve}})
		i = lineEnd
	}
}

// parseDecimal parses a Content-Length value: 1 to 18 digits.
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// connTokens splits a Connection header value into its comma-separated tokens,
// calling f with each; f returns false to stop.
func connTokens(v []byte, f func(tok []byte) bool) bool {
	for len(v) > 0 {
		var tok []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			tok, v = v, nil
		}
		tok = bytes.Trim(tok, " \t")
		if len(tok) == 0 {
			continue
		}
		if !f(tok) {
			return false
		}
	}
	return true
}

// connHeader collects what Connection fields say: the connection options close,
// keep-alive and upgrade, and the header names they list, which are hop-by-hop and
// dropped with them.
type connHeader struct {
	close, keepAlive, upgrade bool
	n                         int
	names                     [maxConnTokens][2]int
}

// add marks f, a Connection field with value value, as hop-by-hop and notes its
// options and names. It reports false if the field lists too many names.
func (cn *connHeader) add(f *field, value []byte) bool {
	f.drop = true
	return connTokens(value, func(tok []byte) bool {
		switch {
		case bytes.EqualFold(tok, tClose):
			cn.close = true
		case bytes.EqualFold(tok, tKeepAlive):
			cn.keepAlive = true
		case bytes.EqualFold(tok, tUpgrade):
			cn.upgrade = true
		case cn.n == maxConnTokens:
			return false
		default:
			off := f.value[0] + bytes.Index(value, tok)
			cn.names[cn.n] = [2]int{off, off + len(tok)}
			cn.n++
		}
		return true
	})
}

// drop marks the fields named by Connection tokens as hop-by-hop. The framing fields
// (Content-Length, Transfer-Encoding) and Host are never hop-by-hop, whatever
// Connection names (RFC 9110 §7.6.1 lets a proxy keep them, and RFC 9112 §6.3 makes
// them end-to-end): dropping Content-Length while forwarding the body would let the
// body reach the application as a second request.
func (cn *connHeader) drop(head []byte, fs []field) {
	for _, n := range cn.names[:cn.n] {
		name := head[n[0]:n[1]]
		for i := range fs {
			switch fs[i].kind {
			case hdrContentLength, hdrTransferEncoding, hdrHost:
				continue
			}
			if bytes.EqualFold(head[fs[i].name[0]:fs[i].name[1]], name) {
				fs[i].drop = true
			}
		}
	}
}

// hdr is a header name the fast path looks at.
type hdr uint8

const (
	hdrOther hdr = iota
	hdrConnection
	hdrContentLength
	hdrExpect
	hdrForwarded
	hdrHost
	hdrHTTP2Settings
	hdrIdempotencyKey
	hdrXIdempotencyKey
	hdrKeepAlive
	hdrProxyAuthn
	hdrProxyAuthz
	hdrProxyConnection
	hdrTE
	hdrTrailer
	hdrTransferEncoding
	hdrUpgrade
	hdrXForwardedFor
	hdrXForwardedHost
	hdrXForwardedProto
)

// hdrNames are the names of the hdrs, lower case.
var hdrNames = [...]string{
	hdrConnection: "connection", hdrContentLength: "content-length", hdrExpect: "expect",
	hdrForwarded: "forwarded", hdrHost: "host", hdrHTTP2Settings: "http2-settings",
	hdrIdempotencyKey: "idempotency-key", hdrXIdempotencyKey: "x-idempotency-key",
	hdrKeepAlive: "keep-alive", hdrProxyAuthn: "proxy-authenticate", hdrProxyAuthz: "proxy-authorization",
	hdrProxyConnection: "proxy-connection", hdrTE: "te", hdrTrailer: "trailer",
	hdrTransferEncoding: "transfer-encoding", hdrUpgrade: "upgrade", hdrXForwardedFor: "x-forwarded-for",
	hdrXForwardedHost: "x-forwarded-host", hdrXForwardedProto: "x-forwarded-proto",
}

// hdrsByLen lists the hdrs by the length of their names, so that a header line is
// compared with one or two names rather than all of them.
var hdrsByLen = func() (t [20][]hdr) {
	for h, name := range hdrNames {
		if name != "" {
			t[len(name)] = append(t[len(name)], hdr(h))
		}
	}
	return t
}()

// lookupHdr returns the hdr that name is, ignoring case, or hdrOther.
func lookupHdr(name []byte) hdr {
	if len(name) >= len(hdrsByLen) {
		return hdrOther
	}
	for _, h := range hdrsByLen[len(name)] {
		if asciiEqualFold(name, hdrNames[h]) {
			return h
		}
	}
	return hdrOther
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if c := b[i]; c != s[i] && ('A' > c || c > 'Z' || c+('a'-'A') != s[i]) {
			return false
		}
	}
	return true
}

// Connection and Transfer-Encoding tokens, lower case.
var (
	tClose     = []byte("close")
	tKeepAlive = []byte("keep-alive")
	tChunked   = []byte("chunked")
	tUpgrade   = []byte("upgrade")
)

// verdict is what the fast path does with a request head.
type verdict uint8

const (
	// handOver: the general path serves the connection from this request on.
	handOver verdict = iota
	// forward: the fast path forwards the request.
	forward
	// refuse: the request's framing is ambiguous (RFC 9112 §6.3: Content-Length
	// with Transfer-Encoding, or Content-Length values that disagree); it is
	// answered 400 and the connection closed, as a message another parser may frame
	// differently must reach no one.
	refuse
)

// parseRequest parses a complete request head (through its empty line) into h,
// reusing h's storage. It returns handOver for anything the fast path leaves to the
// general path: not HTTP/1.1, CONNECT, a target that is not plain origin-form, Upgrade, Expect,
// a request body that is not a single Content-Length, TE, HTTP2-Settings, a missing or
// repeated Host, or any line net/http would parse differently or reject; and refuse
// for an ambiguous length, whatever else the head holds.
func parseRequest(head []byte, h *requestHead) verdict {
	h.fields, h.contentLength, h.close, h.host, h.xff, h.idempotencyKey = h.fields[:0], -1, false, [2]int{}, 0, false
	nl := bytes.IndexByte(head, '\n')
	if nl < 1 || head[nl-1] != '\r' {
		return ambiguity(head)
	}
	line := head[:nl-1]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 1 {
		return ambiguity(head)
	}
	for _, c := range line[:sp1] {
		if !tokenChar[c] {
			return ambiguity(head)
		}
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 || !validTarget(rest[:sp2]) || string(rest[sp2+1:]) != "HTTP/1.1" {
		return ambiguity(head)
	}
	h.lineEnd = nl + 1
	var ok bool
	if h.fields, ok = parseFields(head, h.lineEnd, h.fields); !ok {
		return ambiguity(head)
	}
	var conn connHeader
	hosts, lengths := 0, 0
	v := forward
	if asciiEqualFold(line[:sp1], "connect") {
		// The general path refuses a CONNECT, in any case (the proxy opens no
		// tunnel), and closes the connection.
		v = handOver
	}
	te := false
	for i := range h.fields {
		f := &h.fields[i]
		name := head[f.name[0]:f.name[1]]
		value := head[f.value[0]:f.value[1]]
		f.kind = lookupHdr(name)
		switch f.kind {
		case hdrHost:
			hosts++
			if len(value) == 0 {
				v = handOver
			}
			for _, c := range value {
				if !hostChar[c] {
					v = handOver
				}
			}
			h.host = f.value
		case hdrContentLength:
			lengths++
			n, ok := parseDecimal(value)
			switch {
			case !ok:
				// Not one plain number: a list ("5, 5" or "5, 6") or
				// garbage. Its values are checked for agreement below.
				v = handOver
				continue
			case h.contentLength >= 0 && h.contentLength != n:
				return refuse
			case h.contentLength >= 0:
				v = handOver // the same value twice: net/http takes it
			}
			h.contentLength = n
		case hdrConnection:
			if !conn.add(f, value) {
				v = handOver
			}
		case hdrTransferEncoding:
			te = true
		case hdrUpgrade, hdrExpect, hdrTE, hdrHTTP2Settings:
			v = handOver
		case hdrKeepAlive, hdrProxyConnection, hdrProxyAuthn, hdrProxyAuthz, hdrTrailer:
			f.drop = true
		case hdrIdempotencyKey, hdrXIdempotencyKey:
			h.idempotencyKey = true
		case hdrXForwardedFor:
			// Not forwarded as is: writeUpstreamHead writes one X-Forwarded-For with
			// these fields' values and the client's address. X-Forwarded-Host,
			// X-Forwarded-Proto and Forwarded pass through.
			h.xff++
		case hdrOther:
			if h.dropQas && len(name) >= 4 && asciiEqualFold(name[:4], "qas-") {
				f.drop = true
			}
		}
	}
	if te && lengths > 0 {
		return refuse
	}
	if v == handOver && lengths > 0 {
		// A length that is a list: refused if its values disagree.
		return ambiguity(head)
	}
	if te || hosts != 1 || conn.upgrade {
		return handOver
	}
	if v != forward {
		return v
	}
	h.close = conn.close
	conn.drop(head, h.fields)
	return forward
}

// errHead describes why a response head could not be used.
type errHead string

func (e errHead) Error() string { return "malformed response from the application: " + string(e) }

// parseResponse parses a complete response head (through its empty line) into h,
// reusing h's storage. head is a response to a request whose method was head (HEAD
// responses have no body whatever their headers say).
func parseResponse(head []byte, h *responseHead) error {
	h.fields, h.contentLength, h.chunked, h.close = h.fields[:0], -1, false, false
	nl := bytes.IndexByte(head, '\n')
	if nl < 1 || head[nl-1] != '\r' {
		return errHead("status line")
	}
	line := head[:nl-1]
	var http10 bool
	switch {
	case bytes.HasPrefix(line, []byte("HTTP/1.1 ")):
	case bytes.HasPrefix(line, []byte("HTTP/1.0 ")):
		http10 = true
	default:
		return errHead("status line")
	}
	st := line[len("HTTP/1.1 "):]
	if len(st) < 3 || len(st) > 3 && st[3] != ' ' {
		return errHead("status code")
	}
	h.code = 0
	for _, c := range st[:3] {
		if c < '0' || c > '9' {
			return errHead("status code")
		}
		h.code = h.code*10 + int(c-'0')
	}
	if h.code < 100 {
		return errHead("status code")
	}
	for _, c := range st {
		if c < ' ' && c != '\t' || c == 0x7f {
			return errHead("status line")
		}
	}
	h.status = [2]int{len("HTTP/1.1 "), nl - 1}
	var ok bool
	if h.fields, ok = parseFields(head, nl+1, h.fields); !ok {
		return errHead("header line")
	}
	var conn connHeader
	for i := range h.fields {
		f := &h.fields[i]
		name := head[f.name[0]:f.name[1]]
		value := head[f.value[0]:f.value[1]]
		f.kind = lookupHdr(name)
		switch f.kind {
		case hdrContentLength:
			n, ok := parseDecimal(value)
			if !ok || h.contentLength >= 0 && h.contentLength != n {
				return errHead("Content-Length")
			}
			h.contentLength = n
		case hdrTransferEncoding:
			if http10 {
				// HTTP/1.0 has no transfer codings: ignored (and not forwarded), as
				// net/http does, so the body runs to Content-Length or to the close.
				f.drop = true
				break
			}
			if !bytes.EqualFold(value, tChunked) || h.chunked {
				return errHead("Transfer-Encoding")
			}
			h.chunked = true
			f.drop = true
		case hdrConnection:
			if !conn.add(f, value) {
				return errHead("Connection")
			}
		case hdrKeepAlive, hdrProxyConnection, hdrProxyAuthn, hdrProxyAuthz, hdrTE, hdrUpgrade:
			f.drop = true
		}
	}
	// As net/http's shouldClose: HTTP/1.1 closes on "close"; HTTP/1.0 also unless
	// it asks for keep-alive.
	h.close = conn.close || http10 && !conn.keepAlive
	if h.chunked && h.contentLength >= 0 {
		// A chunked message's Content-Length is meaningless (RFC 9112 §6.3) and is
		// not forwarded.
		h.contentLength = -1
		for i := range h.fields {
			if h.fields[i].kind == hdrContentLength {
				h.fields[i].drop = true
			}
		}
	}
	conn.drop(head, h.fields)
	return nil
}

// ambiguity returns refuse if head, a request head the fast path does not parse
// itself, has an ambiguous length (AmbiguousLength), and handOver otherwise.
func ambiguity(head []byte) verdict {
	if AmbiguousLength(head) {
		return refuse
	}
	return handOver
}

// AmbiguousLength reports whether the request head (through its empty line) frames
// its body ambiguously in the sense of RFC 9112 §6.3: a Transfer-Encoding field
// together with a Content-Length field, or Content-Length values that disagree. It
// reads the head as leniently as any parser might (lines ending in LF or CRLF, names
// in any case, white space before the colon, values as comma-separated lists), so that
// whatever another parser takes for a framing field counts here.
func AmbiguousLength(head []byte) bool {
	te, cl := false, int64(-1)
	for name, value := range fieldLines(head) {
		if len(name) > 0 && (name[0] == ' ' || name[0] == '\t') {
			continue // a continuation line
		}
		switch lookupHdr(name) {
		case hdrTransferEncoding:
			te = true
		case hdrContentLength:
			ambiguous := false
			connTokens(value, func(tok []byte) bool {
				n, ok := parseDecimal(tok)
				if !ok {
					// Garbage: every parser refuses it; not a second framing.
					return true
				}
				if cl >= 0 && cl != n {
					ambiguous = true
					return false
				}
				cl = n
				return true
			})
			if ambiguous {
				return true
			}
			if cl < 0 {
				cl = -2 // present, unparsable
			}
		}
	}
	return te && cl != -1
}

// fieldLines yields the name and value of each line of a request head after the
// request line that has a colon, read as leniently as any parser might: lines end in
// LF or CRLF, a name keeps leading white space (a continuation line) but not trailing,
// and a value is everything after the colon but a final CR. Lines without a colon (the
// empty line, garbage) are skipped.
func fieldLines(head []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		lines := head
		if nl := bytes.IndexByte(lines, '\n'); nl >= 0 {
			lines = lines[nl+1:] // the request line
		}
		for len(lines) > 0 {
			var line []byte
			if nl := bytes.IndexByte(lines, '\n'); nl >= 0 {
				line, lines = lines[:nl], lines[nl+1:]
			} else {
				line, lines = lines, nil
			}
			colon := bytes.IndexByte(line, ':')
			if colon < 0 {
				continue
			}
			if !yield(bytes.TrimRight(line[:colon], " \t"), bytes.TrimRight(line[colon+1:], "\r")) {
				return
			}
		}
	}
}
