package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/stats"
)

// Watch polls each pod's qas-proxy /stats every interval and prints one line per pod
// with what the collector computes for the window (the same scrape.Delta and
// aggregate code): λ, E[S], mean concurrency (Little's law), busy share, p95 and
// errors. It returns when ctx ends.
func Watch(ctx context.Context, client *http.Client, pods []string, interval time.Duration, out io.Writer) {
	prev := make([]*stats.Snapshot, len(pods))
	t := time.NewTicker(interval)
	defer t.Stop()
	fmt.Fprintf(out, "%-6s %-4s %9s %9s %9s %6s %9s %6s\n", "time", "pod", "λ (/s)", "E[S] ms", "in-flight", "busy", "p95 ms", "5xx/s")
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, url := range pods {
			cur, err := fetch(ctx, client, url)
			if err != nil {
				fmt.Fprintf(out, "%-6s %-4d unreachable: %v\n", since(start), i, err)
				continue
			}
			if prev[i] != nil {
				iv, reason := scrape.Delta(scrape.Target{Pod: url}, *prev[i], cur)
				switch {
				case reason != "":
					fmt.Fprintf(out, "%-6s %-4d rebased: %s\n", since(start), i, reason)
				default:
					m := aggregate.Pod(iv)
					fmt.Fprintf(out, "%-6s %-4d %9.1f %9.1f %9.2f %5.0f%% %9s %6.1f\n", since(start), i,
						m.ArrivalRate, m.ServiceMean*1000, m.InFlightMean, m.BusyRatio*100, ms(m.LatencyP95, m.Completions), m.ErrorRate)
				}
			}
			prev[i] = &cur
		}
	}
}

func fetch(ctx context.Context, client *http.Client, url string) (stats.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return stats.Snapshot{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return stats.Snapshot{}, err
	}
	defer resp.Body.Close()
	return stats.Decode(resp.Body)
}

func since(start time.Time) string {
	return fmt.Sprintf("%ds", int(time.Since(start).Round(time.Second).Seconds()))
}

func ms(s float64, completions uint64) string {
	if completions == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", s*1000)
}

// Totals is what all pods' proxies measured together over a run.
type Totals struct {
	ArrivalRate float64 // λ over all pods, per second
	ServiceMean float64 // E[S], seconds
	P95         float64 // latency at the proxies, seconds
	Completions uint64
}

// Snapshots fetches every pod's /stats.
func Snapshots(ctx context.Context, client *http.Client, pods []string) ([]stats.Snapshot, error) {
	out := make([]stats.Snapshot, len(pods))
	for i, url := range pods {
		s, err := fetch(ctx, client, url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		}
		out[i] = s
	}
	return out, nil
}

// Total is what the collector would compute for the workload over the whole run: the
// pods' intervals between two sets of snapshots, aggregated by collector/aggregate.
func Total(before, after []stats.Snapshot) (Totals, error) {
	if len(before) != len(after) {
		return Totals{}, fmt.Errorf("%d snapshots before, %d after", len(before), len(after))
	}
	ivs := make([]scrape.Interval, len(before))
	for i := range before {
		iv, reason := scrape.Delta(scrape.Target{Pod: fmt.Sprint(i)}, before[i], after[i])
		if reason != "" {
			return Totals{}, fmt.Errorf("pod %d: no interval: %s", i, reason)
		}
		ivs[i] = iv
	}
	m, err := aggregate.Workload(ivs)
	if err != nil {
		return Totals{}, err
	}
	return Totals{ArrivalRate: m.ArrivalRate, ServiceMean: m.ServiceMean, P95: m.LatencyP95, Completions: m.Completions}, nil
}
