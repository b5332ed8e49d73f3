// Command qas-decider models workloads as queues and decides their scaling.
package main

import (
	"os"

	"github.com/qas-dev/qas/decider/app"
)

func main() { os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr)) }
