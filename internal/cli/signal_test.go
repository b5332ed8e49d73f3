package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// signalChildEnv makes this test binary run signalChild instead of its tests.
const signalChildEnv = "QAS_CLI_SIGNAL_CHILD"

// hangGuard bounds every wait for the child: reached, it fails the test (it is no
// timing threshold: the child never exits by itself).
const hangGuard = time.Minute

func TestMain(m *testing.M) {
	if os.Getenv(signalChildEnv) != "" {
		signalChild()
		return
	}
	os.Exit(m.Run())
}

// signalChild is a command whose drain never ends: it says "ready" once its
// signals are handled, "draining: <cause>" once the first one ended its context,
// then waits on its stdin, which the test never closes.
func signalChild() {
	ctx, stop := NotifyContext("qas-test", os.Stderr)
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("draining:", context.Cause(ctx))
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestSecondSignalForcesExit runs a command whose graceful shutdown never ends in
// a subprocess: the first signal starts the shutdown (the context ends with the
// signal as its cause, the process lives on), the second exits it at once with
// 128 + the signal's number and a line saying so.
func TestSecondSignalForcesExit(t *testing.T) {
	for _, tt := range []struct {
		first, second syscall.Signal
		cause         string
		wantCode      int
		wantLine      string
	}{
		{syscall.SIGINT, syscall.SIGINT, "interrupt signal received", 130, "qas-test: second interrupt signal: exiting now, without finishing the shutdown\n"},
		{syscall.SIGTERM, syscall.SIGTERM, "terminated signal received", 143, "qas-test: second terminated signal: exiting now, without finishing the shutdown\n"},
		{syscall.SIGTERM, syscall.SIGINT, "terminated signal received", 130, "qas-test: second interrupt signal: exiting now, without finishing the shutdown\n"},
	} {
		t.Run(tt.first.String()+" then "+tt.second.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), signalChildEnv+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			lines := make(chan string, 10)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				exited <- cmd.Wait()
			}()
			next := func(what string) string {
				t.Helper()
				select {
				case l, ok := <-lines:
					require.True(t, ok, "the child exited before %s: %s", what, stderr.String())
					return l
				case <-time.After(hangGuard):
					_ = cmd.Process.Kill()
					t.Fatalf("no %s from the child", what)
				}
				return ""
			}
			require.Equal(t, "ready", next("ready"))
			require.NoError(t, cmd.Process.Signal(tt.first))
			require.Equal(t, "draining: "+tt.cause, next("the drain"), "the first signal starts the shutdown")
			require.NoError(t, cmd.Process.Signal(tt.second))
			select {
			case err = <-exited:
			case <-time.After(hangGuard):
				_ = cmd.Process.Kill()
				<-exited //nolint:errcheck // killed: the failure below says so
				t.Fatalf("the second %s did not end the drain that never ends: %s", tt.second, stderr.String())
			}
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v", err)
			require.Equal(t, tt.wantCode, ee.ExitCode(), stderr.String())
			require.Equal(t, tt.wantLine, stderr.String())
		})
	}
}

// TestStopReleasesTheSignals: after stop the context has ended with no signal as
// its cause, and signals that come later neither end it again nor exit.
func TestStopReleasesTheSignals(t *testing.T) {
	// The test's own channel keeps SIGUSR1 from its default action (exit).
	mine := make(chan os.Signal, 2)
	signal.Notify(mine, syscall.SIGUSR1)
	defer signal.Stop(mine)
	ctx, stop := notifyContext(context.Background(), "t", io.Discard, func(code int) { t.Errorf("exit(%d) after stop", code) }, syscall.SIGUSR1)
	stop()
	stop() // idempotent
	for range 2 {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
		select {
		case <-mine:
		case <-time.After(hangGuard):
			t.Fatal("SIGUSR1 not delivered")
		}
	}
	require.Equal(t, context.Canceled, context.Cause(ctx))
}
