package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stoppedEnv is an Env whose context has ended as a signal ends the command's.
func stoppedEnv(out, errb *bytes.Buffer) Env {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	return Env{Context: ctx, Stdout: out, Stderr: errb}
}

// dirFiles lists the names in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestEvaluateStoppedWritesNothing: `evaluate` stopped by a signal exits 1 saying
// how far it got and that it wrote nothing; the results an earlier run left in the
// directory stay as they were, named as an earlier run's.
func TestEvaluateStoppedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	earlier := filepath.Join(dir, "results.json")
	require.NoError(t, os.WriteFile(earlier, []byte(`{"earlier": true}`), 0o644))
	var out, errb bytes.Buffer
	code := MainEnv([]string{"evaluate", "--demo", "--nasa", sharedNASA(t), "--out", dir, "--only", "10h-30min"}, stoppedEnv(&out, &errb))
	require.Equal(t, 1, code, errb.String())
	require.Equal(t, "qas-decider evaluate: stopped after 0 of 1 cells: interrupt signal received; nothing written to "+dir+
		" (results.json there: from an earlier run)\n", errb.String())
	require.NotContains(t, out.String(), "## Headline")
	require.Equal(t, []string{"results.json"}, dirFiles(t, dir))
	b, err := os.ReadFile(earlier)
	require.NoError(t, err)
	require.JSONEq(t, `{"earlier": true}`, string(b))
}

// TestSimulateStoppedWritesNothing: `simulate` stopped by a signal exits 1 (not 2:
// its policies were fine), prints no table and writes neither --json nor --report.
func TestSimulateStoppedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := MainEnv([]string{"simulate", "--trace", "pattern:flash-crowd", "--slo", "200ms", "--service", "exp:50ms", "--init", "20s",
		"--policies", "qas,oracle", "--json", filepath.Join(dir, "o.json"), "--report", filepath.Join(dir, "o.html")}, stoppedEnv(&out, &errb))
	require.Equal(t, 1, code, errb.String())
	require.Equal(t, "qas-decider simulate: simulation stopped during qas (0 of 2 policies and yardsticks done): interrupt signal received; nothing written\n",
		errb.String())
	require.NotContains(t, out.String(), " requests in ", "no table, no summary")
	require.Empty(t, dirFiles(t, dir))
}

// TestSimulateWritesPipes: --json to a path that is no regular file (a FIFO here,
// /dev/stdout in use) is written in place, not replaced by a renamed file.
func TestSimulateWritesPipes(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until the command opens it for writing
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := bufio.NewReader(f).ReadBytes(0) // to EOF
		got <- b
	}()
	code, _, stderr := runSim(t, "--trace", "pattern:flash-crowd", "--compress", "4", "--slo", "200ms",
		"--service", "exp:50ms", "--init", "20s", "--policies", "static:2", "--json", fifo)
	require.Equal(t, 0, code, stderr)
	select {
	case b := <-got:
		require.Contains(t, string(b), `"policies"`)
	case <-time.After(time.Minute):
		t.Fatal("nothing read from the FIFO")
	}
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "still the FIFO")
}

// TestEvaluateBinaryStopsOnSIGTERM builds qas-decider, starts `evaluate --demo` and
// sends it SIGTERM once it has begun: it stops its cells, writes nothing, and
// exits 1 naming the signal. Every wait is bounded.
func TestEvaluateBinaryStopsOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qas-decider")
	build := exec.Command("go", "build", "-o", bin, "github.com/qas-dev/qas/decider/cmd/qas-decider")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	dir := t.TempDir()
	cmd := exec.Command(bin, "evaluate", "--demo", "--nasa", sharedNASA(t), "--out", dir, "--workers", "1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() {
		// The conditions line comes just before the cells start; then drain the rest.
		sc := bufio.NewScanner(stdout)
		started := false
		for sc.Scan() {
			if !started && strings.Contains(sc.Text(), "cells, every one in real time") {
				started = true
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Errorf("SIGTERM: %v", err) // not FailNow: this is not the test's goroutine
				}
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case err = <-exited:
	case <-time.After(3 * time.Minute):
		require.NoError(t, cmd.Process.Kill())
		err = <-exited
		t.Fatalf("evaluate did not stop after SIGTERM (killed: %v):\n%s", err, stderr.String())
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	require.Equal(t, 1, ee.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "of 2 cells: terminated signal received; nothing written to "+dir+"\n")
	require.Empty(t, dirFiles(t, dir), "no result file, whole or partial, and no temporary one")
}
