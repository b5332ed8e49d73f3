// Package app is the qas-decider command: a dispatcher over subcommands that
// register themselves from their own files (model, simulate, run, ...), so that
// each subcommand can be added without touching the others.
package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/version"
)

// Name is the program name used in messages.
const Name = "qas-decider"

// Env is what a subcommand may take from its process, injected so tests need none of it.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads environment overrides; nil means no environment.
	Getenv func(string) string
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

var (
	mu       sync.Mutex
	commands = map[string]Command{}
)

// Register adds a subcommand; it is called from init() in the subcommand's file.
// Registering a name twice, or an empty name or nil Run, panics: that is a
// programming error that must fail at start-up.
func Register(name string, c Command) {
	mu.Lock()
	defer mu.Unlock()
	if name == "" || c.Run == nil {
		panic("app: Register needs a name and a Run function")
	}
	if _, dup := commands[name]; dup {
		panic("app: subcommand " + name + " registered twice")
	}
	commands[name] = c
}

// ExitError is an error with a specific exit status.
type ExitError struct {
	Status int
	Err    error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs qas-decider with args (without the program name) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainEnv(args, Env{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
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
	mu.Lock()
	c, ok := commands[name]
	mu.Unlock()
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
	mu.Lock()
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "usage: %s <subcommand> [flags]\n       %s --version\n\nsubcommands:\n", Name, Name)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	mu.Unlock()
	fmt.Fprintf(w, "\nRun '%s <subcommand> -h' for its flags.\n", Name)
}
