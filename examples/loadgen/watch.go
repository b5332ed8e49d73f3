package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/qas-dev/qas/proxy/stats"
)

// Watch polls each pod's qas-proxy /stats every interval and prints one line per pod
// with what the collector would compute for the window: λ, E[S], mean concurrency
// (Little's law), busy share, p95 and errors. It returns when ctx ends.
func Watch(ctx context.Context, client *http.Client, pods []string, interval time.Duration, out io.Writer) {
	prev := make([]*stats.Snapshot, len(pods))
	t := time.NewTicker(interval)
	defer t.Stop()
	fmt.Fprintf(out, "%-6s %-4s %9s %9s %9s %6s %9s %6s\n", "time", "pod", "λ (/s)", "E[S] ms", "in-flight", "busy", "p95 ms", "5xx")
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
				w, err := stats.Between(*prev[i], cur)
				switch {
				case err != nil:
					fmt.Fprintf(out, "%-6s %-4d rebased: %v\n", since(start), i, err)
				default:
					fmt.Fprintf(out, "%-6s %-4d %9.1f %9.1f %9.2f %5.0f%% %9s %6d\n", since(start), i,
						w.ArrivalRate, w.ServiceMean*1000, w.MeanInFlight, w.Busy*100, ms(w.Latency.Quantile(0.95)), w.Errors)
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

func ms(s float64) string {
	if math.IsNaN(s) {
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

// Total merges the pods' windows between two sets of snapshots, as the collector
// aggregates a workload: rates add up, service time is weighted by completions, and
// the latency histograms merge before the percentile is taken.
func Total(before, after []stats.Snapshot) (Totals, error) {
	if len(before) != len(after) {
		return Totals{}, fmt.Errorf("%d snapshots before, %d after", len(before), len(after))
	}
	var t Totals
	var service float64
	var hist stats.Histogram
	for i := range before {
		w, err := stats.Between(before[i], after[i])
		if err != nil {
			return Totals{}, fmt.Errorf("pod %d: %w", i, err)
		}
		t.ArrivalRate += w.ArrivalRate
		t.Completions += w.Completions
		service += w.ServiceMean * float64(w.Completions)
		if hist, err = hist.Add(w.Latency); err != nil {
			return Totals{}, err
		}
	}
	if t.Completions > 0 {
		t.ServiceMean = service / float64(t.Completions)
	}
	t.P95 = hist.Quantile(0.95)
	return t, nil
}
