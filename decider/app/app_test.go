package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/version"
)

// TestSubcommandsTakeFlagsOnly: Go's flag package stops at the first positional
// argument, so every flag after one would be ignored (a bad value unreported, a
// setting silently left at its default). Every subcommand refuses it with status 2,
// naming the argument, before it does anything.
func TestSubcommandsTakeFlagsOnly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dry-run", "false", "--interval=0s"}, `qas-decider run: usage: unexpected argument "false" (boolean flags take --dry-run=false)`},
		{[]string{"run", "--leader-elect", "true"}, `unexpected argument "true" (boolean flags take --leader-elect=true)`},
		{[]string{"run", "extra", "--interval=0s"}, `unexpected argument "extra" (qas-decider run takes flags only)`},
		{[]string{"webhook", "--admin-port=0", "extra"}, `unexpected argument "extra" (qas-decider webhook takes flags only)`},
		{[]string{"model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12", "extra"}, `unexpected argument "extra" (qas-decider model takes flags only)`},
		{[]string{"simulate", "--trace", "pattern:flash-crowd", "--slo", "200ms", "extra", "--percentile", "500"}, `unexpected argument "extra" (qas-decider simulate takes flags only)`},
		{[]string{"simulate", "--trace", "pattern:flash-crowd", "--slo", "200ms", "--sharing", "false"}, `unexpected argument "false" (boolean flags take --sharing=false)`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := run(t, nil, tc.args...)
			require.Equal(t, 2, code, errs)
			require.Empty(t, out)
			require.Contains(t, errs, tc.want)
		})
	}
}

// TestVersion: --version works before any subcommand and within each, printing one
// line to stdout and exiting 0 whatever else the command line holds.
func TestVersion(t *testing.T) {
	want := version.String("qas-decider") + "\n"
	for _, args := range [][]string{
		{"--version"}, {"-version"},
		{"run", "--version"}, {"webhook", "--version"}, {"model", "--version"}, {"simulate", "--version"},
		{"run", "--interval=0s", "--version"},
	} {
		code, out, errs := run(t, nil, args...)
		require.Equal(t, 0, code, "%v: %s", args, errs)
		require.Equal(t, want, out, args)
		require.Empty(t, errs, args)
	}
	code, out, _ := run(t, nil, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "qas-decider --version")
}
