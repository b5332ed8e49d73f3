package cli

import (
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
