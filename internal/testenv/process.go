package testenv

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is a program a test runs (a QAS binary standing in for a pod's container,
// say), with its output kept for the test's failure messages.
type Process struct {
	// Name says which process this is in messages.
	Name string

	cmd     *exec.Cmd
	out     syncBuffer // the output, unless it goes to logPath
	logPath string
	done    chan struct{}
	err     error // Wait's result, set before done is closed
	stop    sync.Once
}

// StartProcess starts bin with args and with env added to this process's environment,
// keeping its output in memory. The kernel kills it if the test binary dies first (a
// panic or -timeout), so that no process outlives a crashed test holding a port.
func StartProcess(name, bin string, args, env []string) (*Process, error) {
	p := &Process{Name: name}
	if err := p.start(bin, args, env, &p.out); err != nil {
		return nil, err
	}
	return p, nil
}

// StartProcessLog is StartProcess with the output appended to the file logPath
// (created if need be), where it stays for a look after the test: a server's log.
func StartProcessLog(name, bin string, args, env []string, logPath string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the process has its own descriptor once started
	p := &Process{Name: name, logPath: logPath}
	if err := p.start(bin, args, env, f); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start(bin string, args, env []string, out io.Writer) error {
	p.done = make(chan struct{})
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Output is what the process has written to stdout and stderr so far (with
// StartProcessLog, all its log file holds).
func (p *Process) Output() string {
	if p.logPath != "" {
		data, _ := os.ReadFile(p.logPath)
		return string(data)
	}
	return p.out.String()
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited and, if it has, how (Wait's error:
// nil for exit status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM (QAS's binaries drain, then exit), kills the process if it has
// not exited within grace, and waits for it. Only the first call signals; every call
// returns once the process has exited.
func (p *Process) Stop(grace time.Duration) {
	p.stop.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// Kill kills the process at once (SIGKILL: no drain, as when a node fails or the
// kernel's OOM killer strikes) and waits for it. Like Stop, only the first call of
// either signals.
func (p *Process) Kill() {
	p.stop.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	<-p.done
}

// syncBuffer is a bytes.Buffer the process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
