// Command qas-collector scrapes every qas-proxy sidecar, joins CPU from metrics.k8s.io
// and writes the measurements to InfluxDB. See collector/app for its flags.
package main

import (
	"os"

	"github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext("qas-collector", os.Stderr)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
