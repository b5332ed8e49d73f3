package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/testenv"
)

// TestBinarySecondSignalForcesExit runs the real qas-proxy with a request its app
// never answers and a shutdown timeout of an hour: the first Ctrl-C (SIGINT) starts
// the drain, which waits for that request; the second exits at once with status 130
// and a line saying so, instead of waiting out the hour.
func TestBinarySecondSignalForcesExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "qas-proxy")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/qas-dev/qas/proxy/cmd/qas-proxy").CombinedOutput()
	require.NoError(t, err, "%s", out)
	inApp, release := make(chan struct{}, 1), make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			inApp <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "from app")
	}))
	defer upstream.Close()
	defer close(release) // before Close, which waits for the handler

	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	admin := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(bin, "--listen="+listen, "--admin-listen="+admin, "--drain=0", "--shutdown-timeout=1h", "--log-format=console")
	cmd.Env = append(cmd.Environ(), "QAS_PROXY_UPSTREAM="+upstream.Listener.Addr().String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// The log, read to its end; draining closes when the drain begins.
	var mu sync.Mutex
	var log []string
	lines := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(log, "\n")
	}
	draining, exited := make(chan struct{}), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			mu.Lock()
			log = append(log, sc.Text())
			mu.Unlock()
			if !seen && strings.Contains(sc.Text(), "draining") {
				seen = true
				close(draining)
			}
		}
		exited <- cmd.Wait()
	}()

	serveOnceThroughProxy(t, listen, admin)
	held := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + listen + "/hang")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		held <- err
	}()
	select {
	case <-inApp:
	case <-time.After(time.Minute):
		t.Fatal("the request never reached the app")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-draining: // and now waiting for /hang, for up to an hour
	case err := <-exited:
		t.Fatalf("qas-proxy exited on the first SIGINT (%v):\n%s", err, lines())
	case <-time.After(time.Minute):
		t.Fatalf("qas-proxy did not start draining:\n%s", lines())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited //nolint:errcheck // killed: the failure below says so
		t.Fatalf("qas-proxy still ran a minute after a second SIGINT (killed):\n%s", lines())
	}
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, 130, ee.ExitCode(), lines())
	require.Contains(t, strings.Split(lines(), "\n"), "qas-proxy: second interrupt signal: exiting now, without finishing the shutdown")
	require.Error(t, <-held, "the held request's connection ends with the process")
}
