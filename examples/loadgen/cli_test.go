package loadgen

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/version"
)

func TestMainFlags(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(tr, []byte("1\n2\nx\n"), 0o600))
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--rate=1"}, "invalid --target"},
		{[]string{"--target=http://x"}, "invalid --rate: give --rate or --trace"},
		{[]string{"--target=http://x", "--rate=1", "--trace=" + tr}, "not both"},
		{[]string{"--target=http://x", "--trace=" + tr}, `line 3: "x" is not a non-negative integer`},
		{[]string{"--target=http://x", "--trace=" + tr, "--window=5"}, "invalid --window"},
		{[]string{"--target=http://x", "--rate=1", "--compress=0"}, "invalid --compress"},
		{[]string{"--target=http://x", "--rate=1", "--interval=0s"}, "invalid --interval"},
		{[]string{"--target=127.0.0.1:8080", "--rate=1"}, `invalid --target: "127.0.0.1:8080" is not an http(s) URL`},
		{[]string{"--target=localhost:8080", "--rate=1"}, `invalid --target: "localhost:8080" is not an http(s) URL`},
		{[]string{"--target=notaurl", "--rate=1"}, `invalid --target: "notaurl" is not an http(s) URL`},
		{[]string{"--target=ftp://x", "--rate=1"}, `invalid --target: "ftp://x" is not an http(s) URL`},
		{[]string{"--target=http://", "--rate=1"}, `invalid --target: "http://" is not an http(s) URL`},
		{[]string{"--target=http://:8080", "--rate=1"}, `invalid --target: "http://:8080" is not an http(s) URL`},
		{[]string{"--target=http://x, http//y", "--rate=1"}, `invalid --target: "http//y" is not an http(s) URL`},
		{[]string{"--target=http://x", "--rate=1", "--watch=127.0.0.1:9901/stats"}, `invalid --watch: "127.0.0.1:9901/stats" is not an http(s) URL such as http://127.0.0.1:9901/stats`},
		{[]string{"--target=http://x", "--rate=1", "--summary=s.txt", "--watch= , "}, "invalid --summary: needs --watch"},
		// Go's flag package stops at the first positional argument: the bad
		// --interval after it would go unreported.
		{[]string{"--target=http://x", "--rate=1", "extra", "--interval=0s"}, `unexpected argument "extra" (qas-loadgen takes flags only)`},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), tt.args, func(string) string { return "" }, &out, &errb)
		require.Equal(t, 2, code, tt.args)
		require.Contains(t, errb.String(), tt.wantErr, tt.args)
	}
}

// TestTraceRatesCompressAndScale: each trace second lasts 1/compress s at compress
// times its rate, so every trace second keeps its requests and the last ones of a
// window that is not a multiple of the compression take only their share of a second.
func TestTraceRatesCompressAndScale(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(tr, []byte("1\n2\n3\n4\n5\n"), 0o600))
	rates, step, err := traceRates(tr, "", 10, 2)
	require.NoError(t, err)
	require.Equal(t, 500*time.Millisecond, step)
	require.Equal(t, []float64{20, 40, 60, 80, 100}, rates)
	var requests float64
	for _, r := range rates {
		requests += r * step.Seconds()
	}
	require.InDelta(t, 150, requests, 1e-9, "(1+2+3+4+5) x scale 10: none gained or lost by compression")
	require.Equal(t, 2500*time.Millisecond, time.Duration(len(rates))*step, "5 trace seconds at 2 per second")

	_, _, err = traceRates(tr, "1h:2h", 1, 1)
	require.ErrorContains(t, err, "holds no seconds")
}

// TestMainReplaysAGzipTraceWindow runs the command on a gzipped trace with a window:
// the server receives exactly the arrivals the schedule of that window holds (the
// loud seconds outside the window send nothing).
func TestMainReplaysAGzipTraceWindow(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	defer srv.Close()
	var raw bytes.Buffer
	zw := gzip.NewWriter(&raw)
	// Seconds 0-4 and 8-9 are loud; the window 5s:8s holds 3, 1 and 2 requests a second.
	_, err := zw.Write([]byte("500\n500\n500\n500\n500\n3\n1\n2\n500\n500\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	tr := filepath.Join(t.TempDir(), "trace.rps.gz")
	require.NoError(t, os.WriteFile(tr, raw.Bytes(), 0o600))

	args := []string{"--target=" + srv.URL, "--trace=" + tr, "--window=5s:8s", "--scale=20", "--compress=3", "--seed=9", "--interval=100ms"}
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())

	rates, step, err := traceRates(tr, "5s:8s", 20, 3)
	require.NoError(t, err)
	require.Equal(t, []float64{180, 60, 120}, rates)
	want := len(Arrivals(rates, step, time.Duration(len(rates))*step, 9))
	require.NotZero(t, want)
	require.Equal(t, int64(want), got.Load(), "requests the server received")
	require.Contains(t, out.String(), fmt.Sprintf("sent %d in ", want))
	require.Contains(t, out.String(), fmt.Sprintf("%d ok, 0 failed, 0 dropped", want))
}

func TestMainSendsLoad(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"--target=" + srv.URL, "--rate=100", "--duration=500ms"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	require.Contains(t, out.String(), "0 failed")
	require.Contains(t, out.String(), "client latency: p50")
}

// TestMainSaysWhyNoRequestSucceeded: every request to a closed port fails; the
// summary says how and shows the first error, and the command exits 1.
func TestMainSaysWhyNoRequestSucceeded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"--target=" + closed, "--rate=100", "--duration=200ms", "--seed=4"}, func(string) string { return "" }, &out, &errb)
	require.Equal(t, 1, code, errb.String())
	n := len(Arrivals([]float64{100}, time.Second, 200*time.Millisecond, 4))
	require.NotZero(t, n)
	require.Contains(t, out.String(), fmt.Sprintf("0 ok, %d failed", n))
	require.Regexp(t, fmt.Sprintf(`failed: %d × connection refused, the first: Get "%s/": .*connection refused`, n, regexp.QuoteMeta(closed)), out.String())
	require.Contains(t, errb.String(), fmt.Sprintf("qas-loadgen: none of the %d requests sent succeeded", n))
}

// TestMainVersion: --version prints one line to stdout and exits 0, sending nothing.
func TestMainVersion(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"--version", "--target=http://x"}, func(string) string { return "" }, &out, &errb))
	require.Equal(t, version.String("qas-loadgen")+"\n", out.String())
	require.Empty(t, errb.String())
}
