package loadgen

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/trace"
	"github.com/qas-dev/qas/proxy/sidecar"
	"github.com/qas-dev/qas/proxy/stats"
)

// Main is the qas-loadgen command; it returns the exit status.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qas-loadgen", flag.ContinueOnError)
	targets := fs.String("target", "", "comma-separated base URLs, e.g. http://127.0.0.1:8080 (round-robin, as a Service)")
	path := fs.String("path", "/", "request path and query")
	rate := fs.Float64("rate", 0, "constant arrival rate, requests per second (instead of --trace)")
	tracePath := fs.String("trace", "", "trace file (one integer per line = requests in that second; .gz allowed)")
	window := fs.String("window", "", "part of the trace to replay, in trace time, e.g. 12h:13h")
	scale := fs.Float64("scale", 1, "multiply the trace's rates by this")
	compress := fs.Int("compress", 1, "replay N trace seconds in one second")
	duration := fs.Duration("duration", 0, "how long to send (default: the trace window, or 10s at --rate)")
	watch := fs.String("watch", "", "comma-separated qas-proxy /stats URLs to print live per-pod measurements from")
	interval := fs.Duration("interval", 2*time.Second, "how often the progress line (or, with --watch, the per-pod view) prints")
	maxInFlight := fs.Int("max-in-flight", 1000, "concurrent requests at most; arrivals beyond are dropped and counted")
	seed := fs.Uint64("seed", 1, "random seed for the arrival process")
	summary := fs.String("summary", "", "with --watch: write \"λ E[S] p95\" (per second, seconds, seconds) measured by the proxies to this file")
	if err := cli.Parse(fs, "QAS_LOADGEN", args, getenv); err != nil {
		return cli.ExitTo(stdout, stderr, "qas-loadgen", err)
	}
	cfg := Config{Path: *path, Step: time.Second, MaxInFlight: *maxInFlight, Seed: *seed, Duration: *duration, ProgressEvery: *interval}
	var err error
	if cfg.Targets, err = urlList("target", *targets, "http://127.0.0.1:8080"); err != nil {
		return cli.ExitTo(stdout, stderr, "qas-loadgen", err)
	}
	pods, err := urlList("watch", *watch, fmt.Sprintf("http://127.0.0.1:%d/stats", sidecar.DefaultAdminPort))
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-loadgen", err)
	}
	switch {
	case len(cfg.Targets) == 0:
		err = cli.Usagef("target", "at least one URL is required")
	case *rate > 0 && *tracePath != "":
		err = cli.Usagef("rate", "give --rate or --trace, not both")
	case *scale <= 0:
		err = cli.Usagef("scale", "%v must be positive", *scale)
	case *compress < 1:
		err = cli.Usagef("compress", "%d must be at least 1", *compress)
	case *interval <= 0:
		err = cli.Usagef("interval", "%v must be positive", *interval)
	case *maxInFlight < 1:
		err = cli.Usagef("max-in-flight", "%d must be at least 1", *maxInFlight)
	case *rate > 0:
		cfg.Rates = []float64{*rate}
		if cfg.Duration == 0 {
			cfg.Duration = 10 * time.Second
		}
	case *tracePath != "":
		cfg.Rates, cfg.Step, err = traceRates(*tracePath, *window, *scale, *compress)
		if err == nil && cfg.Duration == 0 {
			cfg.Duration = time.Duration(len(cfg.Rates)) * cfg.Step
		}
	default:
		err = cli.Usagef("rate", "give --rate or --trace")
	}
	if err != nil {
		return cli.ExitTo(stdout, stderr, "qas-loadgen", err)
	}
	if *summary != "" && len(pods) == 0 {
		return cli.ExitTo(stdout, stderr, "qas-loadgen", cli.Usagef("summary", "needs --watch"))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *maxInFlight}, Timeout: 30 * time.Second}
	var before []stats.Snapshot
	if len(pods) > 0 {
		if before, err = Snapshots(ctx, client, pods); err != nil {
			return cli.ExitTo(stdout, stderr, "qas-loadgen", cli.Usagef("watch", "%v", err))
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go Watch(wctx, client, pods, *interval, stdout)
	}
	var progress func(time.Duration, Result)
	if len(pods) == 0 {
		progress = Progress(stdout, cfg)
	}
	res, err := Run(ctx, cfg, client, progress)
	if err == nil && pods != nil {
		err = report(ctx, client, pods, before, *summary, stdout)
	}
	fmt.Fprintf(stdout, "\nsent %d in %s (%.1f/s): %d ok, %d failed, %d dropped at the in-flight limit\n",
		res.Sent, res.Elapsed.Round(time.Millisecond), float64(res.Sent)/res.Elapsed.Seconds(), res.OK, res.Failed, res.Dropped)
	if len(res.Latencies) > 0 {
		fmt.Fprintf(stdout, "client latency: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms\n",
			res.Quantile(0.5)*1000, res.Quantile(0.95)*1000, res.Quantile(0.99)*1000)
	}
	for _, f := range res.Failures {
		fmt.Fprintf(stdout, "failed: %d × %s, the first: %s\n", f.Count, f.Kind, f.First)
	}
	if err == nil && res.Sent > 0 && res.OK == 0 {
		err = fmt.Errorf("none of the %d requests sent succeeded", res.Sent)
	}
	if err != nil {
		fmt.Fprintf(stderr, "qas-loadgen: %v\n", err)
		return 1
	}
	return 0
}

// urlList splits the comma-separated URLs given to flag name and checks that each is
// an http(s) URL with a host: anything else would only fail request by request.
// example is a good one, for the message.
func urlList(name, list, example string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return nil, cli.Usagef(name, "%q is not an http(s) URL such as %s", s, example)
		}
		out = append(out, s)
	}
	return out, nil
}

func report(ctx context.Context, client *http.Client, pods []string, before []stats.Snapshot, summary string, stdout io.Writer) error {
	after, err := Snapshots(ctx, client, pods)
	if err != nil {
		return err
	}
	t, err := Total(before, after)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "measured by the proxies: λ %.2f/s, E[S] %.1f ms, p95 %.1f ms over %d requests\n",
		t.ArrivalRate, t.ServiceMean*1000, t.P95*1000, t.Completions)
	if summary == "" {
		return nil
	}
	return os.WriteFile(summary, []byte(fmt.Sprintf("%.6f %.6f %.6f\n", t.ArrivalRate, t.ServiceMean, t.P95)), 0o644)
}

// traceRates turns a trace window into one rate per trace second, each lasting
// 1/compress s: N trace seconds replay in one second, and a window whose length is not
// a multiple of N ends with its own last seconds, not with a full second at a lower
// rate.
func traceRates(path, window string, scale float64, compress int) ([]float64, time.Duration, error) {
	w, err := trace.ParseWindow(window)
	if err != nil {
		return nil, 0, cli.Usagef("window", "%v", err)
	}
	perSecond, err := trace.ReadFile(path, w)
	if err != nil {
		return nil, 0, cli.Usagef("trace", "%v", err)
	}
	for i := range perSecond {
		perSecond[i] *= scale * float64(compress)
	}
	return perSecond, time.Second / time.Duration(compress), nil
}
