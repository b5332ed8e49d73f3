package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/qas-dev/qas/proxy/measure"
	"github.com/qas-dev/qas/proxy/server"
)

// TestArrivalsArePoisson checks counts per step against the rates: the mean within 4
// standard errors of a Poisson count, and the index of dispersion near 1.
func TestArrivalsArePoisson(t *testing.T) {
	rates := []float64{50, 0, 200}
	arr := Arrivals(rates, 100*time.Second, 300*time.Second, 7)
	counts := make([]int, 3)
	for _, a := range arr {
		counts[int(a/(100*time.Second))]++
	}
	for i, r := range rates {
		want := r * 100
		require.InDelta(t, want, float64(counts[i]), 4*math.Sqrt(want)+1e-9, "step %d", i)
	}
	// Deterministic per seed.
	require.Equal(t, arr, Arrivals(rates, 100*time.Second, 300*time.Second, 7))
	require.NotEqual(t, arr, Arrivals(rates, 100*time.Second, 300*time.Second, 8))
	// Variance of one-second counts ≈ mean for a Poisson process.
	var n []float64
	for _, a := range Arrivals([]float64{30}, time.Second, 2000*time.Second, 3) {
		s := int(a / time.Second)
		for len(n) <= s {
			n = append(n, 0)
		}
		n[s]++
	}
	var sum, sumSq float64
	for _, c := range n {
		sum += c
		sumSq += c * c
	}
	mean := sum / float64(len(n))
	dispersion := (sumSq/float64(len(n)) - mean*mean) / mean
	require.InDelta(t, 1, dispersion, 0.2)
}

func TestValidate(t *testing.T) {
	ok := Config{Targets: []string{"http://x"}, Rates: []float64{1}, Step: time.Second, Duration: time.Second, MaxInFlight: 1}
	require.NoError(t, ok.Validate())
	for name, mutate := range map[string]func(*Config){
		"no targets": func(c *Config) { c.Targets = nil },
		"no rates":   func(c *Config) { c.Rates = nil },
		"rate":       func(c *Config) { c.Rates = []float64{-1} },
		"step":       func(c *Config) { c.Step = 0 },
		"duration":   func(c *Config) { c.Duration = 0 },
		"in-flight":  func(c *Config) { c.MaxInFlight = 0 },
	} {
		c := ok
		mutate(&c)
		require.ErrorContains(t, c.Validate(), name)
	}
}

// TestRunThroughProxiesAndWatch drives two real proxies (two "pods") and checks that
// both got their round-robin share and that the watch printed their measurements.
func TestRunThroughProxiesAndWatch(t *testing.T) {
	var hits atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		time.Sleep(time.Millisecond)
	}))
	defer app.Close()
	var targets, statsURLs []string
	for i := 0; i < 2; i++ {
		srv, err := server.Listen(server.Config{Upstream: app.Listener.Addr().String()},
			server.Options{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", ReadHeaderTimeout: time.Second},
			measure.New(time.Now, 0, 0), zaptest.NewLogger(t))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = srv.Serve(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		targets = append(targets, "http://"+srv.Addr())
		statsURLs = append(statsURLs, "http://"+srv.AdminAddr()+"/stats")
	}
	before, err := Snapshots(context.Background(), http.DefaultClient, statsURLs)
	require.NoError(t, err)
	var out bytes.Buffer
	wctx, wcancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { Watch(wctx, http.DefaultClient, statsURLs, 200*time.Millisecond, &out); close(watched) }()
	res, err := Run(context.Background(), Config{
		Targets: targets, Path: "/", Rates: []float64{200}, Step: time.Second, Duration: 1500 * time.Millisecond, MaxInFlight: 100, Seed: 1,
	}, http.DefaultClient, nil)
	time.Sleep(300 * time.Millisecond)
	wcancel()
	<-watched
	require.NoError(t, err)
	require.Equal(t, res.Sent, res.OK, "no failures")
	require.Equal(t, int64(res.OK), hits.Load())
	// Every scheduled arrival was sent or, past the in-flight bound on a loaded
	// machine, dropped and counted.
	require.Equal(t, uint64(len(Arrivals([]float64{200}, time.Second, 1500*time.Millisecond, 1))), res.Sent+res.Dropped)
	require.NotZero(t, res.Sent)
	require.False(t, math.IsNaN(res.Quantile(0.95)))
	after, err := Snapshots(context.Background(), http.DefaultClient, statsURLs)
	require.NoError(t, err)
	tot, err := Total(before, after)
	require.NoError(t, err)
	require.Equal(t, res.OK, tot.Completions, "the proxies counted every request the client completed")
	require.GreaterOrEqual(t, tot.ServiceMean, 0.001, "each request slept 1 ms in the app")
	require.False(t, math.IsNaN(tot.P95))
	lines := strings.Split(out.String(), "\n")
	require.Contains(t, lines[0], "λ (/s)")
	require.GreaterOrEqual(t, strings.Count(out.String(), "\n"), 5, "a header and lines for both pods:\n%s", out.String())
}

// TestProgress checks the progress line: the mean rate the schedule asked for over the
// last interval (the last step repeating past the end) and the counts so far.
func TestProgress(t *testing.T) {
	cfg := Config{Rates: []float64{10, 20, 30}, Step: time.Second, Duration: 4 * time.Second, ProgressEvery: 2 * time.Second}
	var out bytes.Buffer
	p := Progress(&out, cfg)
	p(0, Result{})                                                    // no interval yet: the first step's rate
	p(2*time.Second, Result{Sent: 30, OK: 28, Failed: 1, Dropped: 1}) // (10+20)/2
	p(3500*time.Millisecond, Result{Sent: 50})                        // over [1.5 s, 3.5 s): (20·0.5+30·1+30·0.5)/2
	p(4*time.Second, Result{Sent: 70, OK: 70})                        // past the last step: it repeats
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	for i, want := range [][]string{
		{"0s / 4s", "0.0%", "schedule    10.0/s", "sent        0 (0.0/s)"},
		{"2s / 4s", "50.0%", "schedule    15.0/s", "sent       30 (15.0/s)", "ok       28", "failed      1", "dropped      1"},
		{"3s / 4s", "87.5%", "schedule    27.5/s", "sent       50 (14.3/s)"},
		{"4s / 4s", "100.0%", "schedule    30.0/s", "sent       70 (17.5/s)"},
	} {
		for _, w := range want {
			require.Contains(t, lines[i], w, "line %d", i)
		}
	}
}

// TestProgressThroughQuietStretches: progress comes from a ticker, so a schedule with
// no arrivals (the trace's nights and its outage) still reports, once per interval,
// and lasts its whole duration. The clock is a fake one, stepped by the test.
func TestProgressThroughQuietStretches(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	lines := make(chan string, 16)
	var buf bytes.Buffer
	cfg := Config{Targets: []string{"http://127.0.0.1:1"}, Rates: []float64{0}, Step: time.Second, Duration: 5 * time.Second,
		MaxInFlight: 1, ProgressEvery: time.Second, Clock: clk}
	p := Progress(&buf, cfg)
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := Run(context.Background(), cfg, http.DefaultClient, func(elapsed time.Duration, r Result) {
			buf.Reset()
			p(elapsed, r)
			lines <- buf.String()
		})
		done <- outcome{r, err}
	}()
	for i := 1; i <= 4; i++ {
		waitForWaiters(t, clk)
		clk.Step(time.Second)
		select {
		case line := <-lines:
			require.Contains(t, line, fmt.Sprintf("%ds / 5s", i))
			require.Contains(t, line, "schedule     0.0/s")
		case o := <-done:
			t.Fatalf("Run ended after %v of a 5 s schedule: %+v %v", clk.Since(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)), o.r, o.err)
		}
	}
	clk.Step(time.Second)
	o := <-done
	require.NoError(t, o.err)
	require.Equal(t, 5*time.Second, o.r.Elapsed)
	require.Zero(t, o.r.Sent)
}

func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond, "Run never waited on the clock")
}

// TestOpenLoop: arrivals leave on schedule whether or not responses come back. The
// server holds every request until the test releases them; with the fake clock past
// the schedule's end, the server must hold exactly the scheduled number of requests
// (or MaxInFlight of them, the rest dropped and counted, never delayed) before any
// response.
func TestOpenLoop(t *testing.T) {
	rates := []float64{40, 0, 70}
	const step, duration, seed = time.Second, 3 * time.Second, 5
	scheduled := len(Arrivals(rates, step, duration, seed))
	require.Greater(t, scheduled, 60)
	for _, maxInFlight := range []int{10_000, 25} {
		t.Run(fmt.Sprintf("max-in-flight=%d", maxInFlight), func(t *testing.T) {
			var held atomic.Int64
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				held.Add(1)
				<-release
			}))
			defer srv.Close()
			released := false
			defer func() {
				if !released {
					close(release)
				}
			}()
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
			cfg := Config{Targets: []string{srv.URL}, Rates: rates, Step: step, Duration: duration, MaxInFlight: maxInFlight, Seed: seed, Clock: clk}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
			done := make(chan Result, 1)
			errc := make(chan error, 1)
			go func() {
				r, err := Run(context.Background(), cfg, client, nil)
				errc <- err
				done <- r
			}()
			waitForWaiters(t, clk)
			clk.Step(duration) // the whole schedule is due; no response has come back
			want := min(scheduled, maxInFlight)
			require.Eventually(t, func() bool { return held.Load() == int64(want) }, time.Minute, 5*time.Millisecond,
				"the server holds %d requests, want %d", held.Load(), want)
			select {
			case err := <-errc:
				t.Fatalf("Run returned before any response: %v", err)
			default:
			}
			close(release)
			released = true
			require.NoError(t, <-errc)
			r := <-done
			require.Equal(t, uint64(want), r.Sent)
			require.Equal(t, uint64(want), r.OK)
			require.Equal(t, uint64(scheduled-want), r.Dropped, "arrivals past the in-flight bound are dropped, not delayed")
			require.Equal(t, int64(want), held.Load())
		})
	}
}

// TestScheduleStreams: the schedule yields arrivals in order, within the duration, and
// the same ones as collecting them, without holding them.
func TestScheduleStreams(t *testing.T) {
	rates := []float64{3, 0, 0, 5000, 0}
	s := NewSchedule(rates, 250*time.Millisecond, 1100*time.Millisecond, 11)
	var got []time.Duration
	prev := time.Duration(-1)
	for at, ok := s.Next(); ok; at, ok = s.Next() {
		require.Greater(t, at, prev)
		require.Less(t, at, 1100*time.Millisecond)
		prev = at
		got = append(got, at)
	}
	_, ok := s.Next()
	require.False(t, ok, "an ended schedule stays ended")
	require.Equal(t, Arrivals(rates, 250*time.Millisecond, 1100*time.Millisecond, 11), got)
	for _, at := range got {
		require.False(t, at >= 250*time.Millisecond && at < 750*time.Millisecond, "no arrival in the quiet steps: %v", at)
	}
}

// TestRunCountsFailuresByKind sends load round-robin to a healthy server, one that
// answers 503, a closed port and one that hangs up without answering: each kind of
// failure is counted once per request sent its way and keeps the first error.
func TestRunCountsFailuresByKind(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer healthy.Close()
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer hangUp.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	cfg := Config{Targets: []string{healthy.URL, unavailable.URL, refused, hangUp.URL}, Path: "/x",
		Rates: []float64{100}, Step: time.Second, Duration: 300 * time.Millisecond, MaxInFlight: 1000, Seed: 3}
	n := len(Arrivals(cfg.Rates, cfg.Step, cfg.Duration, cfg.Seed))
	require.GreaterOrEqual(t, n, 8, "every target gets requests")
	per := func(target int) uint64 { return uint64((n - target + len(cfg.Targets) - 1) / len(cfg.Targets)) }
	r, err := Run(context.Background(), cfg, &http.Client{}, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(n), r.Sent)
	require.Equal(t, per(0), r.OK)
	require.Equal(t, uint64(n)-per(0), r.Failed)
	got := map[string]Failure{}
	for _, f := range r.Failures {
		got[f.Kind] = f
	}
	require.Len(t, got, 3, "%+v", r.Failures)
	require.Equal(t, per(1), got["HTTP 503"].Count)
	require.Equal(t, unavailable.URL+"/x answered 503 Service Unavailable", got["HTTP 503"].First)
	require.Equal(t, per(2), got["connection refused"].Count)
	require.Contains(t, got["connection refused"].First, refused+"/x")
	require.Equal(t, per(3), got["connection closed"].Count)
	require.Contains(t, got["connection closed"].First, hangUp.URL+"/x")
}

func TestFailureKind(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Get", URL: "http://h/", Err: err} }
	// A real client timeout: the server never answers.
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer silent.Close()
	defer close(release)
	_, clientTimeout := (&http.Client{Timeout: 50 * time.Millisecond}).Get(silent.URL)
	require.Error(t, clientTimeout)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{statusError{code: 502, target: "http://h/"}, "HTTP 502"},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connection refused"},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}}), "name resolution"},
		{wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), "timeout"},
		{clientTimeout, "timeout"},
		{wrap(context.DeadlineExceeded), "timeout"},
		{wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), "connection closed"},
		{wrap(io.EOF), "connection closed"},
		{wrap(errors.New("tls: handshake failure")), "other error"},
	} {
		require.Equal(t, tc.want, failureKind(tc.err), "%v", tc.err)
	}
}
