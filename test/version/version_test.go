package version

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/certs"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Options{}) }

// stamp is what the test links into the binaries, as the Dockerfiles link ${VERSION}.
const stamp = "v9.9.9-test"

// binaries are the commands the images ship, stamped as a release build stamps them.
var binaries = &testenv.Commands{
	Packages: []string{
		"github.com/qas-dev/qas/proxy/cmd/qas-proxy",
		"github.com/qas-dev/qas/collector/cmd/qas-collector",
		"github.com/qas-dev/qas/decider/cmd/qas-decider",
		exampleApp,
		"github.com/qas-dev/qas/examples/loadgen/cmd/qas-loadgen",
	},
	Flags: []string{"-ldflags", "-X github.com/qas-dev/qas/internal/version.Version=" + stamp},
}

const exampleApp = "github.com/qas-dev/qas/examples/app/cmd/qas-example-app"

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// versionLine is what `name --version` must print.
func versionLine(name string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)\n", name, stamp, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// TestVersionFlag: every binary, and each qas-decider subcommand, prints the stamped
// version on stdout and exits 0; a positional argument exits 2 naming it instead of
// silently ending the flags.
func TestVersionFlag(t *testing.T) {
	dir := binaries.Dir(t)
	invocations := [][]string{
		{"qas-proxy", "--version"}, {"qas-collector", "--version"}, {"qas-example-app", "--version"},
		{"qas-loadgen", "--version"}, {"qas-decider", "--version"},
		{"qas-decider", "run", "--version"}, {"qas-decider", "webhook", "--version"},
		{"qas-decider", "model", "--version"}, {"qas-decider", "simulate", "--version"},
	}
	for _, inv := range invocations {
		t.Run(strings.Join(inv, " "), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, inv[0]), inv[1:]...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, stderr.String())
			require.Equal(t, versionLine(inv[0]), string(out))
			require.Empty(t, stderr.String())
		})
	}
	for _, inv := range [][]string{
		{"qas-proxy", "extra"}, {"qas-collector", "extra"}, {"qas-example-app", "extra"}, {"qas-loadgen", "extra"},
		{"qas-decider", "run", "extra"}, {"qas-decider", "webhook", "extra"}, {"qas-decider", "model", "extra"},
		{"qas-decider", "simulate", "extra"},
	} {
		t.Run(strings.Join(inv, " "), func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, inv[0]), inv[1:]...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			require.Equal(t, 2, ee.ExitCode(), "%s", out)
			require.Contains(t, string(out), `unexpected argument "extra"`)
		})
	}
}

// server is a running binary whose JSON log the test reads.
type server struct {
	t *testing.T
	p *testenv.Process
}

func start(t *testing.T, name string, args ...string) *server {
	t.Helper()
	p, err := testenv.StartProcess(name, filepath.Join(binaries.Dir(t), name), args, nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(time.Minute) })
	return &server{t: t, p: p}
}

// logLine waits for the first log entry with message msg and returns it.
func (s *server) logLine(msg string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		sc := bufio.NewScanner(strings.NewReader(s.p.Output()))
		for sc.Scan() {
			var entry map[string]any
			if json.Unmarshal(sc.Bytes(), &entry) == nil && entry["msg"] == msg {
				return entry
			}
		}
		if exited, err := s.p.Exited(); exited {
			s.t.Fatalf("%s exited (%v) before logging %q:\n%s", s.p.Name, err, msg, s.p.Output())
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s logged no %q:\n%s", s.p.Name, msg, s.p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and requires a clean exit.
func (s *server) stop() {
	s.t.Helper()
	s.p.Stop(time.Minute)
	_, err := s.p.Exited()
	require.NoError(s.t, err, "%s after SIGTERM:\n%s", s.p.Name, s.p.Output())
}

// buildInfo returns the lines of metric name on the /metrics page at url.
func buildInfo(t *testing.T, url, name string) []string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// wantBuildInfo is the one sample of a build_info metric for the stamped build.
func wantBuildInfo(name string) []string {
	return []string{fmt.Sprintf(`%s{goversion=%q,version=%q} 1`, name, runtime.Version(), stamp)}
}

func addr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) }

func TestProxyReportsItsVersion(t *testing.T) {
	admin := addr(t)
	s := start(t, "qas-proxy", "--listen="+addr(t), "--admin-listen="+admin, "--drain=0s")
	require.Equal(t, stamp, s.logLine("serving")["version"])
	require.Equal(t, wantBuildInfo("qas_proxy_build_info"), buildInfo(t, "http://"+admin+"/metrics", "qas_proxy_build_info"))
	s.stop()
}

func TestCollectorReportsItsVersion(t *testing.T) {
	c := kubetest.Shared(t)
	db := influxtest.Start(t)
	metrics := addr(t)
	s := start(t, "qas-collector", "--kubeconfig="+c.Kubeconfig, "--influx-url="+db.URL, "--cpu=false",
		"--metrics-listen="+metrics, "--namespace="+c.Namespace(t))
	require.Equal(t, stamp, s.logLine("collecting")["version"])
	require.Equal(t, wantBuildInfo("qas_collector_build_info"), buildInfo(t, "http://"+metrics+"/metrics", "qas_collector_build_info"))
	s.stop()
}

func TestDeciderReportsItsVersion(t *testing.T) {
	c := kubetest.Shared(t)
	require.NoError(t, c.InstallCRD(t.Context(), filepath.Join(repoRoot(), "config", "crd", "qas.dev_queueautoscalers.yaml")))
	db := influxtest.Start(t)
	metrics := addr(t)
	s := start(t, "qas-decider", "run", "--kubeconfig="+c.Kubeconfig, "--influx-url="+db.URL, "--leader-elect=false",
		"--metrics-listen="+metrics)
	require.Equal(t, stamp, s.logLine("deciding")["version"])
	require.Equal(t, wantBuildInfo("qas_decider_build_info"), buildInfo(t, "http://"+metrics+"/metrics", "qas_decider_build_info"))
	s.stop()
}

// TestWebhookReportsItsVersion runs `qas-decider webhook` with a mounted certificate
// (the cert-manager mode) and without pooling (which watches QueueAutoscalers), so it
// needs no API server: it has no /metrics, so its start-up log line is where the
// version shows.
func TestWebhookReportsItsVersion(t *testing.T) {
	dir := t.TempDir()
	b, err := certs.Generate(time.Now(), []string{"127.0.0.1"}, time.Hour, time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), b.Cert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), b.Key, 0o600))
	listen := addr(t)
	s := start(t, "qas-decider", "webhook", "--listen="+listen, "--cert-dir="+dir, "--pooling=false")
	line := s.logLine("serving")
	require.Equal(t, stamp, line["version"])
	require.Equal(t, listen, line["listen"])
	s.stop()
}

// TestBuildIsStamped guards the test itself: a binary built without the stamp does
// not report it, so the tests above see the ldflag at work and not a constant.
func TestBuildIsStamped(t *testing.T) {
	unstamped := &testenv.Commands{Packages: []string{exampleApp}, Flags: []string{"-buildvcs=false"}}
	bin := filepath.Join(unstamped.Dir(t), "qas-example-app")
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("qas-example-app dev (%s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH), string(out))
}
