// Package loadgen is an open-loop load generator for QAS demos: requests arrive as a
// Poisson process whose rate is constant or follows a trace second by second, spread
// round-robin over targets as a Service spreads them over pods, and a live view prints
// each pod's measurements from its qas-proxy /stats.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what load to send.
type Config struct {
	// Targets are base URLs ("http://127.0.0.1:8080"); Path is appended.
	Targets []string
	Path    string
	// Rates are requests per second, one value per step; the last repeats until
	// Duration ends. Step is how long each value lasts (1 s for a trace).
	Rates    []float64
	Step     time.Duration
	Duration time.Duration
	// MaxInFlight bounds concurrent requests; arrivals beyond it are counted as dropped
	// rather than delayed, so the load stays open-loop.
	MaxInFlight int
	Seed        uint64
}

// Result summarises a run from the client's side.
type Result struct {
	Sent, OK, Failed, Dropped uint64
	// Latencies in seconds, sorted.
	Latencies []float64
	Elapsed   time.Duration
}

// Quantile returns the q-quantile (0..1) of the client-side latencies.
func (r Result) Quantile(q float64) float64 {
	if len(r.Latencies) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(r.Latencies)))) - 1
	return r.Latencies[max(0, min(i, len(r.Latencies)-1))]
}

// Validate checks a Config.
func (c Config) Validate() error {
	switch {
	case len(c.Targets) == 0:
		return errors.New("no targets")
	case len(c.Rates) == 0:
		return errors.New("no rates")
	case c.Step <= 0:
		return errors.New("step must be positive")
	case c.Duration <= 0:
		return errors.New("duration must be positive")
	case c.MaxInFlight <= 0:
		return errors.New("max in-flight must be positive")
	}
	for i, r := range c.Rates {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("rate %d is %v", i, r)
		}
	}
	return nil
}

// Arrivals returns the arrival offsets of a non-homogeneous Poisson process with the
// given piecewise-constant rates, deterministic for a seed.
func Arrivals(rates []float64, step, duration time.Duration, seed uint64) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []time.Duration
	for start := time.Duration(0); start < duration; start += step {
		i := int(start / step)
		rate := rates[min(i, len(rates)-1)]
		end := min(start+step, duration)
		if rate <= 0 {
			continue
		}
		// Within a step the process is homogeneous: exponential gaps at this rate.
		t := start
		for {
			t += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			if t >= end {
				break
			}
			out = append(out, t)
		}
	}
	return out
}

// Run sends the load and returns when it is done or ctx ends. progress, if not nil, is
// called about once a second.
func Run(ctx context.Context, cfg Config, client *http.Client, progress func(elapsed time.Duration, r Result)) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	arrivals := Arrivals(cfg.Rates, cfg.Step, cfg.Duration, cfg.Seed)
	var sent, ok, failed, dropped atomic.Uint64
	var mu sync.Mutex
	var lat []float64
	slots := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup
	begin := time.Now()
	lastProgress := begin
	snapshot := func() Result {
		return Result{Sent: sent.Load(), OK: ok.Load(), Failed: failed.Load(), Dropped: dropped.Load(), Elapsed: time.Since(begin)}
	}
	for i, at := range arrivals {
		if wait := time.Until(begin.Add(at)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		if progress != nil && time.Since(lastProgress) >= time.Second {
			lastProgress = time.Now()
			progress(time.Since(begin), snapshot())
		}
		select {
		case slots <- struct{}{}:
		default:
			dropped.Add(1)
			continue
		}
		sent.Add(1)
		target := cfg.Targets[i%len(cfg.Targets)] + cfg.Path
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			t0 := time.Now()
			resp, err := client.Get(target)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			if err != nil {
				failed.Add(1)
				return
			}
			ok.Add(1)
			mu.Lock()
			lat = append(lat, time.Since(t0).Seconds())
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := snapshot()
	sort.Float64s(lat)
	r.Latencies = lat
	return r, ctx.Err()
}

// Progress returns a progress function for Run that writes one line to w at most every
// `every` of elapsed time: elapsed / total, the rate the schedule asks for now, what
// was sent (and its average rate), answered, failed and dropped.
func Progress(w io.Writer, cfg Config, every time.Duration) func(elapsed time.Duration, r Result) {
	next := time.Duration(0)
	return func(elapsed time.Duration, r Result) {
		if elapsed < next {
			return
		}
		next = elapsed + every
		step := int(elapsed / max(cfg.Step, time.Nanosecond))
		rate := cfg.Rates[min(step, len(cfg.Rates)-1)]
		avg := 0.0
		if s := elapsed.Seconds(); s > 0 {
			avg = float64(r.Sent) / s
		}
		pct := 100 * elapsed.Seconds() / cfg.Duration.Seconds()
		fmt.Fprintf(w, "%7s / %-7s %5.1f%%  schedule %7.1f/s  sent %8d (%.1f/s)  ok %8d  failed %6d  dropped %6d\n",
			elapsed.Truncate(time.Second), cfg.Duration.Truncate(time.Second), min(pct, 100), rate, r.Sent, avg, r.OK, r.Failed, r.Dropped)
	}
}
