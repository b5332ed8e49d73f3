package influxtest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/testenv"
)

// TestStartIsNotFooledByAnotherServer: when the port picked for influxd is
// taken first by another server that answers /ping as influxd does (another
// package's influxd, under make test's parallel packages), start fails, so
// StartWith picks other ports, rather than handing the test a server that is
// not its own and may stop at any moment.
func TestStartIsNotFooledByAnotherServer(t *testing.T) {
	bin := testenv.Tool(t, "QAS_INFLUXD")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent) // /ping's answer
	}))
	defer other.Close()
	port := other.Listener.Addr().(*net.TCPAddr).Port

	s := newServer(t, Options{}, bin, port, testenv.FreePort(t))
	defer s.Stop()
	err := s.start()
	require.ErrorContains(t, err, "influxd exited during start-up")
	require.Contains(t, s.logTail(), "address already in use")

	// The same server on ports of its own starts.
	s = newServer(t, Options{}, bin, testenv.FreePort(t), testenv.FreePort(t))
	defer s.Stop()
	require.NoError(t, s.start())
	ours, err := s.proc.Listens(s.port)
	require.NoError(t, err)
	require.True(t, ours)
}
