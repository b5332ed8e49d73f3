// Command qas-example-app is the example application for QAS demos and tests.
package main

import (
	"os"

	"github.com/qas-dev/qas/examples/app"
	"github.com/qas-dev/qas/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext("qas-example-app", os.Stderr)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
