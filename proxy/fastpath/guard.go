package fastpath

import (
	"bytes"
	"errors"
	"net"
	"sync"

	"github.com/qas-dev/qas/proxy/measure"
)

// Guard wraps a client connection that the general net/http path serves so that a
// request with an ambiguous length (AmbiguousLength) is refused there too: net/http
// itself takes Transfer-Encoding over Content-Length and forwards the message, which
// RFC 9112 §6.3 allows but a security boundary should not. Guard follows the requests
// on the connection as net/http frames them (heads, Content-Length and chunked bodies)
// and holds back each head until it is whole; net/http reads an ambiguous one, and
// the rest of the stream, as a malformed request line, which it answers 400 in turn,
// closing the connection. After something it does
// not follow (an Upgrade, the h2c preface, a head larger than maxHead, a length or
// transfer coding net/http refuses anyway) it passes bytes through unchecked: net/http
// then closes the connection or it no longer carries HTTP/1 requests. Each ambiguous
// head it replaces is counted in rec (measure.RefusedAmbiguousFraming; nil: not
// counted), as the fast path counts the ones it refuses itself: net/http's 400 to the
// substitute is not the proxy's to count.
func Guard(nc net.Conn, maxHead int, rec *measure.Recorder) net.Conn {
	return &guardConn{Conn: nc, maxHead: maxHead, rec: rec}
}

// GuardListener wraps every connection ln accepts with Guard.
func GuardListener(ln net.Listener, maxHead int, rec *measure.Recorder) net.Listener {
	return guardListener{ln, maxHead, rec}
}

type guardListener struct {
	net.Listener
	maxHead int
	rec     *measure.Recorder
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Guard(c, l.maxHead, l.rec), nil
}

// States of a guardConn's parse.
const (
	gHead      = iota // in a request head
	gBody             // in a Content-Length body: left more bytes
	gChunkLine        // in a chunk-size line
	gChunkData        // in chunk data: left more bytes, then its CRLF
	gChunkEnd         // at the CRLF after chunk data
	gTrailer          // in the trailer section
	gOpaque           // not followed any more
)

// maxGuardLine bounds a chunk-size or trailer line the guard follows.
const maxGuardLine = 4096

type guardConn struct {
	net.Conn
	maxHead int
	rec     *measure.Recorder

	mu      sync.Mutex // Read may race with a Close's caller; the fields are Read's
	buf     []byte     // read from the socket: buf[:ready] may be returned, the rest is held
	ready   int
	scanned int // of the held bytes, how far the current head or line was searched
	state   int
	left    int64
	err     error
	discard bool // after an ambiguous head: the rest of the stream is dropped
}

func (g *guardConn) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.ready == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if g.discard {
			var scratch [512]byte
			if _, err := g.Conn.Read(scratch[:]); err != nil {
				return 0, err
			}
			continue
		}
		if len(g.buf) == cap(g.buf) {
			g.buf = append(g.buf, make([]byte, max(len(p), 4096))...)[:len(g.buf)]
		}
		n, err := g.Conn.Read(g.buf[len(g.buf):cap(g.buf)])
		g.buf = g.buf[:len(g.buf)+n]
		if g.advance() {
			// net/http answers the substitute 400 and closes, after the
			// responses to the requests before it. Until then the client's
			// further bytes are discarded; an EOF here would look to net/http
			// like a client that left, cancelling those requests.
			if g.rec != nil {
				g.rec.Refuse(measure.RefusedAmbiguousFraming)
			}
			g.buf = append(g.buf[:g.ready], refusedHead...)
			g.ready, g.state, g.discard = len(g.buf), gOpaque, true
			continue
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && g.ready == 0 {
				// A deadline (net/http interrupts its background read with
				// one): the connection goes on.
				return 0, err
			}
			// What is held is an incomplete head or line: net/http sees it
			// with the error, as it would have.
			g.ready, g.err = len(g.buf), err
		}
	}
	n := copy(p, g.buf[:g.ready])
	g.buf = append(g.buf[:0], g.buf[n:]...)
	g.ready -= n
	return n, nil
}

// refusedHead replaces an ambiguous request head and the rest of the stream: a request
// line net/http answers with "400 Bad Request" and Connection: close, in turn.
var refusedHead = []byte("qas-proxy:ambiguous-Content-Length-and-Transfer-Encoding(RFC-9112-section-6.3)\r\n\r\n")

// advance moves ready over the held bytes that are checked, and reports whether it met
// an ambiguous request head.
func (g *guardConn) advance() bool {
	for g.ready < len(g.buf) {
		held := g.buf[g.ready:]
		switch g.state {
		case gOpaque:
			g.ready = len(g.buf)
		case gBody, gChunkData:
			n := int(min(int64(len(held)), g.left))
			g.ready += n
			g.left -= int64(n)
			if g.left == 0 {
				if g.state == gBody {
					g.state = gHead
				} else {
					g.state = gChunkEnd
				}
			}
		case gHead:
			e := headEnd(held, g.scanned-3)
			if e < 0 || e > g.maxHead {
				if len(held) > g.maxHead {
					g.state = gOpaque
					continue
				}
				g.scanned = len(held)
				return false
			}
			g.scanned = 0
			head := held[:e]
			if AmbiguousLength(head) {
				return true
			}
			g.ready += e
			g.state, g.left = framing(head)
			if g.state == gBody && g.left == 0 {
				g.state = gHead
			}
		case gChunkLine, gChunkEnd, gTrailer:
			i := bytes.IndexByte(held[g.scanned:], '\n')
			if i < 0 {
				if len(held) > maxGuardLine {
					g.state = gOpaque
					continue
				}
				g.scanned = len(held)
				return false
			}
			line := held[:g.scanned+i]
			g.ready += g.scanned + i + 1
			g.scanned = 0
			line = bytes.TrimSuffix(line, []byte("\r"))
			switch g.state {
			case gChunkEnd:
				g.state = gChunkLine
				if len(line) != 0 {
					g.state = gOpaque // net/http refuses the body
				}
			case gTrailer:
				if len(line) == 0 {
					g.state = gHead
				}
			default:
				size, err := chunkSize(line)
				switch {
				case err != nil:
					g.state = gOpaque // net/http refuses the body
				case size == 0:
					g.state = gTrailer
				default:
					g.state, g.left = gChunkData, size
				}
			}
		}
	}
	return false
}

// framing is how net/http frames the body after a request head that is not ambiguous:
// a Content-Length, chunked, or nothing it will read as a further request.
func framing(head []byte) (state int, left int64) {
	if bytes.HasPrefix(head, []byte("PRI * HTTP/2.0")) {
		return gOpaque, 0
	}
	state, left = gBody, 0
	for name, value := range fieldLines(head) {
		value = bytes.Trim(value, " \t")
		switch lookupHdr(name) {
		case hdrUpgrade:
			return gOpaque, 0 // the connection may carry another protocol next
		case hdrTransferEncoding:
			if !asciiEqualFold(value, "chunked") {
				return gOpaque, 0 // net/http refuses it and closes
			}
			state = gChunkLine
		case hdrContentLength:
			n, ok := parseDecimal(value)
			if !ok {
				return gOpaque, 0 // net/http refuses it and closes
			}
			left = n
		}
	}
	return state, left
}
