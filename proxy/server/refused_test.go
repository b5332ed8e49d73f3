package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// refusalReasons are qas_proxy_refused_total's reasons, as documented.
var refusalReasons = []string{"connect", "malformed_h2", "request_target", "ambiguous_framing"}

// scrapeRefusals scrapes p's /metrics and returns qas_proxy_refused_total by reason
// (every reason has a sample, zero included) and qas_proxy_requests_arrived_total.
func scrapeRefusals(t *testing.T, p *running) (refused map[string]uint64, arrivals uint64) {
	t.Helper()
	families := scrapeMetrics(t, p.admin)
	fam, ok := families["qas_proxy_refused_total"]
	require.True(t, ok, "/metrics has qas_proxy_refused_total")
	require.Contains(t, fam.GetHelp(), "net/http's own parser refuses", "the help says what is not counted")
	refused = map[string]uint64{}
	for _, m := range fam.Metric {
		require.Len(t, m.GetLabel(), 1)
		require.Equal(t, "reason", m.GetLabel()[0].GetName())
		refused[m.GetLabel()[0].GetValue()] = uint64(m.GetCounter().GetValue())
	}
	require.Len(t, refused, len(refusalReasons), "one sample per reason: %v", refused)
	arrived := families["qas_proxy_requests_arrived_total"]
	require.NotNil(t, arrived)
	return refused, uint64(arrived.Metric[0].GetCounter().GetValue())
}

// refusedWant is every reason's count: those in counts, the others zero.
func refusedWant(counts map[string]uint64) map[string]uint64 {
	want := map[string]uint64{}
	for _, r := range refusalReasons {
		want[r] = counts[r]
	}
	return want
}

// TestRefusalsCountedByReason sends, on both paths, each kind of request the proxy
// refuses itself (raw HTTP/1 bytes, and raw HTTP/2 frames over h2c), then scrapes
// /metrics: qas_proxy_refused_total moves by exactly one for that request's reason,
// the other reasons and the arrivals do not move, and an accepted request moves the
// arrivals only. A request net/http's parser refuses (no Host) moves nothing: it is
// answered before the proxy's code sees it. Whichever path refuses a request counts
// it: the fast path an ambiguous head it parses, the guard on the general path one
// too large for the fast path's buffer, the general path what the fast path hands
// over (CONNECT, other targets, HTTP/2).
func TestRefusalsCountedByReason(t *testing.T) {
	ambiguous := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled
	steps := []struct {
		name   string
		raw    string    // HTTP/1 bytes on a new connection
		h2     []h2Field // or an HTTP/2 request on the test's h2c connection
		codes  string    // the client's answers, in order
		reason string    // the reason counted ("": none)
		arrive uint64    // arrivals counted
		handed bool      // on the fast path: its connection is handed to the general path
	}{
		{name: "accepted GET", raw: "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", codes: "200", arrive: 1},
		{name: "CONNECT", raw: "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n" + smuggled, codes: "405", reason: "connect", handed: true},
		{name: "lower-case connect", raw: "connect / HTTP/1.1\r\nHost: x\r\n\r\n", codes: "405", reason: "connect", handed: true},
		{name: "opaque target", raw: "GET x:443 HTTP/1.1\r\nHost: x\r\n\r\n", codes: "400", reason: "request_target", handed: true},
		{name: "asterisk GET", raw: "GET * HTTP/1.1\r\nHost: x\r\n\r\n", codes: "400", reason: "request_target", handed: true},
		{name: "CL with TE", raw: ambiguous, codes: "400", reason: "ambiguous_framing"},
		{name: "CL list that disagrees", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 40\r\n\r\nhello" + smuggled, codes: "400", reason: "ambiguous_framing"},
		{name: "CL with TE, head too large for the fast path",
			raw:   "POST / HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 9000) + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled,
			codes: "400", reason: "ambiguous_framing", handed: true},
		{name: "pipelined GET then CL with TE", raw: "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n" + ambiguous, codes: "200 400", reason: "ambiguous_framing", arrive: 1},
		{name: "no Host (net/http refuses it)", raw: "GET / HTTP/1.1\r\n\r\n", codes: "400", handed: true},
		{name: "h2 accepted GET", h2: pseudo("GET", "/ok", "shop"), codes: "200", arrive: 1, handed: true},
		{name: "h2 CONNECT", h2: []h2Field{{":method", "CONNECT"}, {":authority", "shop:443"}}, codes: "405", reason: "connect"},
		{name: "h2 space in the query", h2: pseudo("GET", "/q?a b", "shop"), codes: "400", reason: "malformed_h2"},
		{name: "h2 method not a token", h2: pseudo("GET /smuggled", "/q", "shop"), codes: "400", reason: "malformed_h2"},
		{name: "h2 accepted GET again", h2: pseudo("GET", "/ok2", "shop"), codes: "200", arrive: 1},
	}
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		p := start(t, a.addr, Config{}, Options{FastPath: fast})
		want, arrivals, handed := map[string]uint64{}, uint64(0), uint64(0)
		got, gotArrivals := scrapeRefusals(t, p)
		require.Equal(t, refusedWant(nil), got, "nothing refused yet")
		require.Zero(t, gotArrivals)
		var h2 *h2Conn
		for _, s := range steps {
			var codes []string
			if s.h2 != nil {
				if h2 == nil {
					h2 = dialH2(t, p.srv.Addr())
				}
				ans := h2.answer(h2.request(s.h2))
				require.False(t, ans.reset, "%s: got %+v", s.name, ans)
				codes = append(codes, ans.status)
			} else {
				rc := dialRaw(t, p.srv.Addr())
				rc.send(s.raw)
				for range strings.Fields(s.codes) {
					resp, _, err := rc.response("GET")
					require.NoError(t, err, "%s: response %d", s.name, len(codes)+1)
					codes = append(codes, strconv.Itoa(resp.StatusCode))
				}
				if s.reason != "" {
					require.True(t, rc.closed(), "%s: the proxy closes the connection", s.name)
				}
			}
			require.Equal(t, s.codes, strings.Join(codes, " "), s.name)
			if s.reason != "" {
				want[s.reason]++
			}
			arrivals += s.arrive
			if s.handed {
				handed++
			}
			got, gotArrivals := scrapeRefusals(t, p)
			require.Equal(t, refusedWant(want), got, "%s: refusals by reason", s.name)
			require.Equal(t, arrivals, gotArrivals, "%s: arrivals", s.name)
			if fast {
				require.Equal(t, handed, p.srv.fast.HandedOver(), "%s: connections handed to the general path", s.name)
			}
		}
		require.Equal(t, refusedWant(map[string]uint64{"connect": 3, "malformed_h2": 2, "request_target": 2, "ambiguous_framing": 4}), want)
		var reqs []string
		for _, r := range a.settled(t, p) {
			reqs = append(reqs, r.method+" "+r.target)
		}
		require.Equal(t, []string{"GET /ok", "GET /1", "GET /ok", "GET /ok2"}, reqs, "the app got the accepted requests only")
	})
}

// corpusCounts sends c's bytes through a proxy on one path, reads its answers, and
// returns the refusals by reason and the arrivals that /metrics then shows.
func corpusCounts(t *testing.T, c corpusCase, fast bool) (map[string]uint64, uint64) {
	t.Helper()
	a := newRecordingApp(t)
	p := start(t, a.addr, Config{}, Options{FastPath: fast})
	rc := dialRaw(t, p.srv.Addr())
	rc.send(c.raw)
	for i := range c.answers {
		_, _, err := rc.response(methodOf(c))
		require.NoError(t, err, "response %d", i+1)
	}
	if c.closes {
		require.True(t, rc.closed(), "the proxy closes the connection")
	}
	return scrapeRefusals(t, p)
}

// TestCorpusRefusalsCounted runs every corpus case on both paths and scrapes /metrics:
// a case the proxy refuses itself is counted once under its reason (corpusCase.refused)
// and not as an arrival (only the requests answered before it arrive), whichever path
// refused it; any other case (forwarded, or refused by net/http's parser, which the
// proxy cannot count) moves no refusal; and both paths count the same arrivals.
func TestCorpusRefusalsCounted(t *testing.T) {
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			want := refusedWant(nil)
			if c.refused != "" {
				require.Contains(t, want, c.refused, "a known reason")
				want[c.refused] = 1
			}
			var arrivals [2]uint64
			for i, fast := range []bool{false, true} {
				var got map[string]uint64
				got, arrivals[i] = corpusCounts(t, c, fast)
				require.Equal(t, want, got, "refusals by reason, fast path %v", fast)
				if c.refused != "" {
					require.Equal(t, uint64(c.answers-1), arrivals[i], "arrivals: the requests answered before the refused one, fast path %v", fast)
				}
			}
			require.Equal(t, arrivals[0], arrivals[1], "the general and the fast path count the same arrivals")
		})
	}
}
