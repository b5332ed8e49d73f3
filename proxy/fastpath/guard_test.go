package fastpath

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/measure"
)

// guardRead feeds stream to a Guard in pieces of size step and returns what a reader
// of the guarded connection gets before the end of the stream.
func guardRead(t *testing.T, stream string, step int) string {
	t.Helper()
	out, _ := guardReadCounted(t, stream, step)
	return out
}

// guardReadCounted is guardRead, also returning how many ambiguous heads the guard
// counted as refused.
func guardReadCounted(t *testing.T, stream string, step int) (string, uint64) {
	t.Helper()
	client, server := net.Pipe()
	go func() {
		for i := 0; i < len(stream); i += step {
			if _, err := io.WriteString(client, stream[i:min(i+step, len(stream))]); err != nil {
				return
			}
		}
		client.Close()
	}()
	rec := measure.New(nil, 0, 0)
	g := Guard(server, 1<<10, rec)
	var out strings.Builder
	buf := make([]byte, 7) // odd, small reads, as a parser's buffer may make
	for {
		n, err := g.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	g.Close()
	for _, f := range measure.Refusals {
		if f != measure.RefusedAmbiguousFraming {
			require.Zero(t, rec.Refused(f), "the guard counts only ambiguous framing")
		}
	}
	require.Zero(t, rec.Snapshot().Arrivals)
	return out.String(), rec.Refused(measure.RefusedAmbiguousFraming)
}

func TestGuardPassesUnambiguousStreams(t *testing.T) {
	streams := map[string]string{
		"gets":    "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"length":  "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"chunked": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		// A chunk holding a head with both fields is data, not a head.
		"chunk holds a head": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2c\r\nGET / HTTP/1.1\r\nContent-Length: 1\r\nTE: x\r\n\r\n\r\n0\r\n\r\n",
		"upgrade":            "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"h2c preface":        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00",
		"incomplete":         "GET / HTTP/1.1\r\nHost: a\r\n",
		"huge head":          "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 2000) + "\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	}
	for name, s := range streams {
		for _, step := range []int{1, 3, len(s)} {
			out, refused := guardReadCounted(t, s, step)
			require.Equal(t, s, out, "%s in steps of %d", name, step)
			require.Zero(t, refused, "%s in steps of %d: nothing refused", name, step)
		}
	}
}

func TestGuardReplacesAmbiguousHead(t *testing.T) {
	good := "GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
	for _, bad := range []string{
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.0\nHost: a\nTransfer-Encoding : chunked\ncontent-length: 3\n\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\nabcd",
	} {
		for _, step := range []int{1, 5, 1000} {
			// A second ambiguous head after it is discarded unread, not counted:
			// the connection carries no request after the first.
			out, refused := guardReadCounted(t, good+bad+bad, step)
			require.Equal(t, good+string(refusedHead), out, "%q in steps of %d", bad, step)
			require.Equal(t, uint64(1), refused, "%q in steps of %d: counted once", bad, step)
		}
	}
}

// FuzzGuard: a guarded stream reaches net/http unchanged, except that from the first
// request head with an ambiguous length on, it is replaced by refusedHead; that head
// really is ambiguous and is counted once, and whatever is cut into pieces, the output
// is the same.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: x\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, stream string, step uint8) {
		if len(stream) > 4096 {
			return
		}
		whole, refused := guardReadCounted(t, stream, len(stream)+1)
		if pieces := guardRead(t, stream, int(step)+1); pieces != whole {
			t.Fatalf("in pieces of %d: %q, whole: %q", int(step)+1, pieces, whole)
		}
		if whole == stream {
			if refused != 0 {
				t.Fatalf("passed unchanged but counted %d refusals: %q", refused, stream)
			}
			return
		}
		if refused != 1 {
			t.Fatalf("refused, counted %d times: %q", refused, stream)
		}
		prefix, ok := strings.CutSuffix(whole, string(refusedHead))
		if !ok || !strings.HasPrefix(stream, prefix) {
			t.Fatalf("stream changed other than by refusing: %q -> %q", stream, whole)
		}
		rest := []byte(stream[len(prefix):])
		if e := headEnd(rest, 0); e < 0 || !AmbiguousLength(rest[:e]) {
			t.Fatalf("refused a head that is not ambiguous: %q", rest)
		}
	})
}
