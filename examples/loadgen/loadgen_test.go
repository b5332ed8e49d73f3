package loadgen

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

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
	require.InDelta(t, 300, float64(res.Sent), 4*math.Sqrt(300))
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

// TestProgress checks the progress line: throttled to one per interval of elapsed
// time, with the schedule's current rate and the counts so far.
func TestProgress(t *testing.T) {
	cfg := Config{Rates: []float64{10, 20, 30}, Step: time.Second, Duration: 4 * time.Second}
	var out bytes.Buffer
	p := Progress(&out, cfg, 2*time.Second)
	for _, c := range []struct {
		elapsed time.Duration
		r       Result
	}{
		{0, Result{}},
		{time.Second, Result{Sent: 10}}, // within the interval: no line
		{2 * time.Second, Result{Sent: 30, OK: 28, Failed: 1, Dropped: 1}}, // schedule step 2 = 30/s
		{3500 * time.Millisecond, Result{Sent: 50}},                        // throttled
		{4 * time.Second, Result{Sent: 70, OK: 70}},                        // past the last step: it repeats
	} {
		p(c.elapsed, c.r)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	for i, want := range [][]string{
		{"0s / 4s", "0.0%", "schedule    10.0/s", "sent        0 (0.0/s)"},
		{"2s / 4s", "50.0%", "schedule    30.0/s", "sent       30 (15.0/s)", "ok       28", "failed      1", "dropped      1"},
		{"4s / 4s", "100.0%", "schedule    30.0/s", "sent       70 (17.5/s)"},
	} {
		for _, w := range want {
			require.Contains(t, lines[i], w, "line %d", i)
		}
	}
}
