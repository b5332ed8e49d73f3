// Command qas-decider models workloads as queues and decides their scaling.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/decider/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
