// Package influxtest runs a real InfluxDB 1.8 server (built by
// test/infra/need-influxdb.sh, found through $QAS_INFLUXD) on free loopback ports for
// integration tests, with the database "qas" created. It can be stopped and restarted
// on the same ports and data, to test clients against an outage.
package influxtest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qas-dev/qas/internal/testenv"
)

// Database is the database every server starts with; Bucket is its v2-API name.
const (
	Database = "qas"
	Bucket   = "qas/autogen"
)

// Server is a running influxd.
type Server struct {
	URL string // http://127.0.0.1:PORT

	t       testing.TB
	bin     string
	dir     string
	env     []string
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

// Start starts influxd for t and stops it in t.Cleanup. It skips, or fails under
// `make test`, when influxd is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := testenv.Tool(t, "QAS_INFLUXD")
	dir := t.TempDir()
	httpPort, rpcPort := testenv.FreePort(t), testenv.FreePort(t)
	s := &Server{
		URL: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		t:   t, bin: bin, dir: dir, logPath: filepath.Join(dir, "influxd.log"),
		env: []string{
			"INFLUXDB_REPORTING_DISABLED=true",
			fmt.Sprintf("INFLUXDB_BIND_ADDRESS=127.0.0.1:%d", rpcPort),
			"INFLUXDB_META_DIR=" + filepath.Join(dir, "meta"),
			"INFLUXDB_DATA_DIR=" + filepath.Join(dir, "data"),
			"INFLUXDB_DATA_WAL_DIR=" + filepath.Join(dir, "wal"),
			"INFLUXDB_DATA_QUERY_LOG_ENABLED=false",
			fmt.Sprintf("INFLUXDB_HTTP_BIND_ADDRESS=127.0.0.1:%d", httpPort),
			"INFLUXDB_HTTP_FLUX_ENABLED=true",
			"INFLUXDB_HTTP_LOG_ENABLED=false",
			"INFLUXDB_MONITOR_STORE_ENABLED=false",
		},
	}
	t.Cleanup(s.Stop)
	if err := s.start(); err != nil {
		t.Fatalf("influxd: %v%s", err, s.logTail())
	}
	if err := s.Query("CREATE DATABASE " + Database); err != nil {
		t.Fatalf("influxd: %v", err)
	}
	if err := s.waitWritable(); err != nil {
		t.Fatalf("influxd: %v%s", err, s.logTail())
	}
	return s
}

// ProbeMeasurement is where Start writes the point that proves the database accepts
// writes; tests count their own measurements and never see it.
const ProbeMeasurement = "influxtest_probe"

// waitWritable polls a v2 write until InfluxDB accepts it: right after CREATE DATABASE
// returns, /api/v2/write can still answer 404 "database not found" for a moment.
func (s *Server) waitWritable() error {
	url := s.URL + "/api/v2/write?org=&bucket=" + Bucket + "&precision=ns"
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Post(url, "text/plain", strings.NewReader(ProbeMeasurement+" ok=1i"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("database %q never accepted a write: %s", Database, last)
}

func (s *Server) start() error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "run", "-config", "/dev/null")
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	// Flux's standard library makes the first start take 5-8 s on this machine kind.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("influxd exited during start-up")
		default:
		}
		resp, err := http.Get(s.URL + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("influxd did not answer /ping within 90 s")
}

// Stop stops influxd (SIGTERM, then SIGKILL after 15 s). Safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// Restart starts influxd again on the same ports and data after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("influxd restart: %v%s", err, s.logTail())
	}
	if err := s.waitWritable(); err != nil {
		s.t.Fatalf("influxd restart: %v%s", err, s.logTail())
	}
}

// Query runs an InfluxQL statement through the v1 /query endpoint.
func (s *Server) Query(q string) error {
	resp, err := http.PostForm(s.URL+"/query", url.Values{"q": {q}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("influxd query %q: %s", q, resp.Status)
	}
	return nil
}

// Ping reports whether the server answers.
func (s *Server) Ping(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/ping", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

func (s *Server) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	text := string(data)
	if len(text) > 2000 {
		text = text[len(text)-2000:]
	}
	return "\n--- influxd log ---\n" + strings.TrimSpace(text)
}
