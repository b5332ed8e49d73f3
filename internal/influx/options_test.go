package influx

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/cli"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want Options
		flag string // the flag a usage error names; "" for none
	}{
		{name: "defaults", want: Options{URL: "http://127.0.0.1:8086", Bucket: "qas/autogen"}},
		{name: "all set", args: []string{"--influx-url=https://db:8086", "--influx-token=u:p", "--influx-org=o", "--influx-bucket=m/week"},
			want: Options{URL: "https://db:8086", Token: "u:p", Org: "o", Bucket: "m/week"}},
		{name: "no scheme", args: []string{"--influx-url=db:8086"}, flag: "influx-url"},
		{name: "not http", args: []string{"--influx-url=ftp://db"}, flag: "influx-url"},
		{name: "no host", args: []string{"--influx-url=http://"}, flag: "influx-url"},
		{name: "empty bucket", args: []string{"--influx-bucket="}, flag: "influx-bucket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.Register(fs, "where to write")
			require.NoError(t, fs.Parse(tc.args))
			require.Equal(t, "where to write", fs.Lookup("influx-url").Usage)
			err := o.Validate()
			if tc.flag != "" {
				require.True(t, cli.IsUsage(err), "%v", err)
				require.ErrorContains(t, err, "--"+tc.flag)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, o)
		})
	}
}
