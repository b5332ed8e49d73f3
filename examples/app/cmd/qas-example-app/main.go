// Command qas-example-app is the example application for QAS demos and tests.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/examples/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
