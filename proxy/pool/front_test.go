package pool

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool/auth"
)

var testKey = bytes.Repeat([]byte{7}, auth.KeySize)

type testFront struct {
	f    *Front
	addr string
	rec  *measure.Recorder
}

func newTestFront(t *testing.T, maxQueue int, maxWait time.Duration) *testFront {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop"), testKey, 0o600))
	keys, err := auth.NewDirKeyring(dir, nil)
	require.NoError(t, err)
	rec := measure.New(nil, 0, 0)
	f, err := NewFront(FrontConfig{Keys: keys, MaxQueue: maxQueue, MaxWait: maxWait, PollTimeout: 300 * time.Millisecond, Counters: rec.EnableFront()})
	require.NoError(t, err)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	return &testFront{f: f, addr: srv.Listener.Addr().String(), rec: rec}
}

// exchange writes raw on a new connection and returns it with a reader.
func exchange(t *testing.T, addr, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(20*time.Second)))
	_, err = io.WriteString(nc, raw)
	require.NoError(t, err)
	return nc, bufio.NewReader(nc)
}

func signed(method, target, hop string) string {
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: f\r\nQas-Workload: shop\r\nQas-Hop: %s\r\nQas-Auth: %s\r\n", method, target, hop,
		auth.Sign(testKey, time.Now(), "shop", method, target, hop))
}

const innerReq = "GET /x HTTP/1.1\r\nHost: app\r\n\r\n"

func overflowRaw(inner string) string {
	return signed("POST", PathOverflow, HopOverflow) + fmt.Sprintf("Content-Type: message/http\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner)
}

func read(t *testing.T, br *bufio.Reader, method string) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	require.NoError(t, err)
	return resp
}

// pullRaw pulls once and returns the id (or "" on 204).
func pullRaw(t *testing.T, addr string) (string, string) {
	_, br := exchange(t, addr, signed("GET", PathPull, HopControl)+"\r\n")
	resp := read(t, br, "GET")
	if resp.StatusCode == http.StatusNoContent {
		return "", ""
	}
	require.Equal(t, 200, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get(HeaderID), string(b)
}

func TestFrontQueueFullRefusesWithRetryAfter(t *testing.T) {
	tf := newTestFront(t, 1, 5*time.Second)
	_, br := exchange(t, tf.addr, overflowRaw(innerReq))
	require.Equal(t, 100, read(t, br, "POST").StatusCode, "accepted")
	_, br2 := exchange(t, tf.addr, overflowRaw(innerReq))
	resp := read(t, br2, "POST")
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	s := tf.rec.Snapshot()
	require.NoError(t, s.Validate())
	require.Equal(t, uint64(1), s.Front.RefusedFull)
	require.Equal(t, uint64(1), s.Front.Accepted)
	require.Equal(t, int64(1), s.Front.QueueLength)
}

func TestFrontRefusesBadBytes(t *testing.T) {
	tf := newTestFront(t, 5, 5*time.Second)
	for _, inner := range []string{
		"GET /x HTTP/1.1\r\nHost: app\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: app\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: app\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: app\r\nQas-Hop: 1\r\n\r\n",
		"not http at all\r\n\r\n",
		// No sidecar sends a CONNECT; one that did is not queued for an app.
		"CONNECT app:443 HTTP/1.1\r\nHost: app:443\r\n\r\n",
		"CONNECT / HTTP/1.1\r\nHost: app\r\n\r\n",
		"connect / HTTP/1.1\r\nHost: app\r\n\r\n",
	} {
		_, br := exchange(t, tf.addr, overflowRaw(inner))
		require.Equal(t, 100, read(t, br, "POST").StatusCode)
		require.Equal(t, 400, read(t, br, "POST").StatusCode, "%q", inner)
	}
	s := tf.rec.Snapshot()
	require.Zero(t, s.Front.QueueLength, "none was queued")
	require.Equal(t, uint64(7), s.Front.Expired)
	id, _ := pullRaw(t, tf.addr)
	require.Empty(t, id, "nothing to pull")
}

// TestFrontOfferedAgainFirst: a request returned by a pull that could not take it, or
// not taken within the ack timeout, is offered again before newer ones.
func TestFrontOfferedAgainFirst(t *testing.T) {
	tf := newTestFront(t, 5, 10*time.Second)
	_, br1 := exchange(t, tf.addr, overflowRaw("GET /first HTTP/1.1\r\nHost: app\r\n\r\n"))
	require.Equal(t, 100, read(t, br1, "POST").StatusCode)
	// In the queue, not only accepted: a request joins the queue once its bytes are
	// in (the gauge counts it from the acceptance), so /second must wait for that.
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 1 }, 5*time.Second, time.Millisecond)
	_, br2 := exchange(t, tf.addr, overflowRaw("GET /second HTTP/1.1\r\nHost: app\r\n\r\n"))
	require.Equal(t, 100, read(t, br2, "POST").StatusCode)
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 2 }, 5*time.Second, time.Millisecond)

	id, data := pullRaw(t, tf.addr)
	require.Contains(t, data, "/first")
	// Returned: offered again first.
	_, br := exchange(t, tf.addr, signed("POST", PathReturn+id, HopControl)+"Content-Length: 0\r\n\r\n")
	require.Equal(t, 204, read(t, br, "POST").StatusCode)
	id2, data := pullRaw(t, tf.addr)
	require.Contains(t, data, "/first")
	require.Equal(t, id, id2)
	// A return of a request no longer offered to anyone is refused.
	_, br = exchange(t, tf.addr, signed("POST", PathReturn+strings.Repeat("0", 32), HopControl)+"Content-Length: 0\r\n\r\n")
	require.Equal(t, 409, read(t, br, "POST").StatusCode)
	// While /first is offered, the next pull gets /second; returned, it waits.
	idS, data := pullRaw(t, tf.addr)
	require.Contains(t, data, "/second")
	_, br = exchange(t, tf.addr, signed("POST", PathReturn+idS, HopControl)+"Content-Length: 0\r\n\r\n")
	require.Equal(t, 204, read(t, br, "POST").StatusCode)
	// /first is not taken within the ack timeout: offered again, ahead of /second.
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 2 }, 10*time.Second, time.Millisecond)
	id3, data := pullRaw(t, tf.addr)
	require.Contains(t, data, "/first")
	require.Equal(t, id, id3)

	// Taken with a result: its sender gets the result as the response.
	nc, br := exchange(t, tf.addr, signed("POST", PathResult+id, HopControl)+"Content-Type: message/http\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
	require.Equal(t, 100, read(t, br, "POST").StatusCode, "taken")
	result := "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
	_, err := fmt.Fprintf(nc, "%x\r\n%s\r\n0\r\n\r\n", len(result), result)
	require.NoError(t, err)
	require.Equal(t, 204, read(t, br, "POST").StatusCode)
	outer := read(t, br1, "POST")
	require.Equal(t, 200, outer.StatusCode)
	require.Equal(t, ContentType, outer.Header.Get("Content-Type"))
	inner, err := http.ReadResponse(bufio.NewReader(outer.Body), &http.Request{Method: "GET"})
	require.NoError(t, err)
	require.Equal(t, 201, inner.StatusCode)
	b, _ := io.ReadAll(inner.Body)
	require.Equal(t, "ok", string(b))
	// A second result for the same id is refused: it was taken once.
	_, br = exchange(t, tf.addr, signed("POST", PathResult+id, HopControl)+"Content-Type: message/http\r\nContent-Length: 0\r\n\r\n")
	require.Equal(t, 409, read(t, br, "POST").StatusCode)
	s := tf.rec.Snapshot()
	require.NoError(t, s.Validate())
	require.Equal(t, uint64(1), s.Front.Dispatched, "dispatched once, however often offered")
	require.Equal(t, int64(1), s.Front.QueueLength)
}

// TestFrontSenderGoneIsNotServed: a request whose sender left before a pull took it
// is dropped (expired), never offered.
func TestFrontSenderGoneIsNotServed(t *testing.T) {
	tf := newTestFront(t, 5, 10*time.Second)
	nc, br := exchange(t, tf.addr, overflowRaw(innerReq))
	require.Equal(t, 100, read(t, br, "POST").StatusCode)
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 1 }, 5*time.Second, time.Millisecond)
	nc.Close()
	require.Eventually(t, func() bool { return tf.rec.Snapshot().Front.Expired == 1 }, 5*time.Second, time.Millisecond)
	id, _ := pullRaw(t, tf.addr)
	require.Empty(t, id)
}

func TestFrontDrainRefusesNewOverflow(t *testing.T) {
	tf := newTestFront(t, 5, 10*time.Second)
	tf.f.StartDrain()
	_, br := exchange(t, tf.addr, overflowRaw(innerReq))
	resp := read(t, br, "POST")
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
}

// TestFrontMarksOnlyUnseenExpiry: the front's 503 carries HeaderExpired only for a
// request no pull ever took (queued past the max wait, offered and returned, or the
// front closing); its refusals before acceptance never carry it.
func TestFrontMarksOnlyUnseenExpiry(t *testing.T) {
	tf := newTestFront(t, 1, 300*time.Millisecond)
	_, br := exchange(t, tf.addr, overflowRaw(innerReq))
	require.Equal(t, 100, read(t, br, "POST").StatusCode)
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 1 }, 5*time.Second, time.Millisecond)
	// Offered to a pull and given back: still unseen.
	id, _ := pullRaw(t, tf.addr)
	require.NotEmpty(t, id)
	_, rb := exchange(t, tf.addr, signed("POST", PathReturn+id, HopControl)+"Content-Length: 0\r\n\r\n")
	require.Equal(t, 204, read(t, rb, "POST").StatusCode)
	// The queue (1) is full: a refusal, before acceptance, is not marked.
	_, fb := exchange(t, tf.addr, overflowRaw(innerReq))
	full := read(t, fb, "POST")
	require.Equal(t, 503, full.StatusCode)
	require.Empty(t, full.Header.Values(HeaderExpired))

	expired := read(t, br, "POST")
	require.Equal(t, 503, expired.StatusCode)
	require.Equal(t, "1", expired.Header.Get("Retry-After"))
	require.Equal(t, []string{ExpiredUnseen}, expired.Header.Values(HeaderExpired))

	// The front closing expires what is queued, marked the same way.
	_, cb := exchange(t, tf.addr, overflowRaw(innerReq))
	require.Equal(t, 100, read(t, cb, "POST").StatusCode)
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 1 }, 5*time.Second, time.Millisecond)
	tf.f.Close()
	closed := read(t, cb, "POST")
	require.Equal(t, 503, closed.StatusCode)
	require.Equal(t, ExpiredUnseen, closed.Header.Get(HeaderExpired))

	tf.f.StartDrain()
	_, db := exchange(t, tf.addr, overflowRaw(innerReq))
	draining := read(t, db, "POST")
	require.Equal(t, 503, draining.StatusCode)
	require.Empty(t, draining.Header.Values(HeaderExpired), "a draining front's refusal is not an expiry")
}

// TestOverflowExpiredOnlyFromTheFront: Overflow answers Expired only for the front's
// own marked 503. An app's response that carries the same field (inside the front's
// 200) is the app's answer: Accepted, so it is relayed and never served again.
func TestOverflowExpiredOnlyFromTheFront(t *testing.T) {
	tf := newTestFront(t, 5, 300*time.Millisecond)
	rec := measure.New(nil, 1, 1)
	s := testSidecar(t, tf.addr, rec)
	head := []byte("GET /x HTTP/1.1\r\nHost: app\r\n\r\n")

	resp, answer, err := s.Overflow(context.Background(), "GET", head, http.NoBody, 0)
	require.NoError(t, err)
	require.Equal(t, Expired, answer, "nobody pulled it")
	require.Equal(t, 503, resp.StatusCode)
	resp.Body.Close()

	// A front whose max wait no test run reaches, so the request is surely pulled.
	tf = newTestFront(t, 5, time.Minute)
	s = testSidecar(t, tf.addr, rec)
	type result struct {
		resp   *http.Response
		answer Answer
		err    error
	}
	done := make(chan result, 1)
	go func() {
		r, a, err := s.Overflow(context.Background(), "GET", head, http.NoBody, 0)
		done <- result{r, a, err}
	}()
	var id, data string
	require.Eventually(t, func() bool { return tf.f.queued("shop") == 1 }, 5*time.Second, time.Millisecond)
	id, data = pullRaw(t, tf.addr)
	require.Equal(t, string(head), data)
	nc, br := exchange(t, tf.addr, signed("POST", PathResult+id, HopControl)+"Content-Type: message/http\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
	require.Equal(t, 100, read(t, br, "POST").StatusCode, "taken: from here the app may see it")
	inner := "HTTP/1.1 503 Service Unavailable\r\n" + HeaderExpired + ": " + ExpiredUnseen + "\r\nContent-Length: 2\r\n\r\nno"
	_, err = fmt.Fprintf(nc, "%x\r\n%s\r\n0\r\n\r\n", len(inner), inner)
	require.NoError(t, err)
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, Accepted, got.answer, "the app's field does not make it unseen")
	require.Equal(t, 503, got.resp.StatusCode)
	b, _ := io.ReadAll(got.resp.Body)
	got.resp.Body.Close()
	require.Equal(t, "no", string(b))
	require.Equal(t, 204, read(t, br, "POST").StatusCode)
}
