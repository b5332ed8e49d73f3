package fastpath

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name     string
		head     string
		fast     bool
		len      int64
		close    bool
		dropped  []string // header names not forwarded
		gone     []string // text not forwarded
		forwards []string // header lines forwarded
		// fwd is what the application reads from the X-Forwarded fields and Forwarded,
		// where it differs from a client that sent none: X-Forwarded-For the client's
		// address 10.0.0.1, X-Forwarded-Host the Host, X-Forwarded-Proto http.
		fwd map[string][]string
	}{
		{name: "plain GET", head: "GET /x?a=1 HTTP/1.1\r\nHost: shop.example\r\nAccept: */*\r\n\r\n", fast: true, len: -1,
			forwards: []string{"Host: shop.example", "Accept: */*"}},
		{name: "POST with length", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", fast: true, len: 12},
		{name: "close", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", fast: true, len: -1, close: true, dropped: []string{"Connection"}},
		{name: "hop-by-hop and named", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nProxy-Authorization: x\r\nX-Keep: 2\r\n\r\n",
			fast: true, len: -1, dropped: []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization"}, forwards: []string{"X-Keep: 2"}},
		{name: "client X-Forwarded kept", head: "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=x\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: shop.example\r\n\r\n",
			fast: true, len: -1, forwards: []string{"Forwarded: for=x", "X-Forwarded-Proto: https", "X-Forwarded-Host: shop.example"},
			fwd: map[string][]string{"X-Forwarded-For": {"6.6.6.6, 10.0.0.1"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"shop.example"}, "Forwarded": {"for=x"}}},
		{name: "X-Forwarded-For lines combined in order", head: "GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2\r\nHost: a\r\nX-Forwarded-For:3.3.3.3 \r\nX-Forwarded-For: \r\n\r\n",
			fast: true, len: -1, fwd: map[string][]string{"X-Forwarded-For": {"1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.1"}}},
		{name: "empty X-Forwarded fields count as absent", head: "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto:\r\nX-Forwarded-Host: \r\n\r\n", fast: true, len: -1},
		{name: "X-Forwarded fields named in Connection are hop-by-hop", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Forwarded-For, x-forwarded-proto, Forwarded\r\n" +
			"X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\nForwarded: for=x\r\nX-Forwarded-Host: b\r\n\r\n",
			fast: true, len: -1, dropped: []string{"Connection", "Forwarded"}, gone: []string{"6.6.6.6", "https"}, fwd: map[string][]string{"X-Forwarded-Host": {"b"}}},
		{name: "HTTP/1.0", head: "GET / HTTP/1.0\r\n\r\n"},
		{name: "h2c preface", head: "PRI * HTTP/2.0\r\n\r\n"},
		{name: "Connection: upgrade without Upgrade", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, upgrade\r\n\r\n"},
		{name: "WebSocket", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"},
		{name: "h2c upgrade", head: "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n"},
		{name: "chunked body", head: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{name: "expect", head: "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"},
		{name: "two lengths", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"},
		{name: "negative length", head: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n"},
		{name: "no host", head: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"},
		{name: "two hosts", head: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
		{name: "absolute form", head: "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"},
		{name: "asterisk", head: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"},
		{name: "bad escape", head: "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n"},
		{name: "bare LF", head: "GET / HTTP/1.1\nHost: a\n\n"},
		{name: "obs-fold", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n"},
		{name: "space in name", head: "GET / HTTP/1.1\r\nHost: a\r\nX Y: 1\r\n\r\n"},
		{name: "control in value", head: "GET / HTTP/1.1\r\nHost: a\r\nX: 1\x01\r\n\r\n"},
		{name: "garbage", head: "GARBAGE\r\n\r\n"},
		// The general path refuses CONNECT (the proxy opens no tunnel), in any case.
		{name: "CONNECT origin form", head: "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n"},
		{name: "CONNECT lower case", head: "connect / HTTP/1.1\r\nHost: a\r\n\r\n"},
		{name: "CONNECT mixed case", head: "Connect /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"},
		{name: "CONNECT authority form", head: "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h requestHead
			head := []byte(tt.head)
			require.Equal(t, len(head), headEnd(head, 0))
			require.Equal(t, tt.fast, parseRequest(head, &h) == forward)
			if !tt.fast {
				return
			}
			require.Equal(t, tt.len, h.contentLength)
			require.Equal(t, tt.close, h.close)
			out := string(forwarded(head, &h, "10.0.0.1"))
			for _, name := range tt.dropped {
				require.NotContains(t, out, "\r\n"+name+":")
			}
			for _, text := range tt.gone {
				require.NotContains(t, out, text)
			}
			for _, line := range tt.forwards {
				require.Contains(t, out, "\r\n"+line+"\r\n")
			}
			want := map[string][]string{"X-Forwarded-For": {"10.0.0.1"}, "X-Forwarded-Host": {string(head[h.host[0]:h.host[1]])}, "X-Forwarded-Proto": {"http"}}
			for k, v := range tt.fwd {
				want[k] = v
			}
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(out)))
			require.NoError(t, err)
			got := map[string][]string{}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
				if v, ok := req.Header[k]; ok {
					got[k] = v
				}
			}
			require.Equal(t, want, got)
		})
	}
}

// forwarded is the head writeUpstreamHead sends to the application.
func forwarded(head []byte, h *requestHead, ip string) []byte {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	(&conn{req: *h, clientIP: ip}).writeUpstreamHead(w, head)
	_ = w.Flush()
	return buf.Bytes()
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name    string
		head    string
		err     string
		code    int
		len     int64
		chunked bool
		close   bool
		dropped []string
	}{
		{name: "length", head: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", code: 200, len: 5},
		{name: "no reason", head: "HTTP/1.1 204\r\n\r\n", code: 204, len: -1},
		{name: "chunked drops length", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n", code: 200, len: -1, chunked: true,
			dropped: []string{"Transfer-Encoding", "Content-Length"}},
		{name: "close", head: "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n\r\n", code: 200, len: -1, close: true, dropped: []string{"Connection", "X-Hop"}},
		{name: "HTTP/1.0 closes", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", code: 200, len: 1, close: true},
		{name: "HTTP/1.0 close wins over keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: close, keep-alive\r\nContent-Length: 1\r\n\r\n", code: 200, len: 1, close: true, dropped: []string{"Connection"}},
		{name: "HTTP/1.1 close in a second Connection field", head: "HTTP/1.1 200 OK\r\nConnection: X-A\r\nConnection: close\r\nX-A: 1\r\nContent-Length: 1\r\n\r\n", code: 200, len: 1, close: true, dropped: []string{"Connection", "X-A"}},
		{name: "HTTP/1.0 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", code: 200, len: 1, dropped: []string{"Connection"}},
		{name: "HTTP/1.0 ignores transfer codings", head: "HTTP/1.0 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 3\r\n\r\n", code: 200, len: 3, close: true,
			dropped: []string{"Transfer-Encoding"}},
		{name: "early hints", head: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", code: 103, len: -1},
		{name: "gzip transfer coding", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: "Transfer-Encoding"},
		{name: "conflicting lengths", head: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", err: "Content-Length"},
		{name: "bad code", head: "HTTP/1.1 2x0 OK\r\n\r\n", err: "status code"},
		{name: "HTTP/2", head: "HTTP/2 200\r\n\r\n", err: "status line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h responseHead
			head := []byte(tt.head)
			err := parseResponse(head, &h)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.code, h.code)
			require.Equal(t, tt.len, h.contentLength)
			require.Equal(t, tt.chunked, h.chunked)
			require.Equal(t, tt.close, h.close)
			for i := range h.fields {
				name := string(head[h.fields[i].name[0]:h.fields[i].name[1]])
				require.Equal(t, contains(tt.dropped, name), h.fields[i].drop, name)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func TestCopyChunked(t *testing.T) {
	tests := []struct {
		name, in string
		err      bool
	}{
		{name: "two chunks", in: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
		{name: "extension and trailer", in: "5;x=y\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n"},
		{name: "upper hex", in: "A\r\n0123456789\r\n0\r\n\r\n"},
		{name: "short chunk", in: "5\r\nhel\r\n0\r\n\r\n", err: true},
		{name: "no size", in: "\r\nhello\r\n", err: true},
		{name: "huge size", in: "ffffffffffffffffff\r\n", err: true},
		{name: "truncated", in: "5\r\nhello\r\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := bufio.NewWriter(&out)
			rerr, werr := sink{w: w}.copyChunked(bufio.NewReader(strings.NewReader(tt.in + "NEXT")))
			require.NoError(t, werr)
			if tt.err {
				require.Error(t, rerr)
				return
			}
			require.NoError(t, rerr)
			require.NoError(t, w.Flush())
			require.Equal(t, tt.in, out.String(), "copied unchanged, and no further")
		})
	}
}

// FuzzParseRequest checks that every head the fast path accepts is one net/http reads
// the same way, and that what it forwards is a valid request without hop-by-hop fields.
// fuzzHeads seeds f and runs check on the complete head at the start of each input.
func fuzzHeads(f *testing.F, seeds []string, check func(t *testing.T, head []byte)) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if e := headEnd(b, 0); e >= 0 {
			check(t, b[:e])
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	fuzzHeads(f, []string{
		"POST /c HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 35\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: Host, Transfer-Encoding\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x?y=%20 HTTP/1.1\r\nHost: a:80\r\nContent-Length: 3\r\nConnection: close, X\r\nX: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:8080\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
		"GET / HTTP/1.1\r\nX-Forwarded-For: 1.2.3.4, 5.6.7.8\r\nHost: a\r\nx-forwarded-for: 9.9.9.9\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: b\r\nForwarded: for=1.2.3.4;proto=https\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: x-forwarded-host, Forwarded\r\nX-Forwarded-Host: b\r\nForwarded: for=x\r\nX-Forwarded-Proto:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nForwarded:\r\nX-Forwarded-For:\r\n\r\n",
		"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
		"cOnNeCt /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
	}, func(t *testing.T, head []byte) {
		var h requestHead
		v := parseRequest(head, &h)
		if AmbiguousLength(head) != (v == refuse) {
			t.Fatalf("verdict %d, AmbiguousLength %v: %q", v, AmbiguousLength(head), head)
		}
		if v != forward {
			return
		}
		if sp := bytes.IndexByte(head, ' '); sp >= 0 && strings.EqualFold(string(head[:sp]), "CONNECT") {
			t.Fatalf("fast path forwards a CONNECT: %q", head)
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("fast path accepts what net/http rejects (%v): %q", err, head)
		}
		if req.Host != string(head[h.host[0]:h.host[1]]) {
			t.Fatalf("host %q, net/http %q", head[h.host[0]:h.host[1]], req.Host)
		}
		want := int64(0)
		if h.contentLength > 0 {
			want = h.contentLength
		}
		if req.ContentLength != want || req.Close != h.close {
			t.Fatalf("length %d close %v, net/http %d %v: %q", h.contentLength, h.close, req.ContentLength, req.Close, head)
		}
		out := forwarded(head, &h, "127.0.0.1")
		fwd, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(out)))
		if err != nil {
			t.Fatalf("forwarded head does not parse (%v): %q", err, out)
		}
		if fwd.RequestURI != req.RequestURI || fwd.Method != req.Method || fwd.Host != req.Host {
			t.Fatalf("forwarded %s %s %s, want %s %s %s", fwd.Method, fwd.RequestURI, fwd.Host, req.Method, req.RequestURI, req.Host)
		}
		for _, hop := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Upgrade", "Transfer-Encoding", "Te", "Trailer"} {
			if _, ok := fwd.Header[hop]; ok {
				t.Fatalf("hop-by-hop %s forwarded: %q", hop, out)
			}
		}
		for name, want := range wantForwarded(req, "127.0.0.1") {
			if got := fwd.Header[name]; !slices.Equal(got, want) {
				t.Fatalf("%s forwarded as %q, want %q: %q", name, got, want, head)
			}
		}
		if h.contentLength > 4096 {
			return
		}
		// The byte stream the app receives: the forwarded head and exactly the body
		// the client's head announced, whatever follows it, must be one request to
		// the app, with that body and nothing left over (no smuggled second one).
		body := bytes.Repeat([]byte("GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"), int(min(h.contentLength, 4096)/35+1))
		if h.contentLength > 0 {
			body = body[:h.contentLength]
		} else {
			body = nil
		}
		stream := append(append([]byte(nil), out...), body...)
		br := bufio.NewReader(bytes.NewReader(stream))
		app, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("the app cannot read what it gets (%v): %q", err, stream)
		}
		got, err := io.ReadAll(app.Body)
		if err != nil || !bytes.Equal(got, body) || len(app.TransferEncoding) > 0 {
			t.Fatalf("the app reads body %q (%v, TE %q), the client sent %q: %q", got, err, app.TransferEncoding, body, stream)
		}
		if app.Host != req.Host || app.Method != req.Method || app.RequestURI != req.RequestURI {
			t.Fatalf("the app reads %s %s %s, the client sent %s %s %s", app.Method, app.RequestURI, app.Host, req.Method, req.RequestURI, req.Host)
		}
		if rest, _ := io.ReadAll(br); len(rest) > 0 {
			t.Fatalf("the app reads %q after the request: %q", rest, stream)
		}
	})
}

// wantForwarded is what the application should read from the X-Forwarded fields and
// Forwarded of req, as net/http reads it, from a client at ip: X-Forwarded-For is one
// field, the client's non-empty values then ip; X-Forwarded-Host and -Proto are the
// client's non-empty values, or the Host and "http"; Forwarded is unchanged; fields
// named in Connection are not carried.
func wantForwarded(req *http.Request, ip string) map[string][]string {
	hop := func(name string) bool {
		for _, c := range req.Header["Connection"] {
			for _, tok := range strings.Split(c, ",") {
				if strings.EqualFold(strings.Trim(tok, " \t"), name) {
					return true
				}
			}
		}
		return false
	}
	carried := func(name string) []string {
		var vs []string
		for _, v := range req.Header[name] {
			if v = strings.Trim(v, " \t"); v != "" && !hop(name) {
				vs = append(vs, v)
			}
		}
		return vs
	}
	want := map[string][]string{
		"X-Forwarded-For":   {strings.Join(append(carried("X-Forwarded-For"), ip), ", ")},
		"X-Forwarded-Host":  carried("X-Forwarded-Host"),
		"X-Forwarded-Proto": carried("X-Forwarded-Proto"),
		"Forwarded":         req.Header["Forwarded"],
	}
	if hop("Forwarded") {
		want["Forwarded"] = nil
	}
	if want["X-Forwarded-Host"] == nil {
		want["X-Forwarded-Host"] = []string{req.Host}
	}
	if want["X-Forwarded-Proto"] == nil {
		want["X-Forwarded-Proto"] = []string{"http"}
	}
	return want
}

// FuzzParseResponse checks that the fast path reads the framing of every response head
// it accepts as net/http does.
func FuzzParseResponse(f *testing.F) {
	fuzzHeads(f, []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.0 404 Not Found\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
	}, func(t *testing.T, head []byte) {
		var h responseHead
		if parseResponse(head, &h) != nil {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("fast path accepts what net/http rejects (%v): %q", err, head)
		}
		if resp.StatusCode != h.code {
			t.Fatalf("code %d, net/http %d", h.code, resp.StatusCode)
		}
		// net/http also closes after a body that runs to the end of the connection,
		// which relay never reuses either.
		toEOF := h.code >= 200 && h.code != 204 && h.code != 304 && !h.chunked && h.contentLength < 0
		if resp.Close != (h.close || toEOF) {
			t.Fatalf("close %v (to EOF %v), net/http %v: %q", h.close, toEOF, resp.Close, head)
		}
		chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
		if h.code >= 200 && h.code != 204 && h.code != 304 {
			if chunked != h.chunked || !h.chunked && resp.ContentLength != h.contentLength {
				t.Fatalf("framing chunked=%v length=%d, net/http %v %d: %q", h.chunked, h.contentLength, chunked, resp.ContentLength, head)
			}
		}
	})
}

// FuzzCopyChunked checks that a chunked body is copied byte for byte and never past
// its end.
func FuzzCopyChunked(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nX: y\r\n\r\nrest"))
	f.Add([]byte("1;a=b\r\nx\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		src := bufio.NewReaderSize(bytes.NewReader(b), 64)
		rerr, werr := sink{w: w}.copyChunked(src)
		if werr != nil {
			t.Fatal(werr)
		}
		_ = w.Flush()
		if !bytes.HasPrefix(b, out.Bytes()) {
			t.Fatalf("copied %q, not a prefix of the input", out.Bytes())
		}
		if rerr == nil {
			rest := len(b) - out.Len()
			if src.Buffered() > rest {
				t.Fatalf("read past the body")
			}
		}
	})
}

// Heads like a browser's request and a typical application response, with Connection
// tokens so that every branch of the header loop runs.
var (
	benchRequest = []byte("GET /api/items?page=2 HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/html,application/xhtml+xml\r\nAccept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate\r\n" +
		"Connection: keep-alive, X-Trace\r\nX-Trace: 1\r\nCookie: session=abc123\r\n\r\n")
	benchResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1234\r\nDate: Wed, 25 Nov 2026 08:00:00 GMT\r\n" +
		"Cache-Control: no-store\r\nConnection: keep-alive, X-Internal\r\nX-Internal: 1\r\n\r\n")
)

func TestParseAllocatesNothing(t *testing.T) {
	var req requestHead
	var resp responseHead
	allocs := testing.AllocsPerRun(100, func() {
		if parseRequest(benchRequest, &req) != forward {
			t.Fatal("request refused")
		}
		if err := parseResponse(benchResponse, &resp); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
	require.True(t, req.fields[5].drop && req.fields[6].drop && !req.fields[7].drop, "Connection and the field it names are dropped")
	require.True(t, resp.fields[4].drop && resp.fields[5].drop && !resp.fields[3].drop)
}

// TestUpstreamHeadAllocatesNothing: combining the client's X-Forwarded-For lines with
// its address, and keeping its other forwarding fields, writes in place.
func TestUpstreamHeadAllocatesNothing(t *testing.T) {
	head := []byte("GET / HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-For: 203.0.113.7\r\nX-Forwarded-For: 10.1.1.1\r\n" +
		"X-Forwarded-Proto: https\r\nForwarded: for=203.0.113.7;proto=https\r\n\r\n")
	c := &conn{clientIP: "10.0.0.1"}
	w := bufio.NewWriter(io.Discard)
	allocs := testing.AllocsPerRun(100, func() {
		if parseRequest(head, &c.req) != forward {
			t.Fatal("request refused")
		}
		c.writeUpstreamHead(w, head)
		_ = w.Flush()
	})
	require.Zero(t, allocs)
}

func BenchmarkParseRequest(b *testing.B) {
	var h requestHead
	b.SetBytes(int64(len(benchRequest)))
	for b.Loop() {
		parseRequest(benchRequest, &h)
	}
}

func BenchmarkParseResponse(b *testing.B) {
	var h responseHead
	b.SetBytes(int64(len(benchResponse)))
	for b.Loop() {
		_ = parseResponse(benchResponse, &h)
	}
}

// BenchmarkParseChunkedResponse: a streamed response, the other common framing.
func BenchmarkParseChunkedResponse(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nDate: Wed, 25 Nov 2026 08:00:00 GMT\r\n" +
		"Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\r\n")
	var h responseHead
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if err := parseResponse(head, &h); err != nil || !h.chunked {
			b.Fatal("not parsed as chunked", err)
		}
	}
}

func TestLookupHdr(t *testing.T) {
	for h, name := range hdrNames {
		if name == "" {
			continue
		}
		for _, variant := range []string{name, strings.ToUpper(name), strings.ToTitle(name[:1]) + name[1:]} {
			require.Equal(t, hdr(h), lookupHdr([]byte(variant)), variant)
		}
		// One byte off in every position, including the case-folding neighbours of
		// '-' and digits ('\r' is '-' with bit 0x20 cleared).
		for i := range len(name) {
			for _, c := range []byte{name[i] ^ 0x20, name[i] + 1, 0} {
				if c == name[i] || c >= 'A' && c <= 'Z' && c+('a'-'A') == name[i] {
					continue
				}
				b := []byte(name)
				b[i] = c
				require.Equal(t, hdrOther, lookupHdr(b), "%q", b)
			}
		}
	}
	require.Equal(t, hdrOther, lookupHdr(nil))
	require.Equal(t, hdrOther, lookupHdr([]byte(strings.Repeat("x", 100))))
	require.Equal(t, hdrOther, lookupHdr([]byte("x-forwarded-prot")))
}

// TestQasFieldsDroppedWhenPooling: with the pooled data plane configured (dropQas) the
// fast path forwards a request without the client's Qas- fields, whatever their case,
// and keeps the rest; without it they pass like any other field. The request stays on
// the fast path either way.
func TestQasFieldsDroppedWhenPooling(t *testing.T) {
	head := []byte("GET /x HTTP/1.1\r\nHost: x\r\nQas-Hop: 1\r\nqas-auth: t=1\r\nQAS-Workload: shop\r\nQasX: keep\r\nX-Keep: 1\r\n\r\n")
	for _, drop := range []bool{false, true} {
		h := requestHead{dropQas: drop}
		require.Equal(t, forward, parseRequest(head, &h))
		out := string(forwarded(head, &h, "10.0.0.1"))
		require.Contains(t, out, "X-Keep: 1\r\n")
		require.Contains(t, out, "QasX: keep\r\n", "only names starting with Qas- are the data plane's")
		for _, f := range []string{"Qas-Hop: 1\r\n", "qas-auth: t=1\r\n", "QAS-Workload: shop\r\n"} {
			if drop {
				require.NotContains(t, out, f)
			} else {
				require.Contains(t, out, f)
			}
		}
		require.Equal(t, drop, h.dropQas, "a parse keeps the connection's setting")
	}
}
