package app

import (
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/kubelog"
)

// runWebhook is `qas-decider webhook`: the injection webhook, until the process is signalled.
func runWebhook(args []string, env Env) error {
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
	return inject.Run(env.context(), o, log)
}
