package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/qas-dev/qas/proxy/pool"
)

// h2Conn is a raw HTTP/2 client connection (prior knowledge) that sends any
// fields, hostile ones included, and reads the frames of each answer.
type h2Conn struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hb   bytes.Buffer
	next uint32
}

func dialH2(t *testing.T, addr string) *h2Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(hangGuard)))
	_, err = io.WriteString(nc, http2.ClientPreface)
	require.NoError(t, err)
	c := &h2Conn{t: t, nc: nc, fr: http2.NewFramer(nc, nc), next: 1}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hb)
	require.NoError(t, c.fr.WriteSettings())
	return c
}

// h2Field is a field as sent on the wire: any name, any value.
type h2Field struct{ name, value string }

// pseudo is the pseudo-fields of a request to path with method and authority (none
// if empty), then extra.
func pseudo(method, path, authority string, extra ...h2Field) []h2Field {
	f := []h2Field{{":method", method}, {":scheme", "http"}, {":path", path}}
	if authority != "" {
		f = append(f, h2Field{":authority", authority})
	}
	return append(f, extra...)
}

// request sends HEADERS with fields (END_STREAM if there are no data frames), then
// each of data as a DATA frame, the last with END_STREAM; it returns the stream.
func (c *h2Conn) request(fields []h2Field, data ...string) uint32 {
	c.t.Helper()
	return c.send(fields, true, data...)
}

// data sends one DATA frame on stream id.
func (c *h2Conn) data(id uint32, d string, end bool) {
	c.t.Helper()
	require.NoError(c.t, c.fr.WriteData(id, end, []byte(d)))
}

// open sends HEADERS with fields and then data as DATA frames, leaving the stream
// open (no END_STREAM); it returns the stream.
func (c *h2Conn) open(fields []h2Field, data ...string) uint32 {
	c.t.Helper()
	return c.send(fields, false, data...)
}

// send opens a stream with HEADERS of fields and sends data as DATA frames,
// ending the stream with the last frame (HEADERS if there is no data) when end.
func (c *h2Conn) send(fields []h2Field, end bool, data ...string) uint32 {
	c.t.Helper()
	id := c.next
	c.next += 2
	c.hb.Reset()
	for _, f := range fields {
		require.NoError(c.t, c.enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value}))
	}
	require.NoError(c.t, c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hb.Bytes(),
		EndHeaders: true, EndStream: end && len(data) == 0}))
	for i, d := range data {
		c.data(id, d, end && i == len(data)-1)
	}
	return id
}

// h2Answer is what a client got on one stream.
type h2Answer struct {
	status  string
	header  http.Header
	body    string
	trailer http.Header
	reset   bool // RST_STREAM
	code    http2.ErrCode
}

// answer reads frames until stream id ends, answering SETTINGS and PING.
func (c *h2Conn) answer(id uint32) h2Answer {
	c.t.Helper()
	var a h2Answer
	return c.answerUntil(id, &a, func() bool { return false })
}

// answerUntil reads frames of stream id into a until the stream ends or enough
// says so after a frame of it.
func (c *h2Conn) answerUntil(id uint32, a *h2Answer, enough func() bool) h2Answer {
	c.t.Helper()
	for {
		if a.header != nil && enough() {
			return *a
		}
		f, err := c.fr.ReadFrame()
		require.NoError(c.t, err, "stream %d", id)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(c.t, c.fr.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				require.NoError(c.t, c.fr.WritePing(true, f.Data))
			}
		case *http2.GoAwayFrame:
			require.GreaterOrEqual(c.t, f.LastStreamID, id, "the connection went away before stream %d", id)
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			h := http.Header{}
			for _, hf := range f.RegularFields() {
				h.Add(hf.Name, hf.Value)
			}
			if status := f.PseudoValue("status"); strings.HasPrefix(status, "1") {
				continue // informational
			}
			if a.header == nil {
				a.status, a.header = f.PseudoValue("status"), h
			} else {
				a.trailer = h
			}
			if f.StreamEnded() {
				return *a
			}
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			a.body += string(f.Data())
			if len(f.Data()) > 0 {
				require.NoError(c.t, c.fr.WriteWindowUpdate(0, uint32(len(f.Data()))))
			}
			if f.StreamEnded() {
				return *a
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				a.reset, a.code = true, f.ErrCode
				return *a
			}
		}
	}
}

// pooledRaw is two pooled sidecars in front of recording apps and a front; A's
// only slot can be held by the test.
type pooledRaw struct {
	appA, appB *recordingApp
	front      *runningFront
	a, b       *running
}

func newPooledRaw(t *testing.T, cfg func(*PoolConfig)) *pooledRaw {
	t.Helper()
	p := &pooledRaw{appA: newRecordingApp(t), appB: newRecordingApp(t)}
	p.front, p.a, p.b = startPooledPair(t, p.appA.addr, p.appB.addr, cfg)
	return p
}

// startPooledPair runs a front and two pooled sidecars with one slot each in front
// of appA and appB, and waits until both pull.
func startPooledPair(t *testing.T, appA, appB string, cfg func(*PoolConfig)) (front *runningFront, a, b *running) {
	t.Helper()
	secret := secretFile(t)
	front = startFront(t, secret, 5*time.Second)
	sidecar := func(app string) *running {
		pc := &PoolConfig{Workload: workload, Keys: keyring(t, secret), Fronts: pool.Static{front.addr}}
		if cfg != nil {
			cfg(pc)
		}
		return start(t, app, Config{ConcurrencyLimit: 1, QueueLimit: 100, Pool: pc}, Options{})
	}
	a, b = sidecar(appA), sidecar(appB)
	waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })
	return front, a, b
}

// holdA takes A's only slot (holdSlot).
func (p *pooledRaw) holdA(t *testing.T, releaseWhenQueued bool) func() {
	return holdSlot(t, p.a, releaseWhenQueued)
}

// holdSlot takes the only slot of a; the returned func gives it back (once). With
// releaseWhenQueued, a goroutine gives it back as soon as a request waits at a (one
// that may not move).
func holdSlot(t *testing.T, a *running, releaseWhenQueued bool) func() {
	t.Helper()
	// A client may have read the whole answer to an earlier request before its
	// handler gave the slot back: wait for it.
	waitFor(t, "the only slot is held", a.srv.lim.TryAdmit)
	released := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { a.srv.lim.Release(); close(released) }) }
	t.Cleanup(release)
	if releaseWhenQueued {
		go func() {
			for {
				select {
				case <-released:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if a.srv.Recorder.Snapshot().Waiting > 0 {
					release()
					return
				}
			}
		}()
	}
	return release
}

// lastRaw is the exact bytes of the last request app read.
func lastRaw(t *testing.T, app *recordingApp) string {
	t.Helper()
	reqs := app.requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1].raw
}

// withoutFraming drops the Content-Length and Transfer-Encoding lines of a raw
// request head, and the body's framing, leaving what the app reads of it.
func withoutFraming(r appRequest) string {
	h := r.header.Clone()
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	var b strings.Builder
	_ = h.Write(&b)
	return r.method + " " + r.target + " host=" + r.host + "\n" + b.String() + "body=" + r.body
}

// TestH2CRequestsOverflow: with A's only slot busy, HTTP/2 (h2c) requests overflow
// through the front and are served by B's app exactly once; B's app gets exactly
// the bytes A's app gets for the same request served locally (Host from
// :authority, the X-Forwarded fields, TE: trailers, cookies joined, no pseudo-field,
// no Qas- field, the body), and the client gets B's answer. A body of unknown length
// (no content-length, as a gRPC call sends) is read ahead and moves with a
// Content-Length; the app gets the same fields and body as locally, only framed by
// its length instead of chunked.
func TestH2CRequestsOverflow(t *testing.T) {
	p := newPooledRaw(t, nil)
	for _, tt := range []struct {
		name    string
		fields  []h2Field
		data    []string
		unknown bool // no content-length: the local path chunks it
	}{
		{name: "GET", fields: append(pseudo("GET", "/get?q=1&r=%20x", "shop.example:8080"),
			h2Field{"x-id", "get"}, h2Field{"x-forwarded-for", "10.1.2.3"}, h2Field{"cookie", "a=1"}, h2Field{"cookie", "b=2"},
			h2Field{"user-agent", "raw-h2"}, h2Field{"accept", "*/*"})},
		{name: "POST with a length", fields: append(pseudo("POST", "/post", "shop.example"),
			h2Field{"x-id", "post"}, h2Field{"content-length", "11"}, h2Field{"te", "trailers"}, h2Field{"content-type", "application/grpc"},
			h2Field{"x-forwarded-proto", "https"}, h2Field{"x-forwarded-host", "public.example"}, h2Field{"forwarded", "for=10.0.0.1"}),
			data: []string{"hello", " world"}},
		{name: "POST of unknown length", fields: append(pseudo("POST", "/grpc.Service/Call", "shop.example"),
			h2Field{"x-id", "unknown"}, h2Field{"te", "trailers"}, h2Field{"content-type", "application/grpc"}),
			data: []string{"\x00\x00\x00\x00\x03", "abc"}, unknown: true},
		{name: "DELETE without a body", fields: append(pseudo("DELETE", "/items/7", "shop.example"), h2Field{"x-id", "delete"})},
		{name: "Qas fields from the client", fields: append(pseudo("PUT", "/put", "shop.example"),
			h2Field{"x-id", "qas"}, h2Field{"qas-hop", "1"}, h2Field{"qas-workload", workload}, h2Field{"qas-auth", "t=1,n=0123456789abcdef,mac=00"},
			h2Field{"qas-expired", "unseen"}, h2Field{"content-length", "3"}), data: []string{"put"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Locally first: A has a free slot.
			c := dialH2(t, p.a.srv.Addr())
			local := c.answer(c.request(tt.fields, tt.data...))
			require.Equal(t, "200", local.status)
			nA, nB := len(p.appA.requests()), len(p.appB.requests())
			wantRaw, want := lastRaw(t, p.appA), p.appA.requests()[nA-1]

			release := p.holdA(t, false)
			c = dialH2(t, p.a.srv.Addr())
			moved := c.answer(c.request(tt.fields, tt.data...))
			release()
			require.Equal(t, "200", moved.status)
			require.Equal(t, local.body, moved.body, "the client gets the app's answer")
			require.Len(t, p.appA.requests(), nA, "A's app never sees the moved request")
			require.Len(t, p.appB.requests(), nB+1, "B's app sees it exactly once")
			got := p.appB.requests()[nB]
			require.NotContains(t, strings.ToLower(got.raw), "\r\nqas-", "no Qas- field reaches an app")
			require.NotContains(t, got.raw, "\r\n:", "no pseudo-field reaches an app")
			if !tt.unknown {
				require.Equal(t, wantRaw, got.raw, "B's app gets the bytes A's app gets locally")
				return
			}
			require.Contains(t, wantRaw, "\r\nTransfer-Encoding: chunked\r\n", "locally the body is chunked")
			require.Contains(t, got.raw, fmt.Sprintf("\r\nContent-Length: %d\r\n", len(strings.Join(tt.data, ""))), "moved, framed by its length")
			require.NotContains(t, got.raw, "Transfer-Encoding")
			require.Equal(t, withoutFraming(want), withoutFraming(got))
		})
	}
	sa := snapshot(t, p.a)
	require.Equal(t, uint64(5), sa.Pool.OverflowAccepted)
	waitForPulls(t, p.b, 5)
	require.Equal(t, uint64(10), sa.Arrivals)
	require.Equal(t, uint64(10), sa.Completions)
}

// TestH2CClientOverflows: Go's own HTTP/2 client (h2c, prior knowledge) to a pair
// whose A has its only slot busy: its requests go to B's app, once each, with what
// the client sent.
func TestH2CClientOverflows(t *testing.T) {
	p := newPair(t, false, 5*time.Second)
	blocked := sendAsync(p.a.url, "GET", "/block", "held", "")
	waitFor(t, "A's slot is busy", func() bool { return p.apps.inApp.Load() == 1 })
	client := h2cClient()
	for i := range 3 {
		id := fmt.Sprint("h2-", i)
		req, err := http.NewRequestWithContext(context.Background(), "POST", p.a.url+"/moved?i="+fmt.Sprint(i), strings.NewReader("body "+id))
		require.NoError(t, err)
		req.Header.Set("X-Id", id)
		req.Header.Set("Qas-Hop", "1")
		resp, err := client.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, "HTTP/2.0", resp.Proto)
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "B", resp.Header.Get("X-Served-By"))
		require.Equal(t, "B:/moved:body "+id, string(b))
	}
	p.apps.unblock()
	require.Equal(t, "A", (<-blocked).by)
	for _, s := range p.apps.requests() {
		if !strings.HasPrefix(s.id, "h2-") {
			continue
		}
		require.Equal(t, "B", s.app)
		require.Equal(t, "POST", s.method)
		require.Equal(t, "body "+s.id, s.body)
		require.Equal(t, "127.0.0.1", s.header.Get("X-Forwarded-For"))
		require.Equal(t, "http", s.header.Get("X-Forwarded-Proto"))
		require.Equal(t, strings.TrimPrefix(p.a.url, "http://"), s.header.Get("X-Forwarded-Host"))
		for name := range s.header {
			require.False(t, strings.HasPrefix(name, "Qas-"), "the app sees no pooling field: %s", name)
		}
	}
	for i := range 3 {
		require.Equal(t, []string{"B"}, p.apps.byID()[fmt.Sprint("h2-", i)], "exactly one app, exactly once")
	}
	require.Equal(t, uint64(3), snapshot(t, p.a).Pool.OverflowAccepted)
	waitForPulls(t, p.b, 3)
}

// TestH2HostileFieldsPooled sends raw HTTP/2 frames with hostile fields to a pooled
// sidecar whose only slot is busy, and asserts what the client gets and what each
// app receives. Bad bytes in names and values, connection-specific fields and a bad
// :authority are refused by net/http's HTTP/2 server before the proxy sees them
// (no app gets anything); a method or target no HTTP/1.1 request line can carry is
// refused by the proxy (400) on every path, and a CONNECT (405: it opens no tunnel); a content-length the DATA frames
// contradict never reaches an app, locally or moved; a Qas- field is stripped and the
// request moves; what may not move is served by A's own app once its slot frees.
func TestH2HostileFieldsPooled(t *testing.T) {
	get := func(extra ...h2Field) []h2Field { return append(pseudo("GET", "/h", "shop.example"), extra...) }
	post := func(extra ...h2Field) []h2Field { return append(pseudo("POST", "/p", "shop.example"), extra...) }
	const refusedByServer = http2.ErrCodeProtocol
	for _, tt := range []struct {
		name   string
		fields []h2Field
		data   []string
		// The client's answer: status, or a reset with code.
		status string
		reset  bool
		code   http2.ErrCode
		// Which app gets it ("" none) and what it must hold.
		app      string
		accepted uint64 // A's overflows the front accepted
		// acceptedOrNot: the server may reset the stream before or after the front
		// accepts it (then its body fails at once: nothing reaches an app).
		acceptedOrNot bool
		check         func(t *testing.T, r appRequest)
	}{
		{name: "CR in a value", fields: get(h2Field{"x-a", "a\rb"}), reset: true, code: refusedByServer},
		{name: "LF in a value", fields: get(h2Field{"x-a", "a\nb"}), reset: true, code: refusedByServer},
		{name: "CRLF and a field in a value", fields: get(h2Field{"x-a", "a\r\nX-Injected: 1"}), reset: true, code: refusedByServer},
		{name: "NUL in a value", fields: get(h2Field{"x-a", "a\x00b"}), reset: true, code: refusedByServer},
		{name: "CR in the authority", fields: pseudo("GET", "/h", "shop\r\nX-Injected: 1"), reset: true, code: refusedByServer},
		{name: "LF in the path", fields: pseudo("GET", "/h\nX-Injected: 1", "shop"), reset: true, code: refusedByServer},
		{name: "uppercase name", fields: get(h2Field{"X-Upper", "1"}), reset: true, code: refusedByServer},
		{name: "space in a name", fields: get(h2Field{"x a", "1"}), reset: true, code: refusedByServer},
		{name: "colon in a name", fields: get(h2Field{"x:a", "1"}), reset: true, code: refusedByServer},
		{name: "empty name", fields: get(h2Field{"", "1"}), reset: true, code: refusedByServer},
		{name: "unknown pseudo-field", fields: get(h2Field{":evil", "1"}), reset: true, code: refusedByServer},
		{name: "pseudo-field after a regular one", fields: append(get(h2Field{"x-a", "1"}), h2Field{":authority", "other"}), reset: true, code: refusedByServer},
		{name: "extended CONNECT", fields: append(pseudo("CONNECT", "/ws", "shop.example"), h2Field{":protocol", "websocket"}), reset: true, code: refusedByServer},
		{name: "connection", fields: get(h2Field{"connection", "close"}), status: "400"},
		{name: "transfer-encoding", fields: post(h2Field{"transfer-encoding", "chunked"}), data: []string{"5\r\nhello\r\n0\r\n\r\n"}, status: "400"},
		{name: "upgrade", fields: get(h2Field{"upgrade", "websocket"}), status: "400"},
		{name: "keep-alive", fields: get(h2Field{"keep-alive", "5"}), status: "400"},
		{name: "proxy-connection", fields: get(h2Field{"proxy-connection", "keep-alive"}), status: "400"},
		{name: "te other than trailers", fields: get(h2Field{"te", "gzip"}), status: "400"},
		{name: "space in the authority", fields: pseudo("GET", "/h", "shop example"), reset: true, code: refusedByServer},
		{name: "userinfo in the authority", fields: pseudo("GET", "/h", "user@shop"), reset: true, code: refusedByServer},
		{name: "slash in the authority", fields: pseudo("GET", "/h", "shop/evil"), reset: true, code: refusedByServer},
		{name: "host other than the authority", fields: get(h2Field{"host", "evil.example"}), reset: true, code: refusedByServer},
		{name: "two hosts", fields: pseudo("GET", "/h", "", h2Field{"host", "a"}, h2Field{"host", "b"}), reset: true, code: refusedByServer},
		{name: "space in the method", fields: pseudo("GET /smuggled", "/h", "shop"), status: "400"},
		{name: "space in the query", fields: pseudo("GET", "/h?a HTTP/1.1\tb", "shop"), reset: true, code: refusedByServer},
		{name: "space in the query, no tab", fields: pseudo("GET", "/h?a b", "shop"), status: "400"},
		{name: "byte above 0x7e in the query", fields: pseudo("GET", "/h?a=\xff", "shop"), status: "400"},
		{name: "path not starting with a slash", fields: pseudo("GET", "h", "shop"), reset: true, code: refusedByServer},
		{name: "Qas fields", fields: get(h2Field{"qas-hop", "1"}, h2Field{"qas-workload", workload}, h2Field{"qas-id", strings.Repeat("a", 32)}, h2Field{"x-keep", "1"}),
			status: "200", app: "B", accepted: 1, check: func(t *testing.T, r appRequest) {
				require.NotContains(t, strings.ToLower(r.raw), "qas-")
				require.Equal(t, "1", r.header.Get("X-Keep"))
			}},
		{name: "content-length above the data", fields: post(h2Field{"content-length", "10"}), data: []string{"hello"}, status: "400", accepted: 1},
		{name: "content-length below the data", fields: post(h2Field{"content-length", "3"}), data: []string{"hello"}, reset: true, code: refusedByServer, acceptedOrNot: true},
		{name: "content-length not a number", fields: post(h2Field{"content-length", "abc"}), data: []string{"x"}, reset: true, code: refusedByServer},
		{name: "content-length on an ended request", fields: post(h2Field{"content-length", "5"}), status: "200", app: "A",
			check: func(t *testing.T, r appRequest) {
				require.Equal(t, "POST", r.method)
				require.Equal(t, "0", r.header.Get("Content-Length"))
				require.Empty(t, r.body)
			}},
		{name: "two content-lengths", fields: post(h2Field{"content-length", "5"}, h2Field{"content-length", "5"}), data: []string{"hello"}, status: "200", app: "A",
			check: func(t *testing.T, r appRequest) { require.Equal(t, "hello", r.body) }},
		{name: "declared trailer", fields: post(h2Field{"content-length", "5"}, h2Field{"trailer", "x-sum"}), data: []string{"hello"}, status: "200", app: "A",
			check: func(t *testing.T, r appRequest) { require.Equal(t, "hello", r.body) }},
		// The proxy opens no tunnel: 405, nothing queued at A, moved or seen by an
		// app (until 2026-11-26 A's app got "CONNECT / HTTP/1.1" and the client its
		// 200).
		{name: "CONNECT", fields: []h2Field{{":method", "CONNECT"}, {":authority", "shop.example:443"}}, status: "405"},
		{name: "CONNECT with tunnel bytes", fields: []h2Field{{":method", "CONNECT"}, {":authority", "shop.example:443"}},
			data: []string{"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"}, status: "405"},
		{name: "lower-case connect", fields: pseudo("connect", "/h", "shop.example"), status: "405"},
		{name: "expect 100-continue", fields: post(h2Field{"content-length", "5"}, h2Field{"expect", "100-continue"}), data: []string{"hello"},
			status: "200", app: "B", accepted: 1, check: func(t *testing.T, r appRequest) {
				require.Equal(t, "hello", r.body)
				require.Empty(t, r.header.Values("Expect"), "net/http's HTTP/2 server answers the expectation itself")
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPooledRaw(t, nil)
			release := p.holdA(t, tt.app == "A")
			c := dialH2(t, p.a.srv.Addr())
			got := c.answer(c.request(tt.fields, tt.data...))
			if tt.reset {
				require.True(t, got.reset, "the stream is reset, got %+v", got)
				require.Equal(t, tt.code, got.code)
			} else {
				require.False(t, got.reset, "got %+v", got)
				require.Equal(t, tt.status, got.status, "body %q", got.body)
			}
			release()
			sa := snapshot(t, p.a).Pool
			if tt.acceptedOrNot {
				require.LessOrEqual(t, sa.OverflowAccepted, uint64(1))
			} else {
				require.Equal(t, tt.accepted, sa.OverflowAccepted)
			}
			reqsA, reqsB := p.appA.settled(t, p.a), p.appB.settled(t, p.b)
			switch tt.app {
			case "":
				require.Empty(t, reqsA, "A's app gets nothing")
				require.Empty(t, reqsB, "B's app gets nothing")
			case "A":
				require.Len(t, reqsA, 1)
				require.Empty(t, reqsB, "B's app gets nothing")
				tt.check(t, reqsA[0])
			case "B":
				require.Empty(t, reqsA, "A's app gets nothing")
				require.Len(t, reqsB, 1)
				tt.check(t, reqsB[0])
			}
		})
	}
}

// grpcNamedApp is a real gRPC server (h2c only) with the health service, which
// reports service "qas" as serving; every unary call gets the header
// x-served-by: name and the trailer x-app-trailer: unary, and a call for service
// "fail" ends with FailedPrecondition and a message that needs gRPC's
// percent-encoding.
func grpcNamedApp(t *testing.T, name string, serving healthgrpc.HealthCheckResponse_ServingStatus) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-served-by", name))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-app-trailer", "unary"))
		if r, ok := req.(*healthgrpc.HealthCheckRequest); ok && r.GetService() == "fail" {
			return nil, status.Error(codes.FailedPrecondition, "déjà vu: 100% \r\n of it")
		}
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("qas", serving)
	healthgrpc.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// grpcOverHTTP1 is an HTTP/1.1 app that answers the health service's Check in
// gRPC's wire format (a Go HTTP/1.1 server, so its trailers come after a chunked
// body): service "qas" gets status (1 serving, 2 not serving) and grpc-status 0
// (announced in Trailer) and x-app-trailer (not announced); any other gets
// NotFound in trailers none of which was announced.
func grpcOverHTTP1(t *testing.T, name string, serving byte) string {
	return app(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		// A gRPC message: flag, length, then HealthCheckRequest{service} (field 1).
		if err != nil || len(b) < 7 || b[5] != 0x0a || int(b[6]) != len(b)-7 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Trailer", "Grpc-Status")
		h.Set("X-Served-By", name)
		if string(b[7:]) != "qas" {
			// No trailer announced at all.
			h.Del("Trailer")
			w.WriteHeader(http.StatusOK)
			// Flushed now: chunked, the only HTTP/1.1 framing with trailers.
			_ = http.NewResponseController(w).Flush()
			h.Set(http.TrailerPrefix+"Grpc-Status", "5")
			h.Set(http.TrailerPrefix+"Grpc-Message", "unknown service")
			h.Set(http.TrailerPrefix+"X-App-Trailer", "h1")
			return
		}
		_, _ = w.Write([]byte{0, 0, 0, 0, 2, 0x08, serving})
		h.Set("Grpc-Status", "0")
		h.Set(http.TrailerPrefix+"X-App-Trailer", "h1")
	})
}

// grpcCall is what a client saw of one unary Check.
type grpcCall struct {
	status          healthgrpc.HealthCheckResponse_ServingStatus
	code            codes.Code
	message         string
	header, trailer metadata.MD
	servedBy        string
}

func checkCall(t *testing.T, client healthgrpc.HealthClient, service string) grpcCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var c grpcCall
	resp, err := client.Check(ctx, &healthgrpc.HealthCheckRequest{Service: service}, grpc.Header(&c.header), grpc.Trailer(&c.trailer))
	c.status, c.code, c.message = resp.GetStatus(), status.Code(err), status.Convert(err).Message()
	if v := c.header.Get("x-served-by"); len(v) == 1 {
		c.servedBy = v[0]
	}
	// What both pods answer alike: the served-by header aside.
	c.header = c.header.Copy()
	delete(c.header, "x-served-by")
	delete(c.header, "date")
	return c
}

// TestGRPCUnaryOverflows: gRPC unary calls (no content-length, as gRPC sends them)
// to a pooled pair whose A has its only slot busy are read ahead, overflow, and are
// answered by B's app with the status code, the message and the trailers a local
// call gets; A's app sees none of them. With h2c-only gRPC servers as the apps, and
// with HTTP/1.1 apps that speak gRPC's wire format (their trailers come chunked,
// announced or not).
func TestGRPCUnaryOverflows(t *testing.T) {
	for _, tt := range []struct {
		name     string
		protocol UpstreamProtocol
		newApp   func(t *testing.T, name string, serving bool) string
	}{
		{"h2c gRPC apps", UpstreamH2C, func(t *testing.T, name string, serving bool) string {
			s := healthgrpc.HealthCheckResponse_NOT_SERVING
			if serving {
				s = healthgrpc.HealthCheckResponse_SERVING
			}
			return grpcNamedApp(t, name, s)
		}},
		{"HTTP/1.1 apps", UpstreamHTTP1, func(t *testing.T, name string, serving bool) string {
			if serving {
				return grpcOverHTTP1(t, name, 1)
			}
			return grpcOverHTTP1(t, name, 2)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			secret := secretFile(t)
			front := startFront(t, secret, 5*time.Second)
			sidecar := func(app string) *running {
				// A generous decision deadline: the read-ahead waits no longer than
				// it for the call's DATA frame, which a loaded host may delay.
				return start(t, app, Config{ConcurrencyLimit: 1, QueueLimit: 100, UpstreamProtocol: tt.protocol,
					Pool: &PoolConfig{Workload: workload, Keys: keyring(t, secret), Fronts: pool.Static{front.addr}, DecisionTimeout: 5 * time.Second}},
					Options{FastPath: true})
			}
			// A's app says serving, B's not serving: the answer says who served.
			a, b := sidecar(tt.newApp(t, "A", true)), sidecar(tt.newApp(t, "B", false))
			waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })
			client := grpcHealthClient(t, a.srv.Addr())

			local := map[string]grpcCall{}
			for _, svc := range []string{"qas", "missing", "fail"} {
				if tt.protocol == UpstreamHTTP1 && svc == "fail" {
					continue
				}
				local[svc] = checkCall(t, client, svc)
				require.Equal(t, "A", local[svc].servedBy, "a free slot serves locally")
			}
			require.Equal(t, healthgrpc.HealthCheckResponse_SERVING, local["qas"].status)
			require.Equal(t, codes.OK, local["qas"].code)
			require.Equal(t, codes.NotFound, local["missing"].code)
			require.Equal(t, "unknown service", local["missing"].message)
			require.Zero(t, snapshot(t, a).Pool.OverflowAccepted)

			release := holdSlot(t, a, false)
			for svc, want := range local {
				got := checkCall(t, client, svc)
				require.Equal(t, "B", got.servedBy, "%s: served by the pod that pulled it", svc)
				if svc == "qas" {
					require.Equal(t, healthgrpc.HealthCheckResponse_NOT_SERVING, got.status, "B's app answered")
					got.status = want.status
				}
				got.servedBy = want.servedBy
				require.Equal(t, want, got, "%s: code, message, header and trailers as locally", svc)
			}
			release()
			if tt.protocol == UpstreamH2C {
				require.Equal(t, "déjà vu: 100% \r\n of it", local["fail"].message)
				require.Equal(t, codes.FailedPrecondition, local["fail"].code)
				require.Equal(t, []string{"unary"}, local["qas"].trailer.Get("x-app-trailer"))
			} else {
				require.Equal(t, []string{"h1"}, local["qas"].trailer.Get("x-app-trailer"))
				require.Equal(t, []string{"h1"}, local["missing"].trailer.Get("x-app-trailer"))
			}
			waitForPulls(t, b, uint64(len(local)))
			sa, sb := snapshot(t, a), snapshot(t, b)
			require.Equal(t, uint64(len(local)), sa.Pool.OverflowAccepted)
			require.Equal(t, uint64(len(local)), sb.Pool.Pulled)
			require.Equal(t, uint64(2*len(local)), sa.Arrivals)
			require.Equal(t, uint64(len(local)), sb.Arrivals, "B counts what it pulled")
			require.Equal(t, uint64(2*len(local)), sa.Codes[1], "gRPC answers 200; A counts its clients' answers")
		})
	}
}

// TestH2StreamingBodyStaysLocal: an HTTP/2 request of unknown length whose client
// sends part of its body and waits for an answer before sending the rest (a
// streaming call) is read ahead only until the decision deadline, then served by
// A's own app with the bytes read first and then the rest: the app answers the
// first part before the body ends, the client then sends the rest, and nothing
// moves or is lost.
func TestH2StreamingBodyStaysLocal(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	echo := func(name string) string {
		return app(t, func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			_ = rc.EnableFullDuplex()
			first := make([]byte, 5)
			if _, err := io.ReadFull(r.Body, first); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("X-Served-By", name)
			_, _ = w.Write([]byte("echo:" + string(first)))
			_ = rc.Flush()
			rest, err := io.ReadAll(r.Body)
			mu.Lock()
			got[name] += string(first) + string(rest)
			mu.Unlock()
			_, _ = fmt.Fprintf(w, "|rest:%s|%v", rest, err)
		})
	}
	_, a, _ := startPooledPair(t, echo("A"), echo("B"), nil)
	holdSlot(t, a, true)
	c := dialH2(t, a.srv.Addr())
	id := c.open(pseudo("POST", "/stream", "shop.example", h2Field{"te", "trailers"}), "part1")
	var ans h2Answer
	c.answerUntil(id, &ans, func() bool { return strings.HasPrefix(ans.body, "echo:part1") })
	require.Equal(t, "200", ans.status)
	require.Equal(t, "A", ans.header.Get("X-Served-By"), "served here")
	c.data(id, "part2", false)
	c.data(id, "part3", true)
	ans = c.answerUntil(id, &ans, func() bool { return false })
	require.Equal(t, "echo:part1|rest:part2part3|<nil>", ans.body)
	require.Equal(t, map[string]string{"A": "part1part2part3"}, got, "every byte, in order, once, to A's app only")
	sp := snapshot(t, a).Pool
	require.Zero(t, sp.OverflowAccepted+sp.OverflowRefused+sp.OverflowTimeout+sp.OverflowError, "never offered")
}

// TestH2RequestsThatStayLocal: HTTP/2 requests that may not move are served by A's
// own app once its slot frees, their bytes exact: a body of unknown length beyond
// --pool-max-body, one the keep budget has no room for, a content-length beyond the
// bound; and one read ahead whole when the front refuses it or is down falls back
// to the local queue once, its body chunked to the app as without pooling.
func TestH2RequestsThatStayLocal(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 256) // 4 KiB
	for _, tt := range []struct {
		name   string
		cfg    func(*PoolConfig)
		fields []h2Field
		data   []string
		framed string // how A's app gets the body framed
	}{
		{name: "unknown length beyond the bound", cfg: func(c *PoolConfig) { c.MaxBody = 1024 },
			fields: pseudo("POST", "/big", "shop.example"), data: []string{big[:1000], big[1000:]}, framed: "Transfer-Encoding: chunked"},
		{name: "no room in the keep budget", cfg: func(c *PoolConfig) { c.KeepMaxBody, c.KeepBudget = 512, 1024 },
			fields: pseudo("POST", "/budget", "shop.example"), data: []string{big}, framed: "Transfer-Encoding: chunked"},
		{name: "content-length beyond the bound", cfg: func(c *PoolConfig) { c.MaxBody = 1024 },
			fields: pseudo("POST", "/cl", "shop.example", h2Field{"content-length", fmt.Sprint(len(big))}), data: []string{big}, framed: "Content-Length: 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPooledRaw(t, tt.cfg)
			p.holdA(t, true)
			c := dialH2(t, p.a.srv.Addr())
			ans := c.answer(c.request(tt.fields, tt.data...))
			require.Equal(t, "200", ans.status)
			sp := snapshot(t, p.a).Pool
			require.Zero(t, sp.OverflowAccepted+sp.OverflowRefused+sp.OverflowTimeout+sp.OverflowError, "never offered")
			reqsA, reqsB := p.appA.settled(t, p.a), p.appB.settled(t, p.b)
			require.Empty(t, reqsB)
			require.Len(t, reqsA, 1)
			require.Equal(t, big, reqsA[0].body)
			require.Contains(t, reqsA[0].raw, "\r\n"+tt.framed+"\r\n")
		})
	}
	t.Run("front refusing", func(t *testing.T) {
		path := secretFile(t)
		front := startFront(t, path, 5*time.Second)
		front.srv.front.StartDrain() // a draining front refuses new overflow with 503
		appA := newRecordingApp(t)
		a := start(t, appA.addr, Config{ConcurrencyLimit: 1, QueueLimit: 100,
			Pool: &PoolConfig{Workload: workload, Keys: keyring(t, path), Fronts: pool.Static{front.addr}}}, Options{})
		waitFor(t, "A pulls", func() bool { return frontStats(t, front).WaitingPulls == 1 })
		holdSlot(t, a, true)
		c := dialH2(t, a.srv.Addr())
		ans := c.answer(c.request(pseudo("POST", "/refused", "shop.example"), "hello ", "world"))
		require.Equal(t, "200", ans.status)
		sp := snapshot(t, a).Pool
		require.Equal(t, uint64(1), sp.OverflowRefused, "offered once")
		require.Zero(t, sp.OverflowAccepted+sp.OverflowTimeout+sp.OverflowError)
		reqs := appA.settled(t, a)
		require.Len(t, reqs, 1, "served here exactly once")
		require.Equal(t, "hello world", reqs[0].body)
		require.Contains(t, reqs[0].raw, "\r\nTransfer-Encoding: chunked\r\n", "as without pooling")
		require.Zero(t, frontStats(t, front).Accepted)
	})
	t.Run("front down", func(t *testing.T) {
		closed, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		closedAddr := closed.Addr().String()
		closed.Close()
		appA := newRecordingApp(t)
		a := start(t, appA.addr, Config{ConcurrencyLimit: 1, QueueLimit: 100,
			Pool: &PoolConfig{Workload: workload, Keys: keyring(t, secretFile(t)), Fronts: pool.Static{closedAddr}}}, Options{})
		holdSlot(t, a, true)
		c := dialH2(t, a.srv.Addr())
		ans := c.answer(c.request(pseudo("POST", "/down", "shop.example", h2Field{"x-id", "down"}), "hello ", "world"))
		require.Equal(t, "200", ans.status)
		sp := snapshot(t, a).Pool
		require.Zero(t, sp.OverflowAccepted)
		// The pull loop may find the replica down first (then the overflow does not
		// try it), or the overflow does.
		require.LessOrEqual(t, sp.OverflowError, uint64(1))
		reqs := appA.settled(t, a)
		require.Len(t, reqs, 1, "served here exactly once")
		require.Equal(t, "hello world", reqs[0].body)
		require.Contains(t, reqs[0].raw, "\r\nTransfer-Encoding: chunked\r\n", "as without pooling")
	})
}

// responseApp answers as an app may: a short body, trailers announced and not, a
// stream flushed in parts, 204, 304, HEAD, a body beyond carriedWhole, an
// explicit Content-Length; X-Served-By names the app.
func responseApp(name string) http.HandlerFunc {
	mux := http.NewServeMux()
	mux.HandleFunc("/short", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "ab")
		w.Header().Set("X-Sum", "ab")
		w.Header().Set(http.TrailerPrefix+"X-Status", "0")
	})
	mux.HandleFunc("/unannounced", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "cd")
		_ = http.NewResponseController(w).Flush() // chunked over HTTP/1.1, the only framing with trailers
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "7")
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", "denied")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			_, _ = fmt.Fprintf(w, "part%d;", i)
			_ = http.NewResponseController(w).Flush()
		}
	})
	mux.HandleFunc("/none", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/cached", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	})
	mux.HandleFunc("/sized", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2000")
		_, _ = io.WriteString(w, strings.Repeat("s", 2000))
	})
	mux.HandleFunc("/large", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(carriedWhole+1))
		_, _ = io.WriteString(w, strings.Repeat("l", carriedWhole+1))
	})
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Served-By", name)
		w.Header().Set("X-Multi", "1")
		w.Header().Add("X-Multi", "2")
		mux.ServeHTTP(w, r)
	}
}

// seenResponse is what a client saw of a response, but the Date and who served.
type seenResponse struct {
	status           int
	proto            string
	header, trailer  http.Header
	body             string
	length           int64
	transferEncoding []string
}

func clientSaw(t *testing.T, c *http.Client, method, url string) (seenResponse, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	by := resp.Header.Get("X-Served-By")
	h := resp.Header.Clone()
	h.Del("Date")
	h.Del("X-Served-By")
	return seenResponse{status: resp.StatusCode, proto: resp.Proto, header: h, trailer: resp.Trailer, body: string(b),
		length: resp.ContentLength, transferEncoding: resp.TransferEncoding}, by
}

// TestPulledResponsesAsLocal: a response from the pulling pod's app reaches the
// sender's client as the local path gives it (status, fields, body, its framing,
// trailers announced or not), for HTTP/1.1 and h2c apps and HTTP/1.1 and h2c
// clients alike. The one difference: an h2c app's content-length is not carried
// when its body is followed by trailers (to an h2c client; an HTTP/1.1 client gets
// such a body chunked locally too) or is longer than carriedWhole.
func TestPulledResponsesAsLocal(t *testing.T) {
	for _, up := range []struct {
		name     string
		protocol UpstreamProtocol
		newApp   func(*testing.T, http.HandlerFunc) string
	}{{"HTTP/1.1 app", UpstreamHTTP1, app}, {"h2c app", UpstreamH2C, h2cApp}} {
		t.Run(up.name, func(t *testing.T) {
			secret := secretFile(t)
			front := startFront(t, secret, 5*time.Second)
			sidecar := func(name string) *running {
				return start(t, up.newApp(t, responseApp(name)), Config{ConcurrencyLimit: 1, QueueLimit: 100, UpstreamProtocol: up.protocol,
					Pool: &PoolConfig{Workload: workload, Keys: keyring(t, secret), Fronts: pool.Static{front.addr}}}, Options{})
			}
			a, _ := sidecar("A"), sidecar("B")
			waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })
			moved := uint64(0)
			for _, client := range []struct {
				name string
				c    *http.Client
			}{{"HTTP/1.1 client", &http.Client{Transport: &http.Transport{DisableCompression: true}}}, {"h2c client", h2cClient()}} {
				for _, rq := range []struct{ method, path string }{
					{"GET", "/short"}, {"GET", "/trailers"}, {"GET", "/unannounced"}, {"GET", "/stream"}, {"GET", "/none"},
					{"GET", "/cached"}, {"HEAD", "/short"}, {"HEAD", "/sized"}, {"GET", "/sized"}, {"GET", "/large"},
				} {
					name := client.name + " " + rq.method + " " + rq.path
					local, by := clientSaw(t, client.c, rq.method, a.url+rq.path)
					require.Equal(t, "A", by, name)
					release := holdSlot(t, a, false)
					got, by := clientSaw(t, client.c, rq.method, a.url+rq.path)
					release()
					require.Equal(t, "B", by, "%s: served by the pod that pulled it", name)
					moved++
					if up.protocol == UpstreamH2C && (rq.path == "/large" || rq.path == "/trailers" && client.name == "h2c client") {
						// The carried message is chunked (HTTP/1.1 has no other
						// framing for trailers, and a long body is not read whole
						// first): the app's content-length is not carried. An
						// HTTP/2 client needs none; an HTTP/1.1 client gets the
						// trailed body chunked locally too.
						require.Equal(t, fmt.Sprint(len(local.body)), local.header.Get("Content-Length"), name)
						require.Equal(t, int64(-1), got.length, "%s: no Content-Length", name)
						local.header.Del("Content-Length")
						local.length = -1
						if client.name == "HTTP/1.1 client" {
							require.Equal(t, []string{"chunked"}, got.transferEncoding, name)
							local.transferEncoding = got.transferEncoding
						}
					}
					require.True(t, local.body == got.body, "%s: the body (%d bytes, %d locally)", name, len(got.body), len(local.body))
					local.body, got.body = "", ""
					require.Equal(t, local, got, name)
				}
			}
			require.Equal(t, moved, snapshot(t, a).Pool.OverflowAccepted)
		})
	}
}

// h2Async sends a raw HTTP/2 request on its own connection and delivers the answer.
func h2Async(t *testing.T, addr string, fields []h2Field, data ...string) <-chan h2Answer {
	c := dialH2(t, addr)
	id := c.request(fields, data...)
	ch := make(chan h2Answer, 1)
	go func() {
		// A failed require in a goroutine cannot stop the test: an empty answer
		// fails it where it is received.
		defer func() {
			if v := recover(); v != nil {
				ch <- h2Answer{}
			}
		}()
		ch <- c.answer(id)
	}()
	return ch
}

// TestH2DrainPushesTheLocalQueue: HTTP/2 requests waiting in a draining pod's local
// queue (not offered at admission: a request waited already) are pushed to the
// front and served by the pod that stays: one of known length, and one of unknown
// length, read ahead then, while it keeps its place.
func TestH2DrainPushesTheLocalQueue(t *testing.T) {
	p := newPair(t, false, 5*time.Second)
	t.Cleanup(p.apps.unblock)
	blocked, chunked, _ := queueBehindChunked(t, p.b, p.apps, "b")
	known := h2Async(t, p.b.srv.Addr(), pseudo("POST", "/known", "shop.example", h2Field{"x-id", "known"}, h2Field{"content-length", "5"}), "known")
	waitFor(t, "queued locally", func() bool { return snapshot(t, p.b).Waiting == 2 })
	unknown := h2Async(t, p.b.srv.Addr(), pseudo("POST", "/unknown", "shop.example", h2Field{"x-id", "unknown"}), "unkn", "own")
	waitFor(t, "queued locally", func() bool { return snapshot(t, p.b).Waiting == 3 })
	require.Zero(t, frontStats(t, p.front).Accepted, "nothing was offered at admission")

	p.b.cancel() // SIGTERM
	for ch, want := range map[<-chan h2Answer]string{known: "A:/known:known", unknown: "A:/unknown:unknown"} {
		a := <-ch
		require.Equal(t, "200", a.status)
		require.Equal(t, want, a.body, "served by the pod that stays")
	}
	p.apps.unblock()
	require.Equal(t, "B", (<-blocked).by)
	resp, _, err := (<-chunked).response("POST")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, map[string][]string{"held-b": {"B"}, "chunked-b": {"B"}, "known": {"A"}, "unknown": {"A"}}, p.apps.byID())
	sb := p.b.srv.Recorder.Snapshot()
	require.Equal(t, uint64(2), sb.Pool.DrainPushed)
	require.Zero(t, sb.Pool.DrainKept)
	require.Equal(t, uint64(2), sb.Pool.OverflowAccepted)
	require.Zero(t, p.b.srv.proxy.keptBytes.Load(), "the read-ahead's budget is given back")
}

// TestH2ExpiredAtTheFrontIsServedHere: HTTP/2 requests the front gives back unseen
// (no pod pulled them in time) are served by the sender's own app once: one of
// known length (its body kept), and one of unknown length (read ahead), which the
// app gets chunked, as without pooling.
func TestH2ExpiredAtTheFrontIsServedHere(t *testing.T) {
	path := secretFile(t)
	front := startFront(t, path, 200*time.Millisecond)
	appA := newRecordingApp(t)
	a := start(t, appA.addr, Config{ConcurrencyLimit: 1, QueueLimit: 100,
		Pool: &PoolConfig{Workload: workload, Keys: keyring(t, path), Fronts: pool.Static{front.addr}}}, Options{})
	release := holdSlot(t, a, false)
	// Nobody pulls (the only pod is busy): each overflows and expires.
	known := h2Async(t, a.srv.Addr(), pseudo("POST", "/known", "shop.example", h2Field{"content-length", "5"}), "known")
	unknown := h2Async(t, a.srv.Addr(), pseudo("POST", "/unknown", "shop.example"), "unkn", "own")
	waitFor(t, "the front expired both", func() bool { return frontStats(t, front).Expired == 2 })
	waitFor(t, "both wait in the local queue", func() bool { return snapshot(t, a).Waiting == 2 })
	release()
	for ch, want := range map[<-chan h2Answer]string{known: "seen POST /known", unknown: "seen POST /unknown"} {
		ans := <-ch
		require.Equal(t, "200", ans.status)
		require.Equal(t, want, ans.body)
	}
	sp := snapshot(t, a).Pool
	require.Equal(t, uint64(2), sp.OverflowAccepted)
	require.Equal(t, uint64(2), sp.ExpiredRequeued)
	require.Zero(t, a.srv.proxy.keptBytes.Load(), "the budget is given back")
	reqs := appA.settled(t, a)
	require.Len(t, reqs, 2, "each served once")
	for _, r := range reqs {
		switch r.target {
		case "/known":
			require.Equal(t, "known", r.body)
			require.Contains(t, r.raw, "\r\nContent-Length: 5\r\n")
		case "/unknown":
			require.Equal(t, "unknown", r.body)
			require.Contains(t, r.raw, "\r\nTransfer-Encoding: chunked\r\n", "as without pooling")
		default:
			t.Fatalf("unexpected request %q", r.raw)
		}
	}
}

// TestClientLeavingDoesNotBlameTheFront: a client that resets its stream while its
// request waits for the front's decision (a gRPC deadline) ends the attempt,
// counted as an error, but does not make the front suspect: the next request is
// offered to it again.
func TestClientLeavingDoesNotBlameTheFront(t *testing.T) {
	// A front that reads overflow heads and never decides.
	heads := make(chan struct{}, 4)
	hung := hungFront(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil && req.URL.Path == pool.PathOverflow {
			heads <- struct{}{}
		}
	})
	appA := newRecordingApp(t)
	a := start(t, appA.addr, Config{ConcurrencyLimit: 1, QueueLimit: 100,
		Pool: &PoolConfig{Workload: workload, Keys: keyring(t, secretFile(t)), Fronts: pool.Static{hung.Addr().String()},
			DecisionTimeout: time.Hour}}, Options{})
	holdSlot(t, a, false)
	offered := func() {
		t.Helper()
		select {
		case <-heads:
		case <-time.After(hangGuard):
			t.Fatal("the request was not offered to the front")
		}
	}
	for i := range 2 {
		c := dialH2(t, a.srv.Addr())
		id := c.request(pseudo("GET", "/leave", "shop.example"))
		offered()
		require.NoError(t, c.fr.WriteRSTStream(id, http2.ErrCodeCancel))
		waitFor(t, "the attempt ends", func() bool { return snapshot(t, a).Pool.OverflowError == uint64(i+1) })
		require.Zero(t, snapshot(t, a).Pool.FrontFailures, "the front is not blamed for a client that left")
	}
	require.Empty(t, appA.requests(), "no app saw a request whose client left")
}

// TestMalformedH2TargetRefused: without pooling too, an HTTP/2 request whose
// :method is not a token or whose :path has a space or a byte above 0x7e in its
// query gets 400 and reaches no app (net/http's HTTP/2 server lets both through;
// the app got "GET /q?a b HTTP/1.1"), and is not counted as an arrival; a
// well-formed one on the same connection is served.
func TestMalformedH2TargetRefused(t *testing.T) {
	for _, proto := range []UpstreamProtocol{UpstreamHTTP1, UpstreamH2C} {
		t.Run(string(proto), func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			h := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Method+" "+r.RequestURI)
				mu.Unlock()
			}
			up := app(t, h)
			if proto == UpstreamH2C {
				up = h2cApp(t, h)
			}
			p := start(t, up, Config{UpstreamProtocol: proto}, Options{})
			c := dialH2(t, p.srv.Addr())
			for _, f := range [][]h2Field{
				pseudo("GET", "/q?a b", "shop"),
				pseudo("GET", "/q?a HTTP/1.1", "shop"),
				pseudo("GET", "/q?\x80", "shop"),
				pseudo("GET /smuggled", "/q", "shop"),
			} {
				ans := c.answer(c.request(f))
				require.Equal(t, "400", ans.status, "%q", f)
			}
			ans := c.answer(c.request(pseudo("GET", "/ok?a=%20b", "shop")))
			require.Equal(t, "200", ans.status)
			require.Equal(t, []string{"GET /ok?a=%20b"}, got, "only the well-formed request reached the app")
			require.Equal(t, uint64(1), snapshot(t, p).Arrivals)
		})
	}
}

// h2cSeen is what an h2c app's handler got of a request.
type h2cSeen struct {
	proto, method, uri, host string
	header                   http.Header
	length                   int64
	body                     string
}

// TestH2CRequestsOverflowToH2CApps: as TestH2CRequestsOverflow, with h2c apps
// (--upstream-protocol=h2c): B's app gets what A's app gets for the same request
// served locally (method, target, :authority, fields, body), the length of a body
// that had none aside.
func TestH2CRequestsOverflowToH2CApps(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]h2cSeen{}
	recording := func(name string) string {
		return h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen[name] = append(seen[name], h2cSeen{proto: r.Proto, method: r.Method, uri: r.RequestURI, host: r.Host,
				header: r.Header.Clone(), length: r.ContentLength, body: string(b)})
			mu.Unlock()
			_, _ = fmt.Fprintf(w, "%s %s", r.Method, r.RequestURI)
		})
	}
	last := func(name string) h2cSeen {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, seen[name])
		return seen[name][len(seen[name])-1]
	}
	secret := secretFile(t)
	front := startFront(t, secret, 5*time.Second)
	sidecar := func(app string) *running {
		return start(t, app, Config{ConcurrencyLimit: 1, QueueLimit: 100, UpstreamProtocol: UpstreamH2C,
			Pool: &PoolConfig{Workload: workload, Keys: keyring(t, secret), Fronts: pool.Static{front.addr}}}, Options{})
	}
	a, _ := sidecar(recording("A")), sidecar(recording("B"))
	waitFor(t, "both sidecars pull", func() bool { return frontStats(t, front).WaitingPulls == 2 })
	for _, tt := range []struct {
		name    string
		fields  []h2Field
		data    []string
		unknown bool
	}{
		{name: "GET", fields: pseudo("GET", "/get?q=1", "shop.example:8080", h2Field{"x-forwarded-for", "10.1.2.3"}, h2Field{"cookie", "a=1"},
			h2Field{"cookie", "b=2"}, h2Field{"user-agent", "raw-h2"})},
		{name: "POST with a length", fields: pseudo("POST", "/post", "shop.example", h2Field{"content-length", "5"}, h2Field{"te", "trailers"},
			h2Field{"x-forwarded-proto", "https"}), data: []string{"he", "llo"}},
		{name: "gRPC-like of unknown length", fields: pseudo("POST", "/pkg.Svc/Call", "shop.example", h2Field{"te", "trailers"},
			h2Field{"content-type", "application/grpc"}, h2Field{"grpc-timeout", "5S"}, h2Field{"qas-hop", "1"}), data: []string{"\x00\x00\x00\x00\x01", "x"}, unknown: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialH2(t, a.srv.Addr())
			local := c.answer(c.request(tt.fields, tt.data...))
			require.Equal(t, "200", local.status)
			want := last("A")
			release := holdSlot(t, a, false)
			c = dialH2(t, a.srv.Addr())
			moved := c.answer(c.request(tt.fields, tt.data...))
			release()
			require.Equal(t, "200", moved.status)
			require.Equal(t, local.body, moved.body)
			got := last("B")
			require.Equal(t, "HTTP/2.0", got.proto)
			if tt.unknown {
				require.Equal(t, int64(-1), want.length, "locally the app gets no length")
				require.Equal(t, int64(len(want.body)), got.length, "moved, the length it has")
				require.Equal(t, fmt.Sprint(got.length), got.header.Get("Content-Length"))
				got.header.Del("Content-Length")
				got.length = want.length
			}
			for name := range got.header {
				require.False(t, strings.HasPrefix(name, "Qas-"), "the app sees no pooling field: %s", name)
			}
			require.Equal(t, want, got, "B's app gets what A's app gets locally")
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen["A"], 3, "A's app saw only the local requests")
	require.Len(t, seen["B"], 3, "B's app saw each moved request once")
}
