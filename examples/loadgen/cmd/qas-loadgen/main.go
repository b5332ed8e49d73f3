// Command qas-loadgen sends open-loop Poisson load, at a constant rate or replaying a
// trace, and can print each pod's live measurements from qas-proxy.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/examples/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(loadgen.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
