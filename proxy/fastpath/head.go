package fastpath

import "bytes"

// field is one header line of a head, as offsets into it.
type field struct {
	start, end int // the line, CRLF included
	name       [2]int
	value      [2]int // trimmed of optional white space
	drop       bool   // not forwarded (hop-by-hop, or replaced by the proxy)
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

// dropNamed marks the fields named by Connection tokens as hop-by-hop.
func dropNamed(head []byte, fs []field, names [][2]int) {
	for _, n := range names {
		name := head[n[0]:n[1]]
		for i := range fs {
			if bytes.EqualFold(head[fs[i].name[0]:fs[i].name[1]], name) {
				fs[i].drop = true
			}
		}
	}
}

// Header names the fast path looks at, lower case.
var (
	hConnection       = []byte("connection")
	hContentLength    = []byte("content-length")
	hExpect           = []byte("expect")
	hForwarded        = []byte("forwarded")
	hHost             = []byte("host")
	hHTTP2Settings    = []byte("http2-settings")
	hKeepAlive        = []byte("keep-alive")
	hProxyAuthn       = []byte("proxy-authenticate")
	hProxyAuthz       = []byte("proxy-authorization")
	hProxyConnection  = []byte("proxy-connection")
	hTE               = []byte("te")
	hTrailer          = []byte("trailer")
	hTransferEncoding = []byte("transfer-encoding")
	hUpgrade          = []byte("upgrade")
	hXForwardedFor    = []byte("x-forwarded-for")
	hXForwardedHost   = []byte("x-forwarded-host")
	hXForwardedProto  = []byte("x-forwarded-proto")
	tClose            = []byte("close")
	tKeepAlive        = []byte("keep-alive")
	tChunked          = []byte("chunked")
)

// parseRequest parses a complete request head (through its empty line) into h,
// reusing h's storage. It reports false for anything the fast path leaves to the
// general path: not HTTP/1.1, a target that is not plain origin-form, Upgrade, Expect,
// a request body that is not a single Content-Length, TE, HTTP2-Settings, a missing or
// repeated Host, or any line net/http would parse differently or reject.
func parseRequest(head []byte, h *requestHead) bool {
	h.fields, h.contentLength, h.close, h.host = h.fields[:0], -1, false, [2]int{}
	nl := bytes.IndexByte(head, '\n')
	if nl < 1 || head[nl-1] != '\r' {
		return false
	}
	line := head[:nl-1]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 1 {
		return false
	}
	for _, c := range line[:sp1] {
		if !tokenChar[c] {
			return false
		}
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 || !validTarget(rest[:sp2]) || string(rest[sp2+1:]) != "HTTP/1.1" {
		return false
	}
	h.lineEnd = nl + 1
	var ok bool
	if h.fields, ok = parseFields(head, h.lineEnd, h.fields); !ok {
		return false
	}
	var names [maxConnTokens][2]int
	nNames, hosts := 0, 0
	for i := range h.fields {
		f := &h.fields[i]
		name := head[f.name[0]:f.name[1]]
		value := head[f.value[0]:f.value[1]]
		switch {
		case bytes.EqualFold(name, hHost):
			hosts++
			if len(value) == 0 {
				return false
			}
			for _, c := range value {
				if !hostChar[c] {
					return false
				}
			}
			h.host = f.value
		case bytes.EqualFold(name, hContentLength):
			n, ok := parseDecimal(value)
			if !ok || h.contentLength >= 0 {
				return false
			}
			h.contentLength = n
		case bytes.EqualFold(name, hConnection):
			f.drop = true
			ok := connTokens(value, func(tok []byte) bool {
				switch {
				case bytes.EqualFold(tok, tClose):
					h.close = true
				case bytes.EqualFold(tok, tKeepAlive):
				case bytes.EqualFold(tok, hUpgrade) || nNames == maxConnTokens:
					return false
				default:
					off := f.value[0] + bytes.Index(value, tok)
					names[nNames] = [2]int{off, off + len(tok)}
					nNames++
				}
				return true
			})
			if !ok {
				return false
			}
		case bytes.EqualFold(name, hTransferEncoding), bytes.EqualFold(name, hUpgrade),
			bytes.EqualFold(name, hExpect), bytes.EqualFold(name, hTE),
			bytes.EqualFold(name, hHTTP2Settings):
			return false
		case bytes.EqualFold(name, hKeepAlive), bytes.EqualFold(name, hProxyConnection),
			bytes.EqualFold(name, hProxyAuthn), bytes.EqualFold(name, hProxyAuthz),
			bytes.EqualFold(name, hTrailer),
			bytes.EqualFold(name, hForwarded), bytes.EqualFold(name, hXForwardedFor),
			bytes.EqualFold(name, hXForwardedHost), bytes.EqualFold(name, hXForwardedProto):
			f.drop = true
		}
	}
	if hosts != 1 {
		return false
	}
	dropNamed(head, h.fields, names[:nNames])
	return true
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
		http10, h.close = true, true
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
	var names [maxConnTokens][2]int
	nNames := 0
	for i := range h.fields {
		f := &h.fields[i]
		name := head[f.name[0]:f.name[1]]
		value := head[f.value[0]:f.value[1]]
		switch {
		case bytes.EqualFold(name, hContentLength):
			n, ok := parseDecimal(value)
			if !ok || h.contentLength >= 0 && h.contentLength != n {
				return errHead("Content-Length")
			}
			h.contentLength = n
		case bytes.EqualFold(name, hTransferEncoding):
			if !bytes.EqualFold(value, tChunked) || h.chunked {
				return errHead("Transfer-Encoding")
			}
			h.chunked = true
			f.drop = true
		case bytes.EqualFold(name, hConnection):
			f.drop = true
			ok := connTokens(value, func(tok []byte) bool {
				switch {
				case bytes.EqualFold(tok, tClose):
					h.close = true
				case bytes.EqualFold(tok, tKeepAlive):
					if http10 {
						h.close = false
					}
				case nNames == maxConnTokens:
					return false
				default:
					off := f.value[0] + bytes.Index(value, tok)
					names[nNames] = [2]int{off, off + len(tok)}
					nNames++
				}
				return true
			})
			if !ok {
				return errHead("Connection")
			}
		case bytes.EqualFold(name, hKeepAlive), bytes.EqualFold(name, hProxyConnection),
			bytes.EqualFold(name, hProxyAuthn), bytes.EqualFold(name, hProxyAuthz),
			bytes.EqualFold(name, hTE), bytes.EqualFold(name, hUpgrade):
			f.drop = true
		}
	}
	if h.chunked {
		// A chunked message's Content-Length is meaningless (RFC 9112 §6.3) and is
		// not forwarded.
		h.contentLength = -1
		for i := range h.fields {
			if bytes.EqualFold(head[h.fields[i].name[0]:h.fields[i].name[1]], hContentLength) {
				h.fields[i].drop = true
			}
		}
	}
	dropNamed(head, h.fields, names[:nNames])
	return nil
}
