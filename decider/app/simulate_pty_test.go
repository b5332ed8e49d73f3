//go:build linux

package app

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// openPTY opens a pseudo-terminal pair with the kernel's /dev/ptmx (no
// library): the master, to read what is written, and the terminal itself.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	unlock := int32(0)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Fatalf("unlock pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Fatalf("pty number: %v", e)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pty: %v", err)
	}
	return m, s
}

// TestSimulateProgressOnTerminal: on a terminal the command draws a progress
// bar per policy on stderr and erases it at the end; off one it is quiet
// (TestSimulateJSONShape).
func TestSimulateProgressOnTerminal(t *testing.T) {
	master, tty := openPTY(t)
	defer master.Close()
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // ends with EIO once the terminal side is closed
		got <- b
	}()
	var out bytes.Buffer
	code := MainEnv([]string{"simulate", "--trace", "pattern:increase-decrease", "--compress", "4", "--slo", "200ms",
		"--service", "exp:50ms", "--init", "20s", "--policies", "hpa,static:2"}, Env{Stdout: &out, Stderr: tty})
	require.NoError(t, tty.Close())
	b := <-got
	require.Equal(t, 0, code, string(b))
	for _, want := range []string{"\rhpa ", "\rstatic:2 ", "[########################################] 100%"} {
		require.Contains(t, string(b), want)
	}
	require.True(t, bytes.HasSuffix(b, []byte("\r")), "the bar is erased at the end: %q", b[max(0, len(b)-80):])
	require.NotContains(t, out.String(), "%]", "the bar never goes to stdout")
}

// TestEvaluateProgressOnTerminal: on a terminal `evaluate` draws one progress
// bar, redrawn after each cell, ending full; off one it prints a line per
// cell (TestEvaluateDemoCell).
func TestEvaluateProgressOnTerminal(t *testing.T) {
	master, tty := openPTY(t)
	defer master.Close()
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master)
		got <- b
	}()
	var out bytes.Buffer
	code := MainEnv([]string{"evaluate", "--demo", "--nasa", sharedNASA(t), "--out", t.TempDir(), "--detail", "0"},
		Env{Stdout: &out, Stderr: tty})
	require.NoError(t, tty.Close())
	b := <-got
	require.Equal(t, 0, code, string(b))
	require.Contains(t, string(b), "\r[####################                    ] 1/2 cells")
	require.Contains(t, string(b), "\r[########################################] 2/2 cells")
	require.NotContains(t, string(b), "evaluate: 1/2 cells", "no per-cell lines on a terminal")
	require.NotContains(t, out.String(), "[####", "the bar never goes to stdout")
}
