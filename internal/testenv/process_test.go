package testenv

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitOutput waits until p has written want.
func waitOutput(t *testing.T, p *Process, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.Output(), want) }, time.Minute, 10*time.Millisecond,
		"%s never wrote %q; output: %q", p.Name, want, p.Output())
}

func TestProcessStopsOnSIGTERM(t *testing.T) {
	p, err := StartProcess("greeter", "/bin/sh", []string{"-c", `echo "$GREETING"; echo to-stderr >&2; exec sleep 600`},
		[]string{"GREETING=hello from the environment"})
	require.NoError(t, err)
	waitOutput(t, p, "hello from the environment\n")
	waitOutput(t, p, "to-stderr\n")
	exited, _ := p.Exited()
	require.False(t, exited)
	require.Positive(t, p.Pid())

	var wg sync.WaitGroup
	for range 2 { // every caller returns once it has exited
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(time.Minute) }()
	}
	wg.Wait()
	exited, err = p.Exited()
	require.True(t, exited)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, syscall.SIGTERM, ee.Sys().(syscall.WaitStatus).Signal())
}

func TestProcessKilledAfterGrace(t *testing.T) {
	p, err := StartProcess("stubborn", "/bin/sh", []string{"-c", `trap "" TERM; echo trapped; while :; do :; done`}, nil)
	require.NoError(t, err)
	waitOutput(t, p, "trapped")
	p.Stop(10 * time.Millisecond)
	exited, err := p.Exited()
	require.True(t, exited)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "SIGTERM is ignored, so only SIGKILL ends it")
}

func TestProcessExitStatus(t *testing.T) {
	p, err := StartProcess("failing", "/bin/sh", []string{"-c", "echo bye; exit 3"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { exited, _ := p.Exited(); return exited }, time.Minute, 10*time.Millisecond)
	p.Stop(time.Minute) // already gone: nothing to signal
	_, err = p.Exited()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 3, ee.ExitCode())
	require.Equal(t, "bye\n", p.Output())
}

func TestProcessLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "server.log")
	for i, word := range []string{"first", "second"} { // a restarted server appends
		p, err := StartProcessLog("server", "/bin/sh", []string{"-c", `echo "$WORD"; echo err >&2`}, []string{"WORD=" + word}, log)
		require.NoError(t, err)
		require.Eventually(t, func() bool { exited, _ := p.Exited(); return exited }, time.Minute, 10*time.Millisecond, "run %d", i)
	}
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, "first\nerr\nsecond\nerr\n", string(data))
	p, err := StartProcessLog("server", "/bin/sh", []string{"-c", "exit 0"}, nil, log)
	require.NoError(t, err)
	p.Stop(time.Minute)
	require.Equal(t, string(data), p.Output(), "Output reads the log")

	_, err = StartProcessLog("server", "/bin/true", nil, nil, filepath.Join(t.TempDir(), "no-such-dir", "x.log"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestStartProcessMissingBinary(t *testing.T) {
	_, err := StartProcess("missing", filepath.Join(t.TempDir(), "no-such-binary"), nil, nil)
	require.True(t, errors.Is(err, syscall.ENOENT), "got %v", err)
}

// TestListensOn: a listener counts for the process that holds it, not for
// another process, and not once it is closed.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port

	mine, err := ListensOn(os.Getpid(), port)
	require.NoError(t, err)
	require.True(t, mine, "this process listens on %d", port)

	other, err := StartProcess("sleeper", "/bin/sh", []string{"-c", "exec sleep 600"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { other.Stop(time.Second) })
	theirs, err := ListensOn(other.Pid(), port)
	require.NoError(t, err)
	require.False(t, theirs, "another process answering on the port is not the one that listens")

	// A connected socket on the port is not a listener.
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, l.Close())
	mine, err = ListensOn(os.Getpid(), port)
	require.NoError(t, err)
	require.False(t, mine, "a closed listener")
}

// TestProcessListens: a running process without the listener does not
// listen; one that has exited and been reaped has no /proc entry left, and
// listens on nothing, with no error (Exited says how it ended).
func TestProcessListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	sleeper, err := StartProcess("sleeper", "/bin/sh", []string{"-c", "exec sleep 600"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { sleeper.Stop(time.Second) })
	ours, err := sleeper.Listens(port)
	require.NoError(t, err)
	require.False(t, ours)

	done, err := StartProcess("done", "/bin/sh", []string{"-c", "exit 0"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { exited, _ := done.Exited(); return exited }, time.Minute, 10*time.Millisecond)
	_, err = ListensOn(done.Pid(), port)
	require.Error(t, err, "a reaped process has no /proc entry")
	ours, err = done.Listens(port)
	require.NoError(t, err)
	require.False(t, ours)
}

func TestListensOnRejects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pid, port int
		want      string
	}{
		{name: "port 0", pid: os.Getpid(), port: 0, want: "port 0 is not a TCP port"},
		{name: "port over 65535", pid: os.Getpid(), port: 70000, want: "port 70000 is not a TCP port"},
		{name: "no such process", pid: 1 << 30, port: 80, want: "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ListensOn(tc.pid, tc.port)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
