package app

import (
	"os"

	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/kubeconfig"
	"github.com/qas-dev/qas/internal/kubelog"
)

// runRun is `qas-decider run`: the controller, until the process is signalled.
func runRun(args []string, env Env) error {
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
	return runner.Run(env.context(), o, cfg, log)
}
