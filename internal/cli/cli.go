// Package cli holds what every QAS command shares: flags that can be overridden by
// environment variables, validation errors that name the flag, --version, the zap
// logger, and stop signals (a second one exits at once).
//
// Precedence is flag > environment > default: an explicitly set flag always wins, so
// that a command line in a manifest means what it says. Commands take flags only: a
// positional argument is an error, because Go's flag package stops at the first one
// and would otherwise ignore every flag after it without a word.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/qas-dev/qas/internal/version"
)

// ExitUsage is the exit status for bad flags, bad environment values and bad input.
const ExitUsage = 2

// UsageError is an error in what the user supplied. Commands exit with ExitUsage on it.
type UsageError struct {
	Flag string // the flag (without dashes) or environment variable at fault
	Msg  string
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("invalid --%s: %s", e.Flag, e.Msg)
}

// Usagef builds a UsageError for flag name.
func Usagef(name, format string, args ...any) error {
	return &UsageError{Flag: name, Msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is (or wraps) a UsageError or a flag parse error.
func IsUsage(err error) bool {
	var ue *UsageError
	return errors.As(err, &ue) || errors.Is(err, errUsageParse)
}

var errUsageParse = errors.New("usage")

// ErrVersion is what Parse returns for --version: the command prints its version
// (Exit does) and exits 0, as for --help.
var ErrVersion = errors.New("version requested")

// versionFlag is the flag Parse adds to every command.
const versionFlag = "version"

// EnvName is the environment variable that overrides flag name for a command with
// the given prefix: EnvName("QAS_PROXY", "admin-listen") = "QAS_PROXY_ADMIN_LISTEN".
func EnvName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse adds --version to fs, parses args into it, then applies environment overrides
// (prefix_FLAG_NAME) to every flag that was not set on the command line. A value that
// does not parse, from either source, yields a UsageError naming the flag and, for
// the environment, the variable. Any argument left after the flags is a usage error
// naming it: the command takes flags only. --version yields ErrVersion.
func Parse(fs *flag.FlagSet, prefix string, args []string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	showVersion := fs.Bool(versionFlag, false, "print the version and exit")
	out := fs.Output() // where -h/--help prints: the caller's choice, else stderr
	fs.SetOutput(discard{})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(out, "usage: %s [flags]\n(each flag can also be set as $%s_<FLAG>, e.g. %s)\n\n", fs.Name(), prefix, exampleEnv(fs, prefix))
			fs.SetOutput(out)
			fs.PrintDefaults()
			fs.SetOutput(discard{})
			return err
		}
		return fmt.Errorf("%w: %s", errUsageParse, err.Error())
	}
	if *showVersion {
		return ErrVersion
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var firstErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == versionFlag || firstErr != nil {
			return
		}
		env := EnvName(prefix, f.Name)
		v, ok := lookup(getenv, env)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			firstErr = &UsageError{Flag: f.Name, Msg: fmt.Sprintf("from $%s=%q: %v", env, v, err)}
		}
	})
	return firstErr
}

// unexpectedArgument is the usage error for fs's first leftover argument. Right after
// a boolean flag written without "=" it is most likely that flag's value ("--dry-run
// false"), which Go's flag package never takes from the next argument.
func unexpectedArgument(fs *flag.FlagSet, args []string) error {
	arg := fs.Arg(0)
	msg := fmt.Sprintf("unexpected argument %q", arg)
	if i := len(args) - fs.NArg(); i > 0 && strings.HasPrefix(args[i-1], "-") && args[i-1] != "--" {
		name := strings.TrimLeft(args[i-1], "-")
		if f := fs.Lookup(name); f != nil && isBool(f) {
			return fmt.Errorf("%w: %s (boolean flags take --%s=%s)", errUsageParse, msg, name, arg)
		}
	}
	return fmt.Errorf("%w: %s (%s takes flags only)", errUsageParse, msg, fs.Name())
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// exampleEnv names the environment variable of fs's first flag.
func exampleEnv(fs *flag.FlagSet, prefix string) string {
	name := ""
	fs.VisitAll(func(f *flag.Flag) {
		if name == "" && f.Name != versionFlag {
			name = EnvName(prefix, f.Name)
		}
	})
	return name
}

func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// LogOptions are the logging flags every command has.
type LogOptions struct {
	Format string // json or console
	Level  string // debug, info, warn, error
}

// Register adds --log-format and --log-level to fs.
func (o *LogOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Format, "log-format", "json", "log encoding: json or console")
	fs.StringVar(&o.Level, "log-level", "info", "minimum log level: debug, info, warn or error")
}

// Build returns a zap logger writing to stderr, or a UsageError for a bad option.
func (o LogOptions) Build() (*zap.Logger, error) {
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(o.Level)); err != nil {
		return nil, Usagef("log-level", "%q is not one of debug, info, warn, error", o.Level)
	}
	var cfg zap.Config
	switch o.Format {
	case "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.TimeKey = "ts"
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return nil, Usagef("log-format", "%q is not one of json, console", o.Format)
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.Sampling = nil
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	return cfg.Build()
}

// Exit reports err for a command named cmd and returns the process exit status: 0
// for nil or --help, and for --version (ErrVersion) after printing the version to
// stdout; ExitUsage for usage errors and 1 otherwise, after printing err to stderr.
func Exit(cmd string, err error) int { return ExitTo(os.Stdout, os.Stderr, cmd, err) }

// ExitTo is Exit writing to stdout and stderr.
func ExitTo(stdout, stderr io.Writer, cmd string, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrVersion):
		fmt.Fprintln(stdout, version.String(cmd))
		return 0
	case IsUsage(err):
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return 1
	}
}
