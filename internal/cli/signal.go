package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// ExitForced is the exit status after a second stop signal, as a shell reports a
// process that signal killed (128 + its number): 130 for a second Ctrl-C, 143 for
// a second SIGTERM.
func ExitForced(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// NotifyContext is signal.NotifyContext for SIGTERM and SIGINT with a way out: the
// first signal ends the context (its cause "<signal> signal received", as
// signal.NotifyContext's) and so starts the command's graceful shutdown; a second
// one writes a line saying so to stderr and exits the process at once with
// ExitForced, however long the drain would have lasted: an operator who presses
// Ctrl-C twice means it (as with kubectl, Docker and most Go servers). stop
// releases the signals and ends the context.
func NotifyContext(cmd string, stderr io.Writer) (ctx context.Context, stop context.CancelFunc) {
	return notifyContext(context.Background(), cmd, stderr, os.Exit, syscall.SIGTERM, syscall.SIGINT)
}

func notifyContext(parent context.Context, cmd string, stderr io.Writer, exit func(int), sigs ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	// Room for both signals: the second is never dropped while the first is handled.
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	stopped := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(errors.New(sig.String() + " signal received"))
		case <-stopped:
			return
		}
		select {
		case sig := <-ch:
			fmt.Fprintf(stderr, "%s: second %s signal: exiting now, without finishing the shutdown\n", cmd, sig)
			exit(ExitForced(sig))
		case <-stopped:
		}
	}()
	stop := sync.OnceFunc(func() {
		signal.Stop(ch)
		close(stopped)
		cancel(nil)
	})
	return ctx, stop
}
