package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newFS() (*flag.FlagSet, *string, *time.Duration) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s := fs.String("admin-listen", "127.0.0.1:9901", "")
	d := fs.Duration("drain", time.Second, "")
	fs.Bool("dry-run", false, "")
	return fs, s, d
}

func TestParsePrecedence(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		wantAddr  string
		wantDrain time.Duration
		wantErr   string
	}{
		{name: "defaults", wantAddr: "127.0.0.1:9901", wantDrain: time.Second},
		{name: "env overrides default", env: map[string]string{"QAS_X_ADMIN_LISTEN": ":1"}, wantAddr: ":1", wantDrain: time.Second},
		{name: "flag beats env", args: []string{"--admin-listen=:2"}, env: map[string]string{"QAS_X_ADMIN_LISTEN": ":1"}, wantAddr: ":2", wantDrain: time.Second},
		{name: "bad env names flag and variable", env: map[string]string{"QAS_X_DRAIN": "soon"}, wantErr: `invalid --drain: from $QAS_X_DRAIN="soon"`},
		{name: "bad flag", args: []string{"--drain=soon"}, wantErr: `invalid value "soon" for flag -drain`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
		// Go's flag package stops at the first non-flag argument: without the check
		// the bad --drain after it would be ignored.
		{name: "boolean flag given a separate value", args: []string{"--dry-run", "false", "--drain=soon"},
			wantErr: `unexpected argument "false" (boolean flags take --dry-run=false)`},
		{name: "single-dash boolean flag given a separate value", args: []string{"-dry-run", "true"},
			wantErr: `unexpected argument "true" (boolean flags take --dry-run=true)`},
		{name: "leading positional", args: []string{"extra", "--admin-listen=:2"}, wantErr: `unexpected argument "extra" (t takes flags only)`},
		{name: "positional after a flag's value", args: []string{"--admin-listen", ":2", "extra"}, wantErr: `unexpected argument "extra" (t takes flags only)`},
		{name: "positional after a boolean flag with its value", args: []string{"--dry-run=true", "extra"}, wantErr: `unexpected argument "extra" (t takes flags only)`},
		{name: "positional after --", args: []string{"--dry-run", "--", "extra"}, wantErr: `unexpected argument "extra" (t takes flags only)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, addr, drain := newFS()
			err := Parse(fs, "QAS_X", tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tt.wantErr)
				require.True(t, IsUsage(err))
				require.Equal(t, ExitUsage, Exit("t", err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantAddr, *addr)
			require.Equal(t, tt.wantDrain, *drain)
		})
	}
}

func TestLogOptions(t *testing.T) {
	for _, tt := range []struct {
		opts    LogOptions
		wantErr string
	}{
		{opts: LogOptions{Format: "json", Level: "info"}},
		{opts: LogOptions{Format: "console", Level: "debug"}},
		{opts: LogOptions{Format: "xml", Level: "info"}, wantErr: "invalid --log-format"},
		{opts: LogOptions{Format: "json", Level: "loud"}, wantErr: "invalid --log-level"},
	} {
		l, err := tt.opts.Build()
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr)
			require.True(t, IsUsage(err))
			continue
		}
		require.NoError(t, err)
		require.NotNil(t, l)
	}
}

func TestEnvName(t *testing.T) {
	require.Equal(t, "QAS_PROXY_ADMIN_LISTEN", EnvName("QAS_PROXY", "admin-listen"))
}

func TestHelpPrintsEveryFlagToTheCallersOutput(t *testing.T) {
	fs, _, _ := newFS()
	var out strings.Builder
	fs.SetOutput(&out)
	err := Parse(fs, "QAS_T", []string{"--help"}, func(string) string { return "" })
	require.ErrorIs(t, err, flag.ErrHelp)
	fs.VisitAll(func(f *flag.Flag) { require.Contains(t, out.String(), "-"+f.Name) })
	require.Contains(t, out.String(), "$QAS_T_<FLAG>")
}

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--drain=2s", "--version"}, {"--version=true"}} {
		fs, _, _ := newFS()
		// The environment never sets --version, nor fails on a variable that happens
		// to be called $QAS_T_VERSION.
		err := Parse(fs, "QAS_T", args, func(k string) string { return map[string]string{"QAS_T_VERSION": "v1"}[k] })
		require.ErrorIs(t, err, ErrVersion, args)
		var stdout, stderr strings.Builder
		require.Equal(t, 0, ExitTo(&stdout, &stderr, "qas-t", err))
		require.Regexp(t, `^qas-t \S+ \(go\S+, \S+/\S+\)\n$`, stdout.String())
		require.Empty(t, stderr.String())
	}
	fs, _, _ := newFS()
	require.NoError(t, Parse(fs, "QAS_T", nil, func(k string) string { return map[string]string{"QAS_T_VERSION": "true"}[k] }))
}

func TestExitTo(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code      int
		stderrHas string
	}{
		{err: nil, code: 0},
		{err: flag.ErrHelp, code: 0},
		{err: Usagef("drain", "is negative"), code: ExitUsage, stderrHas: "qas-t: invalid --drain: is negative"},
		{err: errors.New("boom"), code: 1, stderrHas: "qas-t: boom"},
	} {
		var stdout, stderr strings.Builder
		require.Equal(t, tc.code, ExitTo(&stdout, &stderr, "qas-t", tc.err))
		require.Empty(t, stdout.String())
		if tc.stderrHas == "" {
			require.Empty(t, stderr.String())
		} else {
			require.Contains(t, stderr.String(), tc.stderrHas)
		}
	}
}
