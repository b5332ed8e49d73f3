// Command qas-collector scrapes every qas-proxy sidecar, joins CPU from metrics.k8s.io
// and writes the measurements to InfluxDB. See collector/app for its flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/collector/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
