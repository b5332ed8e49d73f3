// Command qas-example-app is the example application for QAS demos and tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/qas-dev/qas/examples/app"
	"github.com/qas-dev/qas/internal/cli"
)

func main() {
	fs := flag.NewFlagSet("qas-example-app", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	if err := cli.Parse(fs, "QAS_APP", os.Args[1:], nil); err != nil {
		os.Exit(cli.Exit("qas-example-app", err))
	}
	// Injected by the QAS webhook: qas-proxy took the serving port and forwards to
	// this one on localhost (decider/inject's contract).
	if port := os.Getenv("QAS_APP_PORT"); port != "" {
		*listen = "127.0.0.1:" + port
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := &http.Server{Addr: *listen, Handler: app.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "qas-example-app: %v\n", err)
		os.Exit(1)
	}
}
