package app

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/version"
)

func TestParse(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		flag string // the flag (or argument) a usage error names; "" = valid
		chk  func(*testing.T, Flags)
	}{
		{name: "defaults", chk: func(t *testing.T, f Flags) {
			require.Equal(t, 5*time.Second, f.Interval)
			require.Equal(t, "qas/autogen", f.Influx.Bucket)
			require.True(t, f.CPU)
		}},
		{name: "env override", env: map[string]string{"QAS_COLLECTOR_INTERVAL": "10s", "QAS_COLLECTOR_INFLUX_URL": "http://db:8086"},
			chk: func(t *testing.T, f Flags) {
				require.Equal(t, 10*time.Second, f.Interval)
				require.Equal(t, "http://db:8086", f.Influx.URL)
			}},
		{name: "flag beats env", args: []string{"--interval=3s"}, env: map[string]string{"QAS_COLLECTOR_INTERVAL": "10s"},
			chk: func(t *testing.T, f Flags) { require.Equal(t, 3*time.Second, f.Interval) }},
		{name: "bad url", args: []string{"--influx-url=db:8086"}, flag: "influx-url"},
		{name: "empty bucket", args: []string{"--influx-bucket="}, flag: "influx-bucket"},
		{name: "zero interval", args: []string{"--interval=0s"}, flag: "interval"},
		{name: "timeout above interval", args: []string{"--interval=1s", "--scrape-timeout=2s"}, flag: "scrape-timeout"},
		{name: "no concurrency", args: []string{"--concurrency=0"}, flag: "concurrency"},
		{name: "tiny buffer", args: []string{"--buffer-points=10"}, flag: "buffer-points"},
		{name: "bad metrics address", args: []string{"--metrics-listen=9902"}, flag: "metrics-listen"},
		// Go's flag package stops at the first positional argument: without the
		// check, the bad --interval after it would be ignored.
		{name: "positional argument", args: []string{"extra", "--interval=0s"}, flag: `unexpected argument "extra" (qas-collector takes flags only)`},
		{name: "boolean flag given a separate value", args: []string{"--cpu", "false", "--interval=0s"},
			flag: `unexpected argument "false" (boolean flags take --cpu=false)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.args, env(tc.env))
			if tc.flag != "" {
				require.True(t, cli.IsUsage(err), "%v", err)
				require.ErrorContains(t, err, tc.flag)
				return
			}
			require.NoError(t, err)
			tc.chk(t, f)
		})
	}
}

func TestMainUsageExit(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--interval=-1s"}, func(string) string { return "" }, &stdout, &stderr)
	require.Equal(t, 2, code)
	require.Contains(t, stderr.String(), "interval")
	require.Empty(t, stdout.String())
}

// TestMainVersion: --version prints one line to stdout and exits 0, before any
// Kubernetes configuration is looked for.
func TestMainVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--version"}, func(string) string { return "" }, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.Equal(t, version.String("qas-collector")+"\n", stdout.String())
	require.Empty(t, stderr.String())
}
