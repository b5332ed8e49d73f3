package app

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/cli"
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
			var cfg *rest.Config
			if o.Kubeconfig != "" {
				cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
			} else {
				cfg, err = rest.InClusterConfig()
			}
			if err != nil {
				return errors.Join(errors.New("kubernetes config (set --kubeconfig outside a cluster)"), err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runner.Run(ctx, o, cfg, log)
		},
	})
}
