package server

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// smuggled is a request hidden in the body of another: 35 (0x23) bytes.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

func init() {
	if len(smuggled) != 35 {
		panic("the tests' lengths assume a 35-byte smuggled request")
	}
}

// TestConnectionNeverDropsFraming: whatever Connection names, Content-Length,
// Transfer-Encoding and Host reach the application, so a body is never read as a
// second request and an HTTP/1.1 request never arrives without Host (issue #17,
// defect 1).
func TestConnectionNeverDropsFraming(t *testing.T) {
	tests := []struct {
		name, raw string
		want      appRequest // method, target, host and body the app must read
	}{
		{"Connection: Content-Length",
			"POST /c HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\nContent-Length: 35\r\n\r\n" + smuggled,
			appRequest{method: "POST", target: "/c", host: "x", body: smuggled}},
		{"Connection: content-length, keep-alive",
			"POST /c HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, content-length\r\nContent-Length: 35\r\n\r\n" + smuggled,
			appRequest{method: "POST", target: "/c", host: "x", body: smuggled}},
		{"Connection: Transfer-Encoding",
			"POST /t HTTP/1.1\r\nHost: x\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n23\r\n" + smuggled + "\r\n0\r\n\r\n",
			appRequest{method: "POST", target: "/t", host: "x", body: smuggled}},
		{"Connection: Host",
			"GET /h HTTP/1.1\r\nHost: x\r\nConnection: Host\r\n\r\n",
			appRequest{method: "GET", target: "/h", host: "x"}},
	}
	bothPaths(t, func(t *testing.T, fast bool) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a := newRecordingApp(t)
				p := start(t, a.addr, Config{}, Options{FastPath: fast})
				c := dialRaw(t, p.srv.Addr())
				c.send(tt.raw)
				resp, body, err := c.response("POST")
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, "seen "+tt.want.method+" "+tt.want.target, body)
				// A second client request must get its own answer, not the
				// smuggled one's.
				c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
				_, body, err = c.response("GET")
				require.NoError(t, err)
				require.Equal(t, "seen GET /next", body)
				reqs := a.settled(t, p)
				require.Len(t, reqs, 2, "the app read exactly the client's two requests: %+v", reqs)
				got := reqs[0]
				require.Equal(t, tt.want.method, got.method, "app read %q", got.raw)
				require.Equal(t, tt.want.target, got.target)
				require.Equal(t, tt.want.host, got.host)
				require.Equal(t, tt.want.body, got.body)
				require.Equal(t, "/next", reqs[1].target)
			})
		}
	})
}

// TestResponseConnectionNeverDropsFraming: an application response whose Connection
// names Content-Length keeps its framing, so the client's keep-alive connection stays
// in step (issue #17, defect 1, responses).
func TestResponseConnectionNeverDropsFraming(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		a.handle = func(nc net.Conn, req *http.Request, _ string) bool {
			if req.URL.Path == "/named" {
				_, err := nc.Write([]byte("HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\nhello"))
				return err == nil
			}
			_, err := nc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"))
			return err == nil
		}
		p := start(t, a.addr, Config{}, Options{FastPath: fast})
		c := dialRaw(t, p.srv.Addr())
		c.send("GET /named HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body, err := c.response("GET")
		require.NoError(t, err, "the response must end without the app closing its connection")
		require.Equal(t, "hello", body)
		require.False(t, resp.Close)
		c.send("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
		_, body, err = c.response("GET")
		require.NoError(t, err)
		require.Equal(t, "next", body)
	})
}

// TestAmbiguousRequestsRefused: a request whose length RFC 9112 §6.3 makes ambiguous
// (Content-Length with Transfer-Encoding, or Content-Length fields that disagree) is
// refused with 400 and the connection closed, on both paths, and the app reads
// nothing of it.
func TestAmbiguousRequestsRefused(t *testing.T) {
	tests := []struct{ name, raw string }{
		{"CL then TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 41\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
		{"TE then CL", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 41\r\n\r\n0\r\n\r\n" + smuggled},
		{"CL with obfuscated TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\nhello"},
		{"CL with TE identity", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\nhello"},
		{"conflicting CLs", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 42\r\n\r\nhello" + smuggled},
		{"conflicting CLs in one field", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 42\r\n\r\nhello" + smuggled},
		{"after a good request", "GET /first HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"after an HTTP/1.0 request", "GET /first HTTP/1.0\r\nConnection: keep-alive\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	}
	bothPaths(t, func(t *testing.T, fast bool) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a := newRecordingApp(t)
				p := start(t, a.addr, Config{}, Options{FastPath: fast})
				c := dialRaw(t, p.srv.Addr())
				c.send(tt.raw)
				first := strings.HasPrefix(tt.name, "after")
				if first {
					_, body, err := c.response("GET")
					require.NoError(t, err)
					require.Equal(t, "seen GET /first", body)
				}
				resp, _, err := c.response("POST")
				require.NoError(t, err)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				require.True(t, resp.Close, "the 400 says Connection: close")
				require.True(t, c.closed(), "the proxy closes the connection after the 400")
				reqs := a.settled(t, p)
				if first {
					require.Len(t, reqs, 1, "the app read only the good request: %+v", reqs)
					require.Equal(t, "/first", reqs[0].target)
				} else {
					require.Empty(t, reqs, "the app read nothing of an ambiguous request")
				}
			})
		}
	})
}
