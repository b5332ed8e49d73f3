package app

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/qas-dev/qas/decider/queueing"
	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/cli"
)

// ExitUnstable is the exit status of `model` when the queue is unstable
// (utilisation ≥ 1): the command ran correctly but there is no finite answer.
const ExitUnstable = 3

// modelOutput is the JSON contract of `qas-decider model`. Times are seconds.
type modelOutput struct {
	Utilization                   float64  `json:"utilization"`
	WaitProbability               float64  `json:"wait_probability"`
	MeanQueueLength               float64  `json:"mean_queue_length"`
	MeanWaitSeconds               float64  `json:"mean_wait_seconds"`
	MeanLatencySeconds            float64  `json:"mean_latency_seconds"`
	LatencySecondsAtPercentile    *float64 `json:"latency_seconds_at_percentile,omitempty"`
	MinServersForMeanTarget       *int     `json:"min_servers_for_mean_target,omitempty"`
	MinServersForPercentileTarget *int     `json:"min_servers_for_percentile_target,omitempty"`
}

type modelFlags struct {
	arrivalRate optFloat
	serviceTime time.Duration
	servers     int
	percentile  optFloat
	target      time.Duration
	concurrency int
	output      string
	layout      string
	arrivalSCV  float64
	serviceSCV  float64
}

func modelFlagSet(f *modelFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("qas-decider model", flag.ContinueOnError)
	fs.Var(&f.arrivalRate, "arrival-rate", "arrival rate λ in requests per second (required)")
	fs.DurationVar(&f.serviceTime, "service-time", 0, "mean service time E[S], e.g. 100ms (required)")
	fs.IntVar(&f.servers, "servers", 0, "number of servers (pods); each serves --concurrency requests at once (required)")
	fs.Var(&f.percentile, "percentile", "also report this latency percentile, in (0,100)")
	fs.DurationVar(&f.target, "target", 0, "also report the fewest servers whose latency meets this target, e.g. 120ms")
	fs.IntVar(&f.concurrency, "concurrency", 1, "requests one server (pod) serves at once, k")
	fs.StringVar(&f.output, "output", "json", "output format: json or text")
	fs.StringVar(&f.layout, "model", "pooled", "queue layout: pooled (one M/M/(n·k) queue) or per-pod (n M/M/k queues with λ/n each)")
	fs.Float64Var(&f.arrivalSCV, "arrival-scv", 1, "squared coefficient of variation of inter-arrival times (≠1 enables Allen–Cunneen)")
	fs.Float64Var(&f.serviceSCV, "service-scv", 1, "squared coefficient of variation of service times (≠1 enables Allen–Cunneen)")
	return fs
}

// optFloat is a float flag that knows whether it was given (by flag or environment).
type optFloat struct {
	v   float64
	set bool
}

func (o *optFloat) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatFloat(o.v, 'g', -1, 64)
}

func (o *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("not a number")
	}
	o.v, o.set = v, true
	return nil
}

func (f *modelFlags) validate(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case !f.arrivalRate.set:
		return cli.Usagef("arrival-rate", "is required")
	case math.IsNaN(f.arrivalRate.v) || math.IsInf(f.arrivalRate.v, 0) || f.arrivalRate.v < 0:
		return cli.Usagef("arrival-rate", "must be a finite non-negative rate per second, got %v", f.arrivalRate.v)
	case f.serviceTime <= 0:
		return cli.Usagef("service-time", "must be a positive duration such as 100ms, got %s", f.serviceTime)
	case f.servers < 1:
		return cli.Usagef("servers", "must be at least 1, got %d", f.servers)
	case f.concurrency < 1:
		return cli.Usagef("concurrency", "must be at least 1, got %d", f.concurrency)
	case int64(f.servers)*int64(f.concurrency) > queueing.MaxServers:
		return cli.Usagef("servers", "servers × concurrency must be at most %d, got %d × %d", queueing.MaxServers, f.servers, f.concurrency)
	case f.percentile.set && (math.IsNaN(f.percentile.v) || f.percentile.v <= 0 || f.percentile.v >= 100):
		return cli.Usagef("percentile", "must be in (0,100), got %v", f.percentile.v)
	case set["target"] && f.target <= 0:
		return cli.Usagef("target", "must be a positive duration such as 120ms, got %s", f.target)
	case f.output != "json" && f.output != "text":
		return cli.Usagef("output", "must be json or text, got %q", f.output)
	case f.layout != "pooled" && f.layout != "per-pod":
		return cli.Usagef("model", "must be pooled or per-pod, got %q", f.layout)
	case math.IsNaN(f.arrivalSCV) || math.IsInf(f.arrivalSCV, 0) || f.arrivalSCV < 0:
		return cli.Usagef("arrival-scv", "must be a finite non-negative number, got %v", f.arrivalSCV)
	case math.IsNaN(f.serviceSCV) || math.IsInf(f.serviceSCV, 0) || f.serviceSCV < 0:
		return cli.Usagef("service-scv", "must be a finite non-negative number, got %v", f.serviceSCV)
	}
	return nil
}

func runModel(args []string, env Env) error {
	var f modelFlags
	fs := modelFlagSet(&f)
	fs.SetOutput(env.Stdout)
	if err := cli.Parse(fs, runner.EnvPrefix, args, env.Getenv); err != nil {
		return err
	}
	if err := f.validate(fs); err != nil {
		return err
	}
	load := queueing.Load{
		ArrivalRate:  f.arrivalRate.v,
		ServiceTime:  f.serviceTime.Seconds(),
		ArrivalSCV:   f.arrivalSCV,
		ServiceSCV:   f.serviceSCV,
		AllenCunneen: f.arrivalSCV != 1 || f.serviceSCV != 1,
	}
	if err := load.Validate(); err != nil {
		return cli.Usagef("arrival-rate", "%v", err)
	}
	layout := queueing.LayoutPooled
	if f.layout == "per-pod" {
		layout = queueing.LayoutPerPod
	}
	var out modelOutput
	// minFor returns nil when no number of servers meets the target (the
	// latency floor, E[S] or its percentile, is above it): JSON null, a note on
	// stderr, and still exit 0, since "none suffices" is the answer.
	minFor := func(p float64) (*int, error) {
		n, err := load.MinPods(f.concurrency, layout, f.target.Seconds(), p)
		if errors.Is(err, queueing.ErrInfeasible) {
			what := "mean latency"
			if p > 0 {
				what = fmt.Sprintf("p%g latency", p)
			}
			fmt.Fprintf(env.Stderr, "%s model: note: no number of servers meets the %s target of %s (%v)\n", Name, what, f.target, err)
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return &n, nil
	}
	var unsolvable []string
	if f.target > 0 {
		n, err := minFor(0)
		if err != nil {
			return err
		}
		out.MinServersForMeanTarget = n
		if n == nil {
			unsolvable = append(unsolvable, "min_servers_for_mean_target")
		}
		if f.percentile.v > 0 {
			if out.MinServersForPercentileTarget, err = minFor(f.percentile.v); err != nil {
				return err
			}
			if out.MinServersForPercentileTarget == nil {
				unsolvable = append(unsolvable, "min_servers_for_percentile_target")
			}
		}
	}
	m, err := load.Pods(f.servers, f.concurrency, layout)
	if errors.Is(err, queueing.ErrUnstable) {
		stable := int(math.Floor(load.OfferedLoad()/float64(f.concurrency))) + 1
		msg := fmt.Sprintf("%v; at least %d servers are needed for a stable queue", err, stable)
		if out.MinServersForMeanTarget != nil {
			msg += fmt.Sprintf(", %d for the mean target", *out.MinServersForMeanTarget)
		}
		if out.MinServersForPercentileTarget != nil {
			msg += fmt.Sprintf(", %d for the p%g target", *out.MinServersForPercentileTarget, f.percentile.v)
		}
		return &ExitError{Status: ExitUnstable, Err: errors.New(msg)}
	}
	if err != nil {
		return err
	}
	if layout == queueing.LayoutPerPod {
		// Every pod's queue is alike: the workload's queue length is n times one pod's.
		m.MeanQueueLength *= float64(f.servers)
	}
	out.Utilization = m.Utilization
	out.WaitProbability = m.WaitProbability
	out.MeanQueueLength = m.MeanQueueLength
	out.MeanWaitSeconds = m.MeanWait
	out.MeanLatencySeconds = m.MeanLatency
	if f.percentile.v > 0 {
		v, err := m.LatencyPercentile(f.percentile.v)
		if err != nil {
			return err
		}
		out.LatencySecondsAtPercentile = &v
	}
	return writeModel(env.Stdout, f, out, unsolvable)
}

func writeModel(w io.Writer, f modelFlags, out modelOutput, unsolvable []string) error {
	if f.output == "json" {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if len(unsolvable) > 0 {
			// Keep the key, as null, so that consumers see the target had no answer.
			var obj map[string]any
			if err := json.Unmarshal(b, &obj); err != nil {
				return err
			}
			for _, k := range unsolvable {
				obj[k] = nil
			}
			if b, err = json.Marshal(obj); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	p := func(name string, v any) { fmt.Fprintf(w, "%-36s %v\n", name, v) }
	p("utilization", out.Utilization)
	p("wait_probability", out.WaitProbability)
	p("mean_queue_length", out.MeanQueueLength)
	p("mean_wait", seconds(out.MeanWaitSeconds))
	p("mean_latency", seconds(out.MeanLatencySeconds))
	if out.LatencySecondsAtPercentile != nil {
		p(fmt.Sprintf("latency_at_p%g", f.percentile.v), seconds(*out.LatencySecondsAtPercentile))
	}
	if f.target > 0 {
		p("min_servers_for_mean_target", intOrNone(out.MinServersForMeanTarget))
		if f.percentile.v > 0 {
			p(fmt.Sprintf("min_servers_for_p%g_target", f.percentile.v), intOrNone(out.MinServersForPercentileTarget))
		}
	}
	return nil
}

// seconds prints a duration in seconds with its human form beside it.
func seconds(s float64) string {
	return fmt.Sprintf("%.9gs (%s)", s, time.Duration(s*float64(time.Second)).Round(time.Microsecond))
}

func intOrNone(n *int) string {
	if n == nil {
		return "none (target below the latency floor)"
	}
	return fmt.Sprint(*n)
}
