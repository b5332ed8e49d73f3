package app

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/version"
	"github.com/qas-dev/qas/proxy/stats"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*testing.T, Flags)
		wantErr string
	}{
		{name: "sidecar defaults", check: func(t *testing.T, f Flags) {
			require.Equal(t, ":8080", f.Listen)
			require.Equal(t, ":9901", f.AdminListen)
			require.Equal(t, "127.0.0.1:8081", f.Upstream)
			require.True(t, f.FastPath)
			require.Equal(t, 1, f.Procs)
		}},
		{name: "procs from env", env: map[string]string{"QAS_PROXY_PROCS": "0"}, check: func(t *testing.T, f Flags) {
			require.Equal(t, 0, f.Procs)
		}},
		{name: "fast path off by env", env: map[string]string{"QAS_PROXY_FAST_PATH": "false"}, check: func(t *testing.T, f Flags) {
			require.False(t, f.FastPath)
		}},
		{name: "bad fast path", args: []string{"--fast-path=maybe"}, wantErr: "fast-path"},
		{name: "upstream protocol defaults to http1", check: func(t *testing.T, f Flags) {
			require.Equal(t, "http1", f.UpstreamProtocol)
		}},
		{name: "upstream protocol h2c", args: []string{"--upstream-protocol=h2c"}, check: func(t *testing.T, f Flags) {
			require.Equal(t, "h2c", f.UpstreamProtocol)
		}},
		{name: "upstream protocol from env", env: map[string]string{"QAS_PROXY_UPSTREAM_PROTOCOL": "h2c"}, check: func(t *testing.T, f Flags) {
			require.Equal(t, "h2c", f.UpstreamProtocol)
		}},
		{name: "bad upstream protocol", args: []string{"--upstream-protocol=http2"}, wantErr: `invalid --upstream-protocol: "http2" is not one of http1, h2c`},
		{name: "env override", env: map[string]string{"QAS_PROXY_UPSTREAM": "127.0.0.1:3000"}, check: func(t *testing.T, f Flags) {
			require.Equal(t, "127.0.0.1:3000", f.Upstream)
		}},
		{name: "bad upstream", args: []string{"--upstream=nohost"}, wantErr: "invalid --upstream"},
		{name: "same ports", args: []string{"--listen=:1", "--admin-listen=:1"}, wantErr: "invalid --admin-listen: must differ"},
		{name: "negative drain", args: []string{"--drain=-1s"}, wantErr: "invalid --drain"},
		{name: "zero read header timeout", args: []string{"--read-header-timeout=0"}, wantErr: "invalid --read-header-timeout"},
		{name: "negative concurrency", args: []string{"--concurrency=-2"}, wantErr: "invalid --concurrency"},
		{name: "negative procs", args: []string{"--procs=-1"}, wantErr: "invalid --procs"},
		{name: "tiny headers", args: []string{"--max-header-bytes=10"}, wantErr: "invalid --max-header-bytes"},
		{name: "bad env", env: map[string]string{"QAS_PROXY_QUEUE": "many"}, wantErr: "invalid --queue"},
		// Go's flag package stops at the first positional argument: without the
		// check, the proxy would start on the default :8080 here.
		{name: "positional argument", args: []string{"extra", "--listen=127.0.0.1:9000"}, wantErr: `unexpected argument "extra" (qas-proxy takes flags only)`},
		{name: "boolean flag given a separate value", args: []string{"--fast-path", "false", "--concurrency=-2"},
			wantErr: `unexpected argument "false" (boolean flags take --fast-path=false)`},
		{name: "version", args: []string{"--version", "--listen=nohost"}, wantErr: "version requested"},
		// The pooled data plane (issue #20).
		{name: "no pooling by default", check: func(t *testing.T, f Flags) {
			require.Equal(t, ModeSidecar, f.Mode)
			require.Empty(t, f.PoolFronts)
			require.Equal(t, 25*time.Millisecond, f.PoolDecisionTimeout)
			require.Equal(t, int64(1<<20), f.PoolMaxBody)
			require.Equal(t, int64(64<<10), f.PoolKeepMaxBody)
			require.Equal(t, int64(4<<20), f.PoolKeepBudget)
		}},
		{name: "keep no bodies", args: []string{"--pool-keep-max-body=0", "--pool-keep-budget=0"}, check: func(t *testing.T, f Flags) {
			require.Zero(t, f.PoolKeepMaxBody)
		}},
		{name: "negative keep bound", args: []string{"--pool-keep-max-body=-1"}, wantErr: "invalid --pool-keep-max-body: -1 is not in [0, 64 MiB]"},
		{name: "keep budget below the bound", args: []string{"--pool-keep-max-body=1000", "--pool-keep-budget=999"}, wantErr: "invalid --pool-keep-budget: 999 is not in [--pool-keep-max-body 1000, 1 GiB]"},
		{name: "huge keep budget", args: []string{"--pool-keep-budget=2000000000"}, wantErr: "invalid --pool-keep-budget"},
		{name: "pooling", args: []string{"--pool-fronts=10.0.0.1:8080, 10.0.0.2:8080", "--workload=shop", "--pool-secret-file=/s", "--concurrency=1"},
			check: func(t *testing.T, f Flags) {
				require.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, f.frontList())
			}},
		{name: "pooling by the front's Service", args: []string{"--pool-front-service=qas-front-shop", "--workload=shop", "--pool-secret-file=/s", "--concurrency=1"},
			check: func(t *testing.T, f Flags) {
				require.Equal(t, "qas-front-shop", f.PoolFrontService)
				require.Equal(t, "qas-pool", f.PoolFrontPortName)
				require.Equal(t, 5*time.Minute, f.PoolFrontsMaxStale)
				require.Empty(t, f.frontList())
			}},
		{name: "front Service without concurrency", args: []string{"--pool-front-service=qas-front-shop", "--workload=shop", "--pool-secret-file=/s"}, wantErr: "pooling needs --concurrency"},
		{name: "front Service without secret", args: []string{"--pool-front-service=qas-front-shop", "--workload=shop", "--concurrency=1"}, wantErr: "pooling needs --workload and --pool-secret-file"},
		{name: "front Service and static fronts", args: []string{"--pool-front-service=qas-front-shop", "--pool-fronts=f:1", "--workload=shop", "--pool-secret-file=/s", "--concurrency=1"}, wantErr: "invalid --pool-front-service: give the fronts either"},
		{name: "fronts never stale", args: []string{"--pool-fronts-max-stale=0"}, wantErr: "invalid --pool-fronts-max-stale"},
		{name: "front with front Service", args: []string{"--mode=front", "--pool-secret-dir=/d", "--pool-front-service=x"}, wantErr: "invalid --pool-front-service: is for sidecars"},
		{name: "pooling without workload", args: []string{"--pool-fronts=f:1", "--pool-secret-file=/s", "--concurrency=1"}, wantErr: "invalid --pool-fronts: pooling needs --workload"},
		{name: "pooling without concurrency", args: []string{"--pool-fronts=f:1", "--workload=shop", "--pool-secret-file=/s"}, wantErr: "pooling needs --concurrency"},
		{name: "bad front", args: []string{"--pool-fronts=nohost", "--workload=shop", "--pool-secret-file=/s", "--concurrency=1"}, wantErr: `invalid --pool-fronts: "nohost" is not host:port`},
		{name: "bad workload", args: []string{"--workload=Shop|1"}, wantErr: "invalid --workload"},
		{name: "zero decision timeout", args: []string{"--pool-decision-timeout=0"}, wantErr: "invalid --pool-decision-timeout"},
		{name: "huge max body", args: []string{"--pool-max-body=1000000000"}, wantErr: "invalid --pool-max-body"},
		{name: "bad mode", args: []string{"--mode=peer"}, wantErr: `invalid --mode: "peer" is not sidecar or front`},
		{name: "front", args: []string{"--mode=front", "--pool-secret-dir=/d"}, check: func(t *testing.T, f Flags) {
			require.Equal(t, 1000, f.FrontMaxQueue)
			require.Equal(t, 5*time.Second, f.FrontMaxWait)
		}},
		{name: "front without secrets", args: []string{"--mode=front"}, wantErr: "front mode needs --pool-secret-dir"},
		{name: "front with both secrets", args: []string{"--mode=front", "--pool-secret-dir=/d", "--pool-secret-file=/s", "--workload=shop"}, wantErr: "front mode needs"},
		{name: "front with fronts", args: []string{"--mode=front", "--pool-secret-dir=/d", "--pool-fronts=f:1"}, wantErr: "invalid --pool-fronts: is for sidecars"},
		{name: "front wait too long", args: []string{"--mode=front", "--pool-secret-dir=/d", "--front-max-wait=2m"}, wantErr: "invalid --front-max-wait"},
		{name: "front poll too long", args: []string{"--mode=front", "--pool-secret-dir=/d", "--front-poll-timeout=1m"}, wantErr: "invalid --front-poll-timeout"},
		{name: "sidecar with secret dir", args: []string{"--pool-secret-dir=/d"}, wantErr: "invalid --pool-secret-dir: is for --mode front"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, f)
		})
	}
}

// TestMainVersionAndUsage: --version prints one line to stdout and exits 0 without
// serving; a positional argument exits 2 naming it.
func TestMainVersionAndUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, Main(context.Background(), []string{"--version"}, func(string) string { return "" }, &stdout, &stderr))
	require.Equal(t, version.String("qas-proxy")+"\n", stdout.String())
	require.Empty(t, stderr.String())

	stdout.Reset()
	require.Equal(t, 2, Main(context.Background(), []string{"extra", "--listen=127.0.0.1:0"}, func(string) string { return "" }, &stdout, &stderr))
	require.Empty(t, stdout.String())
	require.Contains(t, stderr.String(), `qas-proxy: usage: unexpected argument "extra"`)
}

// TestBadUpstreamProtocolExits2: a bad --upstream-protocol is a usage error that
// names the flag.
func TestBadUpstreamProtocolExits2(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(context.Background(), []string{"--upstream-protocol=grpc"}, func(string) string { return "" }, io.Discard, &stderr)
	require.Equal(t, 2, code)
	require.Contains(t, stderr.String(), `invalid --upstream-protocol: "grpc" is not one of http1, h2c`)
}

// TestBinary runs the real qas-proxy process: a request goes through, /stats counts it,
// and SIGTERM drains and exits 0.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "qas-proxy")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/qas-dev/qas/proxy/cmd/qas-proxy").CombinedOutput()
	require.NoError(t, err, "%s", out)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from app") }))
	defer upstream.Close()

	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	admin := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "--listen="+listen, "--admin-listen="+admin, "--drain=100ms", "--log-format=console")
	cmd.Env = append(cmd.Environ(), "QAS_PROXY_UPSTREAM="+upstream.Listener.Addr().String())
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
	}()

	s := serveOnceThroughProxy(t, listen, admin)
	require.Equal(t, uint64(1), s.Completions)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "exit status 0 after SIGTERM")
	var all []string
	for l := range logs {
		all = append(all, l)
	}
	require.Contains(t, strings.Join(all, "\n"), "draining")
}

// TestRunPooled runs a front and two sidecars through Run with their flags, as the
// binary does: with one sidecar's only slot busy, its next request is served by the
// other pod through the front.
func TestRunPooled(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "shop")
	require.NoError(t, os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600))
	run := func(args ...string) (addr, admin string) {
		f, err := Parse(append([]string{"--listen=127.0.0.1:0", "--admin-listen=127.0.0.2:0", "--drain=0"}, args...), func(string) string { return "" })
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan [2]string, 1)
		done := make(chan error, 1)
		go func() { done <- Run(ctx, f, zap.NewNop(), func(a, b string) { ready <- [2]string{a, b} }) }()
		t.Cleanup(func() {
			cancel()
			<-done //nolint:errcheck // stopped either way
		})
		select {
		case a := <-ready:
			return a[0], a[1]
		case err := <-done:
			t.Fatalf("run %v: %v", args, err)
		}
		return "", ""
	}
	front, frontAdmin := run("--mode=front", "--pool-secret-dir="+dir)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	appFor := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/block" {
				<-release
			}
			_, _ = io.WriteString(w, name)
		}))
		t.Cleanup(s.Close)
		return s.Listener.Addr().String()
	}
	a, _ := run("--upstream="+appFor("A"), "--concurrency=1", "--workload=shop", "--pool-secret-file="+secret, "--pool-fronts="+front)
	_, _ = run("--upstream="+appFor("B"), "--concurrency=1", "--workload=shop", "--pool-secret-file="+secret, "--pool-fronts="+front)
	frontDoc := func() *stats.Front {
		resp, err := http.Get("http://" + frontAdmin + "/stats")
		require.NoError(t, err)
		defer resp.Body.Close()
		s, err := stats.Decode(resp.Body)
		require.NoError(t, err)
		return s.Front
	}
	require.Eventually(t, func() bool { return frontDoc().WaitingPulls == 2 }, 20*time.Second, 5*time.Millisecond)
	go func() {
		resp, err := http.Get("http://" + a + "/block")
		if err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return frontDoc().WaitingPulls == 1 }, 20*time.Second, 5*time.Millisecond, "A is busy: it no longer pulls")
	resp, err := http.Get("http://" + a + "/moved")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "B", string(b))
	require.Equal(t, uint64(1), frontDoc().Dispatched)
	once.Do(func() { close(release) })
}

// TestMainPoolsOffOutsideACluster: a sidecar told to find its fronts by their Service
// but with no Kubernetes credentials (no in-cluster config) does not crash-loop the
// pod: it serves its app as a plain sidecar, with no pooling counters.
func TestMainPoolsOffOutsideACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from app") }))
	defer upstream.Close()
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	admin := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"--listen=" + listen, "--admin-listen=" + admin, "--upstream=" + upstream.Listener.Addr().String(),
			"--drain=10ms", "--log-level=error", "--concurrency=1", "--workload=shop", "--pool-secret-file=/nonexistent",
			"--pool-front-service=qas-front-shop"}, func(k string) string {
			if k == "POD_NAMESPACE" {
				return "shop"
			}
			return ""
		}, io.Discard, io.Discard)
	}()
	s := serveOnceThroughProxy(t, listen, admin)
	require.Nil(t, s.Pool, "pooling is off without the front's endpoints")
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code)
	case <-time.After(30 * time.Second):
		t.Fatal("Main did not return after its context ended")
	}
}

// serveOnceThroughProxy waits for the proxy's admin port to say ready, sends one GET
// through listen, requires the app's answer, and returns the proxy's /stats.
func serveOnceThroughProxy(t *testing.T, listen, admin string) stats.Snapshot {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 30*time.Second, 20*time.Millisecond)
	resp, err := http.Get("http://" + listen + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "from app", string(body))
	resp, err = http.Get("http://" + admin + "/stats")
	require.NoError(t, err)
	s, err := stats.Decode(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	return s
}
