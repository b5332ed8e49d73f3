// Command qas-example-app is the example application for QAS demos and tests.
package main

import (
	"context"
	"errors"
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
	listen, err := app.Listen(os.Args[1:], os.Getenv)
	if err != nil {
		os.Exit(cli.Exit("qas-example-app", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv := &http.Server{Addr: listen, Handler: app.Handler(), ReadHeaderTimeout: 10 * time.Second}
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
