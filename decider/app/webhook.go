package app

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/kubelog"
)

func init() {
	Register("webhook", Command{
		Summary: "serve the sidecar-injection mutating webhook with self-managed (or cert-manager) TLS",
		Run: func(args []string, env Env) error {
			var o inject.Options
			fs := o.FlagSet()
			fs.SetOutput(env.Stdout)
			if err := cli.Parse(fs, inject.EnvPrefix, args, env.Getenv); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			log, err := o.Log.Build()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			kubelog.Route(log)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return inject.Run(ctx, o, log)
		},
	})
}
