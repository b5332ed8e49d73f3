package influx

import (
	"flag"
	"net/url"

	"github.com/qas-dev/qas/internal/cli"
)

// Options choose the InfluxDB server and bucket: the flags --influx-url,
// --influx-token, --influx-org and --influx-bucket, which qas-collector and
// `qas-decider run` share.
type Options struct {
	URL, Token, Org, Bucket string
}

// Register adds the flags to fs; urlUsage is --influx-url's help text.
func (o *Options) Register(fs *flag.FlagSet, urlUsage string) {
	fs.StringVar(&o.URL, "influx-url", "http://127.0.0.1:8086", urlUsage)
	fs.StringVar(&o.Token, "influx-token", "", `InfluxDB token ("user:password" on 1.8 with auth; empty without)`)
	fs.StringVar(&o.Org, "influx-org", "", "InfluxDB organisation (empty on 1.8)")
	fs.StringVar(&o.Bucket, "influx-bucket", "qas/autogen", `bucket ("database/retention-policy" on 1.8)`)
}

// Validate returns a cli.UsageError naming the flag at fault: --influx-url must be an
// http(s) URL with a host, --influx-bucket must not be empty.
func (o Options) Validate() error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cli.Usagef("influx-url", "%q is not an http(s) URL", o.URL)
	}
	if o.Bucket == "" {
		return cli.Usagef("influx-bucket", "must not be empty")
	}
	return nil
}
