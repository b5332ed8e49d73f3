package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hangGuard bounds every wait in the raw-byte tests. It is not a performance
// threshold: a correct proxy answers in milliseconds, and a wait that reaches it means
// the proxy hung.
const hangGuard = 20 * time.Second

// appRequest is one request as a recording app read it.
type appRequest struct {
	conn   int    // which application connection it came on
	raw    string // its exact bytes, head and body
	method string
	target string
	host   string
	header http.Header
	body   string
}

// recordingApp is an HTTP/1.1 application on loopback that records the exact bytes of
// every request it reads, as net/http's parser frames them, and answers each with 200
// and "seen METHOD TARGET". Bytes it cannot parse as a request are recorded as a
// request with method "ERROR" and close the connection.
type recordingApp struct {
	addr string
	ln   net.Listener

	mu    sync.Mutex
	reqs  []appRequest
	conns int
	open  sync.WaitGroup
	live  []net.Conn
	// handle, if set, answers instead of the default 200; it may write anything.
	handle func(conn net.Conn, req *http.Request, body string) (keep bool)
}

// countingReader counts the bytes read through it and keeps them.
type countingReader struct {
	r   io.Reader
	buf strings.Builder
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf.Write(p[:n])
	return n, err
}

func newRecordingApp(t *testing.T) *recordingApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &recordingApp{addr: ln.Addr().String(), ln: ln}
	go a.accept()
	t.Cleanup(func() { ln.Close() })
	return a
}

func (a *recordingApp) accept() {
	for {
		nc, err := a.ln.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		a.conns++
		id := a.conns
		a.open.Add(1)
		a.live = append(a.live, nc)
		a.mu.Unlock()
		go a.serve(id, nc)
	}
}

func (a *recordingApp) serve(id int, nc net.Conn) {
	defer a.open.Done()
	defer nc.Close()
	cr := &countingReader{r: nc}
	br := bufio.NewReader(cr)
	consumed := 0
	for {
		if _, err := br.Peek(1); err != nil {
			return
		}
		req, err := http.ReadRequest(br)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(req.Body)
		}
		end := cr.buf.Len() - br.Buffered()
		raw := cr.buf.String()[consumed:end]
		consumed = end
		if err != nil {
			a.record(appRequest{conn: id, raw: raw, method: "ERROR", body: err.Error()})
			return
		}
		a.record(appRequest{conn: id, raw: raw, method: req.Method, target: req.RequestURI, host: req.Host, header: req.Header, body: string(body)})
		a.mu.Lock()
		handle := a.handle
		a.mu.Unlock()
		if handle != nil {
			if !handle(nc, req, string(body)) {
				return
			}
			continue
		}
		msg := "seen " + req.Method + " " + req.RequestURI
		if _, err := fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg); err != nil {
			return
		}
	}
}

func (a *recordingApp) record(r appRequest) {
	a.mu.Lock()
	a.reqs = append(a.reqs, r)
	a.mu.Unlock()
}

// requests returns what the app has read so far.
func (a *recordingApp) requests() []appRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appRequest(nil), a.reqs...)
}

// settled stops the proxy p (which closes its connections to the app) and waits until
// the app has read everything it was sent, then returns it.
func (a *recordingApp) settled(t *testing.T, p *running) []appRequest {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for start's cleanup
	case <-time.After(hangGuard):
		t.Fatal("the proxy did not stop")
	}
	// The accept loop counts connections under a.mu: taking it orders every Add
	// before the Wait (the race detector requires it; the proxy has stopped, so no
	// connection comes later).
	a.mu.Lock()
	a.mu.Unlock() //nolint:staticcheck // an empty critical section, for the ordering
	done := make(chan struct{})
	go func() { a.open.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("the app's connections did not close after the proxy stopped")
	}
	return a.requests()
}

// rawConn is a client connection that writes raw bytes and reads responses.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(hangGuard)))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(raw string) {
	c.t.Helper()
	_, err := io.WriteString(c.nc, raw)
	require.NoError(c.t, err)
}

// response reads one response (to a request with method) and its body; err is set if
// none could be read (the connection closed or broke).
func (c *rawConn) response(method string) (*http.Response, string, error) {
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// closed reports whether the proxy closes the connection with no more bytes; a
// connection still open when the hang guard ends is not closed.
func (c *rawConn) closed() bool {
	c.t.Helper()
	var b [1]byte
	n, err := c.br.Read(b[:])
	return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// crash stops the app as a crash would: no new connections, and every open one closed.
func (a *recordingApp) crash() {
	a.ln.Close()
	a.mu.Lock()
	conns := append([]net.Conn(nil), a.live...)
	a.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func itoa(n int) string { return fmt.Sprint(n) }
