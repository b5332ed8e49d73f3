// Package cli holds what every QAS command shares: flags that can be overridden by
// environment variables, validation errors that name the flag, and the zap logger.
//
// Precedence is flag > environment > default: an explicitly set flag always wins, so
// that a command line in a manifest means what it says.
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

// EnvName is the environment variable that overrides flag name for a command with
// the given prefix: EnvName("QAS_PROXY", "admin-listen") = "QAS_PROXY_ADMIN_LISTEN".
func EnvName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Parse parses args into fs, then applies environment overrides (prefix_FLAG_NAME) to
// every flag that was not set on the command line. A value that does not parse, from
// either source, yields a UsageError naming the flag and, for the environment, the
// variable.
func Parse(fs *flag.FlagSet, prefix string, args []string, getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var firstErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || firstErr != nil {
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

// exampleEnv names the environment variable of fs's first flag.
func exampleEnv(fs *flag.FlagSet, prefix string) string {
	name := ""
	fs.VisitAll(func(f *flag.Flag) {
		if name == "" {
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

// Exit prints err for a command named cmd to stderr and returns the process exit
// status: 0 for nil or --help, ExitUsage for usage errors, 1 otherwise.
func Exit(cmd string, err error) int { return ExitTo(os.Stderr, cmd, err) }

// ExitTo is Exit writing to w.
func ExitTo(w io.Writer, cmd string, err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case IsUsage(err):
		fmt.Fprintf(w, "%s: %v\n", cmd, err)
		return ExitUsage
	default:
		fmt.Fprintf(w, "%s: %v\n", cmd, err)
		return 1
	}
}
