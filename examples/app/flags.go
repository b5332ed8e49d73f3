package app

import (
	"flag"

	"github.com/qas-dev/qas/internal/cli"
)

// Listen reads qas-example-app's flags (with $QAS_APP_* overrides) and returns the
// address to serve on. $QAS_APP_PORT, which the QAS webhook injects, wins over
// --listen: qas-proxy took the pod's serving port and forwards to this one on
// localhost (decider/inject's contract).
func Listen(args []string, getenv func(string) string) (string, error) {
	fs := flag.NewFlagSet("qas-example-app", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	if err := cli.Parse(fs, "QAS_APP", args, getenv); err != nil {
		return "", err
	}
	if port := getenv("QAS_APP_PORT"); port != "" {
		return "127.0.0.1:" + port, nil
	}
	return *listen, nil
}
