// Package influxtest runs a real InfluxDB 1.8 server (built by
// test/infra/need-influxdb.sh, found through $QAS_INFLUXD) on free loopback ports for
// integration tests, with the database "qas" created (or, with Options.Empty, no
// database at all; with Options.Auth, authentication on). It can be stopped and
// restarted on the same ports and data, to test clients against an outage.
package influxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qas-dev/qas/internal/testenv"
)

// Database is the database every server starts with; Bucket is its v2-API name.
const (
	Database = "qas"
	Bucket   = "qas/autogen"
)

// Admin user of a server started with Options.Auth; AdminToken is its v2-API token.
const (
	AdminUser     = "admin"
	AdminPassword = "admin-password"
	AdminToken    = AdminUser + ":" + AdminPassword
)

// Options change how Start prepares the server.
type Options struct {
	// Empty starts without the database, for clients that must create it.
	Empty bool
	// Auth turns HTTP authentication on, with the admin user AdminUser.
	Auth bool
}

// Server is a running influxd.
type Server struct {
	URL string // http://127.0.0.1:PORT
	// Token authenticates as the admin user on a server with authentication on
	// ("user:password", as the v2 API and Flux take it); empty otherwise.
	Token string

	opts    Options
	t       testing.TB
	bin     string
	dir     string
	env     []string
	proc    *testenv.Process // nil before the first start
	port    int              // the HTTP port
	logPath string
}

// Start starts influxd for t with the database Database and stops it in t.Cleanup. It
// skips, or fails under `make test`, when influxd is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts influxd for t as opts say and stops it in t.Cleanup.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := testenv.Tool(t, "QAS_INFLUXD")
	var s *Server
	for attempt := 1; ; attempt++ {
		s = newServer(t, opts, bin, testenv.FreePort(t), testenv.FreePort(t))
		err := s.start()
		if err == nil {
			break
		}
		tail := s.logTail()
		s.Stop()
		// Its ports were free when picked (testenv.FreePort), but make test runs
		// packages in parallel and another one's listener can take a port before
		// influxd binds it: start again on other ports.
		if attempt < 3 && strings.Contains(tail, "address already in use") {
			continue
		}
		t.Fatalf("influxd: %v%s", err, tail)
	}
	t.Cleanup(s.Stop)
	if opts.Auth {
		// The first user may be created without credentials, and must be an admin.
		if err := s.Query(fmt.Sprintf("CREATE USER %s WITH PASSWORD '%s' WITH ALL PRIVILEGES", AdminUser, AdminPassword)); err != nil {
			t.Fatalf("influxd: %v", err)
		}
		s.Token = AdminToken
	}
	if opts.Empty {
		return s
	}
	if err := s.Query("CREATE DATABASE " + Database); err != nil {
		t.Fatalf("influxd: %v", err)
	}
	if err := s.waitWritable(); err != nil {
		t.Fatalf("influxd: %v%s", err, s.logTail())
	}
	return s
}

// newServer is an influxd for t as opts say, to serve HTTP on httpPort and
// RPC on rpcPort, in a directory of its own, not started.
func newServer(t testing.TB, opts Options, bin string, httpPort, rpcPort int) *Server {
	dir := t.TempDir()
	s := &Server{
		URL:  fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		port: httpPort, opts: opts, t: t, bin: bin, dir: dir, logPath: filepath.Join(dir, "influxd.log"),
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
	if opts.Auth {
		s.env = append(s.env, "INFLUXDB_HTTP_AUTH_ENABLED=true")
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
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(ProbeMeasurement+" ok=1i"))
		if err != nil {
			return err
		}
		s.authorize(req)
		resp, err := http.DefaultClient.Do(req)
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
	proc, err := testenv.StartProcessLog("influxd", s.bin, []string{"run", "-config", "/dev/null"}, s.env, s.logPath)
	if err != nil {
		return err
	}
	s.proc = proc
	// Flux's standard library makes the first start take 5-8 s on this machine kind.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if exited, err := s.proc.Exited(); exited {
			return fmt.Errorf("influxd exited during start-up: %w", err)
		}
		// Another package's influxd can hold the port picked for this one and
		// answer /ping (this one then exits, "address already in use"): only
		// this process's own listener makes the server ready.
		ours, err := s.proc.Listens(s.port)
		if err != nil {
			return err
		}
		if !ours {
			time.Sleep(100 * time.Millisecond)
			continue
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
	if s.proc != nil {
		s.proc.Stop(15 * time.Second)
	}
}

// Restart starts influxd again on the same ports and data after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("influxd restart: %v%s", err, s.logTail())
	}
	if s.opts.Empty {
		return // no database to write to unless a client made one
	}
	if err := s.waitWritable(); err != nil {
		s.t.Fatalf("influxd restart: %v%s", err, s.logTail())
	}
}

// Query runs an InfluxQL statement through the v1 /query endpoint, as the admin user
// when authentication is on. A statement's error in the response is an error.
func (s *Server) Query(q string) error {
	_, err := s.query(q)
	return err
}

// Databases lists the server's databases (SHOW DATABASES), as the admin user when
// authentication is on.
func (s *Server) Databases() ([]string, error) {
	results, err := s.query("SHOW DATABASES")
	if err != nil {
		return nil, err
	}
	var dbs []string
	for _, r := range results {
		for _, series := range r.Series {
			for _, v := range series.Values {
				dbs = append(dbs, v...)
			}
		}
	}
	return dbs, nil
}

// queryResult is one statement's result in a /query response.
type queryResult struct {
	Series []struct {
		Values [][]string `json:"values"`
	} `json:"series"`
	Error string `json:"error"`
}

// query posts the InfluxQL statement q to /query, as the admin user when
// authentication is on, and returns the statements' results; a status other than 200
// or a statement's error is an error.
func (s *Server) query(q string) ([]queryResult, error) {
	req, err := http.NewRequest(http.MethodPost, s.URL+"/query", strings.NewReader(url.Values{"q": {q}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("influxd query %q: %s %s", q, resp.Status, body)
	}
	var out struct {
		Results []queryResult `json:"results"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("influxd query %q: %w: %s", q, err, body)
	}
	for _, r := range out.Results {
		if r.Error != "" {
			return nil, fmt.Errorf("influxd query %q: %s", q, r.Error)
		}
	}
	return out.Results, nil
}

func (s *Server) authorize(req *http.Request) {
	if s.Token != "" {
		req.Header.Set("Authorization", "Token "+s.Token)
	}
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
