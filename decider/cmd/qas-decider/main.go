// Command qas-decider models workloads as queues and decides their scaling.
package main

import (
	"os"

	"github.com/qas-dev/qas/decider/app"
	"github.com/qas-dev/qas/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext("qas-decider", os.Stderr)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
