package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/kubeconfig"
	"github.com/qas-dev/qas/internal/kubelog"
)

func init() {
	Register("run", Command{
		Summary: "the controller: decide every QueueAutoscaler from the collector's measurements and act (leader-elected)",
		Run: func(args []string, env Env) error {
			var o runner.Options
			fs := o.FlagSet()
			fs.SetOutput(env.Stdout)
			if err := cli.Parse(fs, runner.EnvPrefix, args, env.Getenv); err != nil {
				return err
			}
			if err := o.Complete(env.Getenv, os.Hostname); err != nil {
				return err
			}
			log, err := o.Log.Build()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			kubelog.Route(log)
			cfg, err := kubeconfig.Load(o.Kubeconfig)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runner.Run(ctx, o, cfg, log)
		},
	})
}
