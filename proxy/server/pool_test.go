package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/pool"
	"github.com/qas-dev/qas/proxy/pool/auth"
	"github.com/qas-dev/qas/proxy/stats"
)

const workload = "shop"

// secretFile writes a fresh 32-byte secret (hex) and returns its path.
func secretFile(t testing.TB) string {
	t.Helper()
	var k [32]byte
	_, _ = rand.Read(k[:])
	path := filepath.Join(t.TempDir(), workload)
	require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(k[:])+"\n"), 0o600))
	return path
}

func keyring(t testing.TB, path string) *auth.Keyring {
	k, err := auth.NewFileKeyring(workload, path, time.Now)
	require.NoError(t, err)
	return k
}

type runningFront struct {
	srv    *FrontServer
	addr   string
	admin  string
	cancel context.CancelFunc
	done   chan error
}

// startFront runs a front on loopback for the secret at path.
func startFront(t *testing.T, path string, maxWait time.Duration) *runningFront {
	t.Helper()
	srv, err := ListenFront(pool.FrontConfig{Keys: keyring(t, path), MaxQueue: 100, MaxWait: maxWait, PollTimeout: 2 * time.Second},
		Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", ReadHeaderTimeout: 2 * time.Second, DrainPeriod: 0, ShutdownTimeout: 2 * time.Second},
		measure.New(time.Now, 0, 100), zaptest.NewLogger(t))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	f := &runningFront{srv: srv, addr: srv.Addr(), admin: "http://" + srv.AdminAddr(), cancel: cancel, done: make(chan error, 1)}
	go func() { f.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-f.done //nolint:errcheck // stopped either way
	})
	return f
}

// kill stops the front as a crash would: every connection closed at once.
func (f *runningFront) kill() {
	f.srv.serving.Close()
	f.srv.front.Close()
}

func frontStats(t *testing.T, f *runningFront) *stats.Front {
	resp, err := http.Get(f.admin + "/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	s, err := stats.Decode(resp.Body)
	require.NoError(t, err)
	require.NotNil(t, s.Front)
	return s.Front
}

// startPooled runs a sidecar with k slots, pooling through fronts with the secret at
// path.
func startPooled(t *testing.T, upstream string, k int, path string, fronts []string, fast bool) *running {
	return start(t, upstream, Config{ConcurrencyLimit: k, QueueLimit: 100,
		Pool: &PoolConfig{Workload: workload, Keys: keyring(t, path), Fronts: pool.Static(fronts)}}, Options{FastPath: fast})
}

// seen is what one app received.
type seen struct {
	app    string
	method string
	path   string
	id     string
	body   string
	header http.Header
}

// apps records what every app received; a request whose path starts with /block
// waits until release is closed, one with ?sleep=DURATION sleeps that long.
type apps struct {
	mu      sync.Mutex
	got     []seen
	release chan struct{}
	once    sync.Once
	inApp   atomic.Int32
}

func newApps() *apps { return &apps{release: make(chan struct{})} }

// unblock releases the blocked requests (once).
func (a *apps) unblock() { a.once.Do(func() { close(a.release) }) }

func (a *apps) start(t *testing.T, name string) string {
	// Registered before the app's own cleanup, so it runs after it: a failed test
	// does not leave the app's handlers blocked and its Close waiting forever.
	t.Cleanup(a.unblock)
	return app(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, seen{app: name, method: r.Method, path: r.URL.Path, id: r.Header.Get("X-Id"), body: string(b), header: r.Header.Clone()})
		a.mu.Unlock()
		a.inApp.Add(1)
		if strings.HasPrefix(r.URL.Path, "/block") {
			<-a.release
		}
		if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
			time.Sleep(d)
		}
		w.Header().Set("X-Served-By", name)
		_, _ = fmt.Fprintf(w, "%s:%s:%s", name, r.URL.Path, b)
	})
}

func (a *apps) requests() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]seen(nil), a.got...)
}

// byID counts, for every X-Id, how many times any app received it.
func (a *apps) byID() map[string][]string {
	out := map[string][]string{}
	for _, s := range a.requests() {
		out[s.id] = append(out[s.id], s.app)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, hangGuard, 2*time.Millisecond, what)
}

// waitForPulls waits until r has counted exactly n pulled requests. A sidecar
// counts a pull once it has served it, which may be just after the client has
// its answer, so a count read at once can be short.
func waitForPulls(t *testing.T, r *running, n uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d pulls counted", n), func() bool { return snapshot(t, r).Pool.Pulled == n })
}

type reply struct {
	code   int
	body   string
	by     string
	retry  string
	err    error
	header http.Header
}

func send(url, method, path, id, body string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	req.Header.Set("X-Id", id)
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: string(b), by: resp.Header.Get("X-Served-By"), retry: resp.Header.Get("Retry-After"), err: err, header: resp.Header}
}

func sendAsync(url, method, path, id, body string) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- send(url, method, path, id, body) }()
	return ch
}

// pair is two pooled sidecars (A and B, k = 1 each) and a front.
type pair struct {
	secret string
	apps   *apps
	front  *runningFront
	a, b   *running
}

func newPair(t *testing.T, fast bool, maxWait time.Duration) *pair {
	path := secretFile(t)
	p := &pair{secret: path, apps: newApps(), front: startFront(t, path, maxWait)}
	p.a = startPooled(t, p.apps.start(t, "A"), 1, path, []string{p.front.addr}, fast)
	p.b = startPooled(t, p.apps.start(t, "B"), 1, path, []string{p.front.addr}, fast)
	// B (and A) keep a pull open at the front while idle.
	waitFor(t, "both sidecars pull", func() bool { return frontStats(t, p.front).WaitingPulls == 2 })
	return p
}

// TestOverflowOnlyWhenSlotsFull: with a free slot every request is served locally
// (no overflow, no extra hop); with A's only slot busy, the next request goes through
// the front to B, reaches B's app exactly once and A's never, and its response comes
// back to A's client.
func TestOverflowOnlyWhenSlotsFull(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		p := newPair(t, fast, 5*time.Second)
		for i := range 5 {
			r := send(p.a.url, "POST", "/free", fmt.Sprint("free", i), "body")
			require.NoError(t, r.err)
			require.Equal(t, 200, r.code)
			require.Equal(t, "A", r.by, "a free slot serves locally")
		}
		require.Zero(t, frontStats(t, p.front).Accepted, "nothing overflows while a slot is free")
		sa := snapshot(t, p.a)
		require.NotNil(t, sa.Pool)
		require.Zero(t, sa.Pool.OverflowAccepted+sa.Pool.OverflowRefused+sa.Pool.OverflowTimeout+sa.Pool.OverflowError)

		// B's per-second counter has counted a whole second: the pull below comes
		// in a second it counts whole, not in the one it started in.
		waitFor(t, "B counts arrivals per second", func() bool { return snapshot(t, p.b).ArrivalsPerSecond != nil })
		blocked := sendAsync(p.a.url, "GET", "/block", "held", "")
		waitFor(t, "A's slot is busy", func() bool { return p.apps.inApp.Load() == 6 })
		r := send(p.a.url, "POST", "/moved?q=1", "moved", "hello pooled world")
		require.NoError(t, r.err)
		require.Equal(t, 200, r.code)
		require.Equal(t, "B", r.by, "served by the pod that pulled it")
		require.Equal(t, "B:/moved:hello pooled world", r.body)
		p.apps.unblock()
		require.Equal(t, 200, (<-blocked).code)

		ids := p.apps.byID()
		require.Equal(t, []string{"B"}, ids["moved"], "exactly one app, exactly once")
		require.Equal(t, []string{"A"}, ids["held"])
		for _, s := range p.apps.requests() {
			if s.id == "moved" {
				require.Equal(t, "POST", s.method)
				require.Equal(t, "hello pooled world", s.body)
				for name := range s.header {
					require.False(t, strings.HasPrefix(name, "Qas-"), "the app sees no pooling field: %s", name)
				}
				require.Equal(t, "127.0.0.1", s.header.Get("X-Forwarded-For"), "the app sees the real client")
			}
		}
		// The decision time is observed after the outcome's counter (a snapshot may
		// hold fewer decisions than attempts for a moment, never more): wait for it.
		waitFor(t, "A records the overflow's decision time", func() bool {
			return snapshot(t, p.a).Pool.OverflowDecision.Total() >= 1
		})
		waitForPulls(t, p.b, 1)
		sa, sb := snapshot(t, p.a), snapshot(t, p.b)
		require.Equal(t, uint64(1), sa.Pool.OverflowAccepted)
		require.Equal(t, uint64(1), sa.Pool.OverflowDecision.Total())
		require.Equal(t, uint64(1), sb.Pool.Pulled)
		require.Zero(t, sa.Pool.Pulled)
		require.Equal(t, uint64(7), sa.Arrivals, "A counts every request its clients sent")
		require.Equal(t, uint64(1), sb.Arrivals, "B counts the pulled request it served")
		// But not in its arrivals per second: the request arrived from a client at A.
		pulledBy := time.Now().Unix()
		waitFor(t, "B's counter closes the second the pull came in", func() bool {
			s := snapshot(t, p.b).ArrivalsPerSecond
			return s != nil && s.EndUnix >= pulledBy
		})
		for _, c := range snapshot(t, p.b).ArrivalsPerSecond.Counts {
			require.LessOrEqual(t, c, int64(0), "B's arrivals per second leave the pulled request out")
		}
		f := frontStats(t, p.front)
		require.Equal(t, uint64(1), f.Accepted)
		require.Equal(t, uint64(1), f.Dispatched)
		require.Zero(t, f.QueueLength)
	})
}

// TestPulledRequestIsNeverOverflowedAgain (hop limit 1): a request B pulled goes to
// B's app even though B is then saturated; B overflows nothing, and the front sees
// one request.
func TestPulledRequestIsNeverOverflowedAgain(t *testing.T) {
	p := newPair(t, true, 5*time.Second)
	blocked := sendAsync(p.a.url, "GET", "/block-a", "held", "")
	waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
	moved := sendAsync(p.a.url, "GET", "/block-moved", "moved", "")
	waitFor(t, "B's app has the pulled request", func() bool { return p.apps.inApp.Load() == 2 })
	// Both pods are now saturated; the pulled request sits in B's app, not at the
	// front again.
	f := frontStats(t, p.front)
	require.Equal(t, uint64(1), f.Accepted)
	require.Equal(t, uint64(1), f.Dispatched)
	require.Zero(t, f.QueueLength)
	sb := snapshot(t, p.b)
	require.Zero(t, sb.Pool.OverflowAccepted+sb.Pool.OverflowRefused+sb.Pool.OverflowTimeout+sb.Pool.OverflowError, "B never overflows what it pulled")
	require.Equal(t, int64(1), sb.InFlight)
	p.apps.unblock()
	require.Equal(t, "B", (<-moved).by)
	require.Equal(t, "A", (<-blocked).by)
	require.Equal(t, []string{"B"}, p.apps.byID()["moved"])
}

// TestClientQasFieldsStripped: on the app port a pooled sidecar strips every Qas-
// field a client sends, on both paths, so no client chooses the data plane.
func TestClientQasFieldsStripped(t *testing.T) {
	bothPaths(t, func(t *testing.T, fast bool) {
		a := newRecordingApp(t)
		path := secretFile(t)
		front := startFront(t, path, time.Second)
		s := startPooled(t, a.addr, 1, path, []string{front.addr}, fast)
		rc := dialRaw(t, s.srv.Addr())
		rc.send("GET /x HTTP/1.1\r\nHost: x\r\nQas-Hop: 1\r\nqas-auth: t=1,n=0123456789abcdef,mac=00\r\nQAS-Workload: shop\r\nX-Keep: 1\r\n\r\n")
		resp, _, err := rc.response("GET")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		got := a.settled(t, s)
		require.Len(t, got, 1)
		require.NotContains(t, strings.ToLower(got[0].raw), "qas-", "the app got a Qas- field: %q", got[0].raw)
		require.Contains(t, got[0].raw, "X-Keep: 1")
	})
}

// TestFrontAuthentication: the front answers 403 (counted) to overflow requests and
// pulls without a valid Qas-Auth, and nothing reaches any app.
func TestFrontAuthentication(t *testing.T) {
	p := newPair(t, true, time.Second)
	key, err := auth.ReadKey(p.secret)
	require.NoError(t, err)
	other := make([]byte, 32)
	good := func(method, target, hop string) string {
		return auth.Sign(key, time.Now(), workload, method, target, hop)
	}
	replayed := good("POST", pool.PathOverflow, "1")
	body := "GET /stolen HTTP/1.1\r\nHost: x\r\nX-Id: stolen\r\n\r\n"
	for _, tt := range []struct {
		name, method, target, hop, work, auth string
	}{
		{"no auth", "POST", pool.PathOverflow, "1", workload, ""},
		{"other key", "POST", pool.PathOverflow, "1", workload, auth.Sign(other, time.Now(), workload, "POST", pool.PathOverflow, "1")},
		{"stale", "POST", pool.PathOverflow, "1", workload, auth.Sign(key, time.Now().Add(-time.Minute), workload, "POST", pool.PathOverflow, "1")},
		{"signed for a pull", "POST", pool.PathOverflow, "1", workload, good("GET", pool.PathPull, "1")},
		{"hop 0", "POST", pool.PathOverflow, "0", workload, good("POST", pool.PathOverflow, "0")},
		{"other workload", "POST", pool.PathOverflow, "1", "cart", auth.Sign(key, time.Now(), "cart", "POST", pool.PathOverflow, "1")},
		{"garbage", "POST", pool.PathOverflow, "1", workload, "t=1"},
		{"replay first", "POST", pool.PathOverflow, "1", workload, replayed},
		{"pull without auth", "GET", pool.PathPull, "0", workload, ""},
		{"result without auth", "POST", pool.PathResult + strings.Repeat("a", 32), "0", workload, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, p.front.addr)
			raw := tt.method + " " + tt.target + " HTTP/1.1\r\nHost: f\r\nQas-Workload: " + tt.work + "\r\nQas-Hop: " + tt.hop + "\r\n"
			if tt.auth != "" {
				raw += "Qas-Auth: " + tt.auth + "\r\n"
			}
			if tt.method == "POST" {
				raw += fmt.Sprintf("Content-Type: message/http\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			} else {
				raw += "\r\n"
			}
			rc.send(raw)
			resp, _, err := rc.response(tt.method)
			require.NoError(t, err)
			if resp.StatusCode == 100 {
				resp, _, err = rc.response(tt.method)
				require.NoError(t, err)
			}
			want := 403
			if tt.name == "replay first" {
				want = 200 // the first use is fine: it is queued, pulled, served
			}
			require.Equal(t, want, resp.StatusCode)
		})
	}
	// The replay of a header already used.
	rc := dialRaw(t, p.front.addr)
	rc.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: f\r\nQas-Workload: %s\r\nQas-Hop: 1\r\nQas-Auth: %s\r\nContent-Type: message/http\r\nContent-Length: %d\r\n\r\n%s",
		pool.PathOverflow, workload, replayed, len(body), body))
	resp, _, err := rc.response("POST")
	require.NoError(t, err)
	require.Equal(t, 403, resp.StatusCode, "a replayed header is refused (no 100 Continue first)")
	f := frontStats(t, p.front)
	require.Equal(t, uint64(10), f.Unauthenticated)
	require.Equal(t, uint64(1), f.Accepted, "only the authenticated request")
	require.Len(t, p.apps.byID()["stolen"], 1, "the authenticated one was served once")
	require.Len(t, p.apps.requests(), 1, "nothing unauthenticated reached an app")

	// A sidecar with the wrong secret: its overflow is refused, counted, and the
	// request is served locally once the slot frees.
	wrong := secretFile(t)
	c := startPooled(t, p.apps.start(t, "C"), 1, wrong, []string{p.front.addr}, true)
	blocked := sendAsync(c.url, "GET", "/block-c", "held-c", "")
	waitFor(t, "C busy", func() bool { return p.apps.inApp.Load() == 2 })
	local := sendAsync(c.url, "GET", "/after", "after", "")
	// C's pull or its overflow meets the 403 first; either way the replica is
	// suspect, counted, and nothing moves.
	waitFor(t, "C's request refused or not tried", func() bool { s := snapshot(t, c); return s.Pool.FrontFailures >= 1 && s.Waiting == 1 })
	p.apps.unblock()
	require.Equal(t, "C", (<-local).by)
	require.Equal(t, "C", (<-blocked).by)
	sc := snapshot(t, c)
	require.Zero(t, sc.Pool.OverflowAccepted)
	require.LessOrEqual(t, sc.Pool.OverflowRefused, uint64(1))
	require.GreaterOrEqual(t, frontStats(t, p.front).Unauthenticated, uint64(11), "C's pull or overflow was refused with 403")
}

// TestFrontDownFallsBackToLocalQueue: a front that refuses connections, or accepts
// them and never answers, costs a request at most one decision deadline: it is queued
// locally, untouched, the replica is marked suspect (counted), and the next request
// does not try it again.
func TestFrontDownFallsBackToLocalQueue(t *testing.T) {
	hung := hungFront(t, nil)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tt := range []struct {
		name  string
		front string
		check func(t *testing.T, p *stats.Pool)
	}{
		// The pull loop may find the replica down first (then the overflow does not
		// try it at all), or the overflow does.
		{"refused", closedAddr, func(t *testing.T, p *stats.Pool) { require.LessOrEqual(t, p.OverflowError, uint64(1)) }},
		{"hung", hung.Addr().String(), func(t *testing.T, p *stats.Pool) { require.Equal(t, uint64(1), p.OverflowTimeout) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bothPaths(t, func(t *testing.T, fast bool) {
				as := newApps()
				s := startPooled(t, as.start(t, "A"), 1, secretFile(t), []string{tt.front}, fast)
				blocked := sendAsync(s.url, "GET", "/block", "held", "")
				waitFor(t, "busy", func() bool { return as.inApp.Load() == 1 })
				first := sendAsync(s.url, "POST", "/q1", "q1", "body-1")
				waitFor(t, "queued locally", func() bool { return snapshot(t, s).Waiting == 1 })
				second := sendAsync(s.url, "POST", "/q2", "q2", "body-2")
				waitFor(t, "queued locally", func() bool { return snapshot(t, s).Waiting == 2 })
				as.unblock()
				for _, ch := range []<-chan reply{blocked, first, second} {
					r := <-ch
					require.NoError(t, r.err)
					require.Equal(t, 200, r.code)
					require.Equal(t, "A", r.by)
				}
				sp := snapshot(t, s).Pool
				tt.check(t, sp)
				require.LessOrEqual(t, sp.OverflowError+sp.OverflowTimeout+sp.OverflowRefused, uint64(1), "the second request did not try the suspect replica")
				require.Zero(t, sp.OverflowAccepted)
				require.GreaterOrEqual(t, sp.FrontFailures, uint64(1), "the failure is counted")
				require.Equal(t, map[string][]string{"held": {"A"}, "q1": {"A"}, "q2": {"A"}}, as.byID())
				for _, r := range as.requests() {
					if r.id == "q1" {
						require.Equal(t, "body-1", r.body, "the body reached the app whole after the failed overflow")
					}
				}
			})
		})
	}
}

// TestFrontKilledMidBurst: a front killed while it holds accepted requests (one in B's
// app, others queued) fails exactly those with 502 (counted), replays none, and the
// requests sent after it died are queued locally and served.
func TestFrontKilledMidBurst(t *testing.T) {
	p := newPair(t, true, 10*time.Second)
	blocked := sendAsync(p.a.url, "GET", "/block-a", "held", "")
	waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
	var accepted []<-chan reply
	for i := range 4 {
		accepted = append(accepted, sendAsync(p.a.url, "GET", "/block-burst", fmt.Sprint("burst", i), ""))
		waitFor(t, "accepted by the front", func() bool { return frontStats(t, p.front).Accepted == uint64(i+1) })
	}
	waitFor(t, "one pulled into B's app", func() bool { return p.apps.inApp.Load() == 2 })
	p.front.kill()
	after := sendAsync(p.a.url, "GET", "/after", "after", "")
	waitFor(t, "queued locally", func() bool { return snapshot(t, p.a).Waiting == 1 })
	p.apps.unblock()
	codes := map[int]int{}
	for _, ch := range accepted {
		r := <-ch
		if r.err == nil {
			codes[r.code]++
		} else {
			codes[-1]++
		}
	}
	require.Equal(t, map[int]int{502: 4}, codes, "every accepted request fails with 502")
	require.Equal(t, "A", (<-after).by, "sent after the kill: served locally")
	require.Equal(t, "A", (<-blocked).by)
	ids := p.apps.byID()
	seenOnce := 0
	for i := range 4 {
		apps := ids[fmt.Sprint("burst", i)]
		require.LessOrEqual(t, len(apps), 1, "never replayed")
		seenOnce += len(apps)
		for _, a := range apps {
			require.Equal(t, "B", a, "only the pulling pod saw it")
		}
	}
	require.Equal(t, 1, seenOnce, "only the request in B's app reached an app")
	sa := snapshot(t, p.a)
	require.Equal(t, uint64(4), sa.Pool.OverflowAccepted)
	require.Equal(t, uint64(4), sa.UpstreamErrors, "the 502s are counted")
	require.Equal(t, uint64(4), sa.Codes[4])
}

// TestDrainStopsPulling: a draining sidecar takes no more work from the front; a
// request nobody pulls expires at the front's max wait, and when its sender cannot
// send it again (a body beyond the kept bound) the client gets the front's 503 with
// Retry-After.
func TestDrainStopsPulling(t *testing.T) {
	p := newPair(t, true, 300*time.Millisecond)
	p.b.cancel() // B drains
	waitFor(t, "B stopped pulling", func() bool { return frontStats(t, p.front).WaitingPulls == 1 })
	blocked := sendAsync(p.a.url, "GET", "/block-a", "held", "")
	waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
	r := send(p.a.url, "POST", "/expires", "expires", strings.Repeat("e", DefaultKeepMaxBody+1))
	require.NoError(t, r.err)
	require.Equal(t, 503, r.code)
	require.Equal(t, "1", r.retry)
	p.apps.unblock()
	<-blocked
	require.Empty(t, p.apps.byID()["expires"], "no app saw it")
	f := frontStats(t, p.front)
	require.Equal(t, uint64(1), f.Expired)
	require.Equal(t, uint64(1), f.QueueWait.Total())
	require.Equal(t, uint64(1), snapshot(t, p.a).Pool.ExpiredRelayed)
}

// TestOnlyMovableRequestsOverflow: chunked bodies, bodies above the limit and
// upgrades stay in the local queue even when every slot is busy.
func TestOnlyMovableRequestsOverflow(t *testing.T) {
	p := newPair(t, false, 5*time.Second)
	blocked := sendAsync(p.a.url, "GET", "/block-a", "held", "")
	waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
	var waits []<-chan *rawConn
	for _, raw := range []string{
		"POST /chunked HTTP/1.1\r\nHost: x\r\nX-Id: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /ws HTTP/1.1\r\nHost: x\r\nX-Id: upgrade\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"POST /big HTTP/1.1\r\nHost: x\r\nX-Id: big\r\nContent-Length: " + fmt.Sprint(pool.DefaultMaxBody+1) + "\r\n\r\n" + strings.Repeat("b", pool.DefaultMaxBody+1),
		"POST /expect HTTP/1.1\r\nHost: x\r\nX-Id: expect\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
	} {
		rc := dialRaw(t, p.a.srv.Addr())
		ch := make(chan *rawConn, 1)
		go func() { rc.send(raw); ch <- rc }()
		waits = append(waits, ch)
	}
	waitFor(t, "all queued locally", func() bool { return snapshot(t, p.a).Waiting == 4 })
	p.apps.unblock()
	<-blocked
	for _, ch := range waits {
		rc := <-ch
		resp, _, err := rc.response("POST")
		require.NoError(t, err)
		require.Less(t, resp.StatusCode, 500)
	}
	sa := snapshot(t, p.a)
	require.Zero(t, sa.Pool.OverflowAccepted+sa.Pool.OverflowRefused+sa.Pool.OverflowTimeout+sa.Pool.OverflowError)
	for id, apps := range p.apps.byID() {
		require.Equal(t, []string{"A"}, apps, id)
	}
}

// TestPooledStatsStayValid: the /stats documents of the sender, the puller and the
// front decode (and so validate) while requests overflow and are pulled.
func TestPooledStatsStayValid(t *testing.T) {
	p := newPair(t, true, 5*time.Second)
	blocked := sendAsync(p.a.url, "GET", "/block-a", "held", "")
	waitFor(t, "A busy", func() bool { return p.apps.inApp.Load() == 1 })
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, u := range []string{p.a.admin, p.b.admin, p.front.admin} {
				resp, err := http.Get(u + "/stats")
				if err != nil {
					errs <- err
					return
				}
				_, err = stats.Decode(resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	// Every request overflows to the front and B pulls it; on a starved host an
	// overflow exchange can outlast its decision deadline, and then (only then)
	// the request is served by A after all, its documented fallback.
	moved := uint64(0)
	for i := range 40 {
		r := send(p.a.url, "GET", "/moved", fmt.Sprint("m", i), "")
		require.NoError(t, r.err)
		if r.by != "B" {
			require.Equal(t, "A", r.by)
			sa := snapshot(t, p.a).Pool
			require.NotZero(t, sa.OverflowTimeout+sa.OverflowError, "served locally without a failed overflow")
			continue
		}
		moved++
	}
	close(stop)
	require.NoError(t, <-errs)
	p.apps.unblock()
	<-blocked
	require.Positive(t, moved)
	waitForPulls(t, p.b, moved)
}

// hungFront is a front that accepts connections and never answers: it holds
// each (closed when the test ends) and, when onConn is set, hands it to onConn
// in a goroutine of its own.
func hungFront(t *testing.T, onConn func(net.Conn)) net.Listener {
	t.Helper()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { hung.Close() })
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			if onConn != nil {
				go onConn(c)
			}
		}
	}()
	return hung
}
