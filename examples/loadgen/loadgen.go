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
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Config says what load to send.
type Config struct {
	// Targets are base URLs ("http://127.0.0.1:8080"); Path is appended.
	Targets []string
	Path    string
	// Rates are requests per second, one value per step; the last repeats until
	// Duration ends. Step is how long each value lasts (a trace second, divided by the
	// compression).
	Rates    []float64
	Step     time.Duration
	Duration time.Duration
	// MaxInFlight bounds concurrent requests; arrivals beyond it are counted as dropped
	// rather than delayed, so the load stays open-loop.
	MaxInFlight int
	Seed        uint64
	// ProgressEvery is how often Run reports progress (default 1 s), whether or not
	// requests arrive.
	ProgressEvery time.Duration
	// Clock times the schedule and the progress reports (default: the real clock).
	Clock clock.WithTicker
}

// Result summarises a run from the client's side.
type Result struct {
	Sent, OK, Failed, Dropped uint64
	// Latencies in seconds, sorted.
	Latencies []float64
	Elapsed   time.Duration
	// Failures are the failed requests by kind, in the order each kind first
	// happened (set at the end of Run).
	Failures []Failure
}

// Failure counts one kind of failed request and keeps the first one's error, so
// that a run whose every request fails says why.
type Failure struct {
	Kind  string // "connection refused", "timeout", "HTTP 503", ...
	Count uint64
	First string
}

// statusError is a response that counts as failed: a 5xx.
type statusError struct {
	code   int
	target string
}

func (e statusError) Error() string {
	return fmt.Sprintf("%s answered %d %s", e.target, e.code, http.StatusText(e.code))
}

// failureKind classifies a failed request: its status, or what went wrong with the
// connection, which is what tells a wrong target from an overloaded one.
func failureKind(err error) string {
	var se statusError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("HTTP %d", se.code)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "name resolution"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	default:
		return "other error"
	}
}

// failures tallies failed requests by kind; it is safe for concurrent use.
type failures struct {
	mu    sync.Mutex
	kinds []Failure
}

func (f *failures) add(err error) {
	kind := failureKind(err)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.kinds {
		if f.kinds[i].Kind == kind {
			f.kinds[i].Count++
			return
		}
	}
	f.kinds = append(f.kinds, Failure{Kind: kind, Count: 1, First: err.Error()})
}

func (f *failures) list() []Failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Failure(nil), f.kinds...)
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
	case c.ProgressEvery < 0:
		return errors.New("progress interval must not be negative")
	}
	for i, r := range c.Rates {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return fmt.Errorf("rate %d is %v", i, r)
		}
	}
	return nil
}

// Schedule generates the arrival offsets of a non-homogeneous Poisson process with
// piecewise-constant rates, one step at a time: memory stays constant however long the
// trace and however high the rate (the whole NASA trace at x200 is some 680 million
// arrivals). It is deterministic for a seed.
type Schedule struct {
	rates          []float64
	step, duration time.Duration
	rng            *rand.Rand
	i              int           // current step
	end            time.Duration // end of the current step
	t              time.Duration // last arrival, or the current step's start
}

// NewSchedule starts a schedule at offset 0.
func NewSchedule(rates []float64, step, duration time.Duration, seed uint64) *Schedule {
	return &Schedule{rates: rates, step: step, duration: duration,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), end: min(step, duration)}
}

// Next returns the next arrival's offset, or false when the schedule has ended.
func (s *Schedule) Next() (time.Duration, bool) {
	for s.t < s.duration {
		// Within a step the process is homogeneous: exponential gaps at its rate. A gap
		// that crosses the step's end is dropped; memorylessness makes that exact.
		if rate := s.rates[min(s.i, len(s.rates)-1)]; rate > 0 {
			s.t += time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
			if s.t < s.end {
				return s.t, true
			}
		}
		s.i++
		s.t, s.end = s.end, min(s.end+s.step, s.duration)
	}
	return 0, false
}

// Arrivals returns every arrival offset of a schedule (for tests and small runs; Run
// streams them).
func Arrivals(rates []float64, step, duration time.Duration, seed uint64) []time.Duration {
	var out []time.Duration
	s := NewSchedule(rates, step, duration, seed)
	for at, ok := s.Next(); ok; at, ok = s.Next() {
		out = append(out, at)
	}
	return out
}

// Run sends the load and returns when the schedule has ended and every response has
// come back, or ctx ends. Requests leave at their scheduled times whatever the
// responses do (open loop). progress, if not nil, is called every cfg.ProgressEvery,
// during quiet stretches of the schedule too.
func Run(ctx context.Context, cfg Config, client *http.Client, progress func(elapsed time.Duration, r Result)) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var sent, ok, failed, dropped atomic.Uint64
	var fails failures
	var mu sync.Mutex
	var lat []float64
	slots := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup
	begin := clk.Now()
	snapshot := func() Result {
		return Result{Sent: sent.Load(), OK: ok.Load(), Failed: failed.Load(), Dropped: dropped.Load(), Elapsed: clk.Since(begin)}
	}
	if progress != nil {
		every := cfg.ProgressEvery
		if every == 0 {
			every = time.Second
		}
		ticker := clk.NewTicker(every)
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-ticker.C():
					progress(clk.Since(begin), snapshot())
				}
			}
		}()
		defer func() { ticker.Stop(); close(stop); <-stopped }()
	}
	schedule := NewSchedule(cfg.Rates, cfg.Step, cfg.Duration, cfg.Seed)
	for i := 0; ; i++ {
		at, more := schedule.Next()
		if !more {
			at = cfg.Duration // the schedule may end quietly: it still lasts its duration
		}
		if wait := begin.Add(at).Sub(clk.Now()); wait > 0 {
			select {
			case <-clk.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil || !more {
			break
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
				if err == nil && resp.StatusCode >= 500 {
					err = statusError{code: resp.StatusCode, target: target}
				}
			}
			if err != nil {
				failed.Add(1)
				fails.add(err)
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
	r.Failures = fails.list()
	return r, ctx.Err()
}

// Progress returns a progress function for Run that writes one line to w per call:
// elapsed / total, the mean rate the schedule asked for over the last progress
// interval (a trace's seconds are too spiky to show one), what was sent (and its
// average rate), answered, failed and dropped.
func Progress(w io.Writer, cfg Config) func(elapsed time.Duration, r Result) {
	every := cfg.ProgressEvery
	if every == 0 {
		every = time.Second
	}
	return func(elapsed time.Duration, r Result) {
		avg := 0.0
		if s := elapsed.Seconds(); s > 0 {
			avg = float64(r.Sent) / s
		}
		pct := 100 * elapsed.Seconds() / cfg.Duration.Seconds()
		fmt.Fprintf(w, "%7s / %-7s %5.1f%%  schedule %7.1f/s  sent %8d (%.1f/s)  ok %8d  failed %6d  dropped %6d\n",
			elapsed.Truncate(time.Second), cfg.Duration.Truncate(time.Second), min(pct, 100), cfg.meanRate(elapsed-every, elapsed),
			r.Sent, avg, r.OK, r.Failed, r.Dropped)
	}
}

// meanRate is the schedule's mean rate over [from, to) (the rate at to when the span
// is empty); the last rate repeats past the end of Rates.
func (c Config) meanRate(from, to time.Duration) float64 {
	step := max(c.Step, time.Nanosecond)
	rateAt := func(t time.Duration) float64 { return c.Rates[min(int(t/step), len(c.Rates)-1)] }
	from = max(from, 0)
	if to <= from {
		return rateAt(to)
	}
	var requests float64
	for t := from; t < to; {
		end := min((t/step+1)*step, to)
		requests += rateAt(t) * (end - t).Seconds()
		t = end
	}
	return requests / (to - from).Seconds()
}
