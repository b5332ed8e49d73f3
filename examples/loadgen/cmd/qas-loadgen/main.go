// Command qas-loadgen sends open-loop Poisson load, at a constant rate or replaying a
// trace, and can print each pod's live measurements from qas-proxy.
package main

import (
	"os"

	"github.com/qas-dev/qas/examples/loadgen"
	"github.com/qas-dev/qas/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext("qas-loadgen", os.Stderr)
	defer stop()
	os.Exit(loadgen.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
