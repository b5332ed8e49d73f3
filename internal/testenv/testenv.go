// Package testenv connects integration tests to the real servers test/infra/env.sh
// installs. A test asks for a tool by its environment variable; when the variable is
// unset the test is skipped under plain `go test`, but fails under `make test`
// (QAS_INTEGRATION=required), so a missing install step can never pass silently.
package testenv

import (
	"net"
	"os"
	"testing"
)

// Required reports whether integration tests must run (set by test/infra/env.sh).
func Required() bool { return os.Getenv("QAS_INTEGRATION") == "required" }

// Tool returns the value of the environment variable that locates an external tool.
func Tool(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	if Required() {
		t.Fatalf("$%s is not set but QAS_INTEGRATION=required: test/infra/need-*.sh must install it", env)
	}
	t.Skipf("$%s not set; run through `make test` (test/infra/env.sh) to use the real tool", env)
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
