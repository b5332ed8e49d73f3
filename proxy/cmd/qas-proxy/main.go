// Command qas-proxy is QAS's ambassador sidecar: a measuring reverse proxy in front of
// the application in each pod. See proxy/app for its flags.
package main

import (
	"os"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/proxy/app"
)

func main() {
	ctx, stop := cli.NotifyContext("qas-proxy", os.Stderr)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
