package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/qas-dev/qas/internal/cli"
)

// Main serves the example application (flags: Listen) until ctx ends, and returns
// the exit status: the idiom of every QAS command.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	listen, err := Listen(args, getenv)
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-example-app", err)
	}
	srv := &http.Server{Addr: listen, Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "qas-example-app: %v\n", err)
		return 1
	}
	return 0
}
