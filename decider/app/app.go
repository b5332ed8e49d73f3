// Package app is the qas-decider command: a dispatcher over the subcommands in
// the table commands (model, simulate, evaluate, run, webhook), each in its own file.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/version"
)

// Name is the program name used in messages.
const Name = "qas-decider"

// Env is what a subcommand may take from its process, injected so tests need none of it.
type Env struct {
	// Context ends when the process is asked to stop (SIGTERM, SIGINT); nil means
	// never.
	Context context.Context
	Stdout  io.Writer
	Stderr  io.Writer
	// Getenv reads environment overrides; nil means no environment.
	Getenv func(string) string
}

func (e Env) context() context.Context {
	if e.Context == nil {
		return context.Background()
	}
	return e.Context
}

// Command is one subcommand of qas-decider.
type Command struct {
	// Summary is the one-line description shown in the command list.
	Summary string
	// Run executes the subcommand with the arguments after its name. A returned
	// error satisfying cli.IsUsage exits with status 2; flag.ErrHelp exits 0, and so
	// does cli.ErrVersion after the version is printed; any other error exits with 1
	// unless it carries its own status (see ExitError).
	Run func(args []string, env Env) error
}

// commands is qas-decider's subcommand table.
var commands = map[string]Command{
	"model":    {Summary: "print the queueing model (M/M/c) of a load: utilisation, waits, latency, servers needed", Run: runModel},
	"simulate": {Summary: "replay a trace through a request-level simulation and compare autoscaling policies", Run: runSimulate},
	"run":      {Summary: "the controller: decide every QueueAutoscaler from the collector's measurements and act (leader-elected)", Run: runRun},
	"evaluate": {Summary: "run the evaluation matrix (traces × settings × seeds × data planes, every policy and yardstick) and write a table and a report", Run: runEvaluate},
	"webhook":  {Summary: "serve the sidecar-injection mutating webhook with self-managed (or cert-manager) TLS", Run: runWebhook},
}

// ExitError is an error with a specific exit status.
type ExitError struct {
	Status int
	Err    error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs qas-decider with args (without the program name) until ctx ends, and
// returns the exit status: the idiom of every QAS command.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return MainEnv(args, Env{Context: ctx, Stdout: stdout, Stderr: stderr, Getenv: getenv})
}

// MainEnv is Main with an explicit environment.
func MainEnv(args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if len(args) == 0 {
		usage(env.Stderr)
		return cli.ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		usage(env.Stdout)
		return 0
	case "-version", "--version":
		fmt.Fprintln(env.Stdout, version.String(Name))
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(env.Stderr, "%s: unknown subcommand %q\n", Name, name)
		usage(env.Stderr)
		return cli.ExitUsage
	}
	return exitStatus(name, c.Run(args[1:], env), env)
}

func exitStatus(name string, err error, env Env) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, cli.ErrVersion) {
		fmt.Fprintln(env.Stdout, version.String(Name))
		return 0
	}
	fmt.Fprintf(env.Stderr, "%s %s: %v\n", Name, name, err)
	var ee *ExitError
	switch {
	case cli.IsUsage(err):
		return cli.ExitUsage
	case errors.As(err, &ee):
		return ee.Status
	default:
		return 1
	}
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: %s <subcommand> [flags]\n       %s --version\n\nsubcommands:\n", Name, Name)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <subcommand> -h' for its flags.\n", Name)
}
