package app

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/evaluate/matrix"
	"github.com/qas-dev/qas/decider/evaluate/report"
	"github.com/qas-dev/qas/internal/cli"
)

// evaluateOutput is the JSON contract of `qas-decider evaluate`.
type evaluateOutput struct {
	Conditions  string            `json:"conditions"`
	Cells       int               `json:"cells"`
	Workers     int               `json:"workers"`
	WallSeconds float64           `json:"wall_seconds"`
	Headline    []matrix.Headline `json:"headline"`
	// Goals is qas against issues #15 and #20's goals (matrix.GoalsOf); nil
	// when qas did not run.
	Goals   *matrix.Goals    `json:"goals,omitempty"`
	Results []*matrix.Result `json:"results"`
	// Pooling is --pooling's comparison against oracle-pooled.
	Pooling []matrix.PoolingRow `json:"pooling,omitempty"`
}

func runEvaluate(args []string, env Env) error {
	fs := flag.NewFlagSet("qas-decider evaluate", flag.ContinueOnError)
	fs.SetOutput(env.Stdout)
	nasa := fs.String("nasa", "", "the NASA trace (nasa-1995-07-08.rps.gz) (required but with --held-out)")
	out := fs.String("out", "out/evaluate", "directory for results.md, results.json and report.html")
	demo := fs.Bool("demo", false, "the one-minute taste (make demo): two NASA half hours, counts ×50 and Poisson ×100, seed 1")
	heldOut := fs.Bool("held-out", false, "the held-out shapes instead of the matrix (docs/simulation.md): self-similar ON/OFF traffic and flash spikes over a steady base, 6 h each at ×5 and ×40, both settings, seeds 1–3, through a Service; never tuned on")
	pooling := fs.Bool("pooling", false, "the pooled data planes' comparison (docs/pooling.md): every workload × setting, seeds 1–3, through random, peer, front and overflow routing; qas, kpa, hpa, oracle and oracle-pooled")
	handoffs := addHandoffFlags(fs, "with --pooling")
	workers := fs.Int("workers", 0, "cells run at once (0: one per core)")
	detail := fs.Int("detail", 4, "cells, from the first, whose charts the report draws")
	only := fs.String("only", "", "run only the cells whose name contains this text")
	seeds := fs.Int("seeds", 0, "run every workload, setting and routing with seeds 1 to N (at most 100) instead of the matrix's own (1–3; least request and the recurring bursts: 1); with --only, filtered after")
	burst := addBurstFlags(fs, "qas in every cell (the matrix's default: nothing)")
	slo := fs.Duration("slo", 200*time.Millisecond, "latency target of every cell (the matrix's: 200ms)")
	pctFlag := fs.String("percentile", "95", "latency percentile the target applies to, in (0,100), or mean (the matrix's: 95)")
	conc := fs.Int("concurrency", 1, "requests one pod serves at once, k (the matrix's: 1)")
	if err := cli.Parse(fs, "QAS_EVALUATE", args, env.Getenv); err != nil {
		return err
	}
	switch {
	case *nasa == "" && !*heldOut:
		return cli.Usagef("nasa", "is required (but with --held-out): the path of nasa-1995-07-08.rps.gz")
	case *nasa != "":
		if _, err := os.Stat(*nasa); err != nil {
			return cli.Usagef("nasa", "%v", err)
		}
	}
	handoff, err := handoffs.handoff()
	if err != nil {
		return err
	}
	if *workers < 0 {
		return cli.Usagef("workers", "must not be negative")
	}
	if *detail < 0 {
		return cli.Usagef("detail", "must not be negative")
	}
	if *slo <= 0 {
		return cli.Usagef("slo", "must be a positive duration such as 200ms, got %v", *slo)
	}
	pct, err := parsePercentile(*pctFlag)
	if err != nil {
		return err
	}
	if *conc < 1 {
		return cli.Usagef("concurrency", "must be at least 1, got %d", *conc)
	}
	if *seeds < 0 || *seeds > matrix.MaxSeeds {
		return cli.Usagef("seeds", "must be between 0 (the matrix's own) and %d, got %d", matrix.MaxSeeds, *seeds)
	}
	switch {
	case *heldOut && (*demo || *pooling):
		return cli.Usagef("held-out", "excludes --demo and --pooling")
	case *pooling && *demo:
		return cli.Usagef("pooling", "excludes --demo")
	}
	var cells []matrix.Cell
	var what string
	o := matrix.DefaultOptions()
	switch {
	case *heldOut:
		cells, what = matrix.HeldOut(), "the held-out shapes (never tuned on)"
	case *pooling:
		cells, what, o = matrix.Pooling(*nasa), "the pooled data planes' comparison (docs/pooling.md)", matrix.PoolingOptions()
		o.Handoff = handoff
	case *demo:
		cells, what = matrix.Demo(*nasa), "the demo (a taste of the evaluation matrix)"
	default:
		cells, what = matrix.Default(*nasa), "the evaluation matrix"
	}
	o.Target, o.Percentile, o.Concurrency = slo.Seconds(), pct, *conc
	// Only the first --detail cells' charts are drawn: the others need not
	// hold their series (350 cells held 21.8 GB without this).
	keep := *detail
	o.KeepSeries = func(cell int) bool { return cell < keep }
	declared, err := burst.burst(o.Percentile)
	if err != nil {
		return err
	}
	o.Burst = declared
	if *seeds > 0 {
		cells = matrix.WithSeeds(cells, *seeds)
		what += fmt.Sprintf(", seeds 1–%d in every cell", *seeds)
	}
	if *only != "" {
		var keep []matrix.Cell
		for _, c := range cells {
			if strings.Contains(c.Name(), *only) {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			return cli.Usagef("only", "no cell's name contains %q", *only)
		}
		cells = keep
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	yardsticks := "the yardsticks of each data plane " +
		"(clairvoyant oracle, reactive oracle, lower bound; pooled ones for the KPA, whose activator the simulator models as one pooled queue where Knative splits the pods over at least two activators: a bias in the KPA's favour)"
	if *pooling {
		yardsticks = "four yardsticks: the clairvoyant and the reactive oracle on the cell's data plane (oracle, oracle-reactive), " +
			"oracle-pooled on the ideal pooled queue (one queue, no hop: a bias in the fronts' favour), and oracle-reactive-pooled, the cheaper reactive oracle of the cell's plane and the ideal pooled queue"
	}
	conditions := fmt.Sprintf("%s: %d cells, every one in real time (no compression); policies %s and %s, "+
		"searched over %v s windows with %d bisection steps (sized down to fit 15 minutes on 2 cores: simulate searches 1, 10, 60 and 300 s with 8 steps, "+
		"and the matrix pairs lognormal service with 45 s init and exponential with 2 min, 2 of the 4 combinations); %s ≤ %v, k = %d, %.2g-core pods, at most %d replicas",
		what, len(cells), strings.Join(o.Policies, ", "), yardsticks, o.OracleWindows, o.OracleSteps, matrix.PercentileName(o.Percentile), time.Duration(o.Target*float64(time.Second)), o.Concurrency, o.CPU, o.MaxReplicas)
	if *pooling {
		conditions += "; " + handoffs.describe()
	}
	if o.Burst.Rise != 0 {
		conditions += fmt.Sprintf("; qas told of a rise ×%g that may come every %v without warning (spec.burst)", o.Burst.Rise, o.Burst.Every)
	}
	fmt.Fprintln(env.Stdout, conditions)
	tty, _ := env.Stderr.(*os.File)
	if tty != nil && !isTerminal(tty) {
		tty = nil
	}
	start := time.Now()
	progress := func(done, total int, last *matrix.Result) {
		el := time.Since(start)
		left := time.Duration(float64(el) / float64(done) * float64(total-done)).Round(time.Second)
		if tty != nil {
			fmt.Fprintf(tty, "\r[%-40s] %d/%d cells, %s elapsed, ~%s left ", strings.Repeat("#", 40*done/total), done, total, el.Round(time.Second), left)
			return
		}
		name := "?"
		if last != nil {
			name = last.Name
		}
		fmt.Fprintf(env.Stderr, "evaluate: %d/%d cells (%s), %s elapsed, ~%s left\n", done, total, name, el.Round(time.Second), left)
	}
	rs, err := matrix.RunContext(env.context(), cells, o, *workers, progress)
	if tty != nil {
		fmt.Fprintln(tty)
	}
	if stopped := (*matrix.Stopped)(nil); errors.As(err, &stopped) {
		// A signal: the results are written only whole, so nothing is, and
		// files already there are not this run's.
		return fmt.Errorf("%w; nothing written to %s%s", err, *out, earlierResults(*out))
	}
	if err != nil {
		return err
	}
	wall := time.Since(start)
	w := *workers
	if w == 0 {
		w = defaultWorkers()
	}
	md := matrix.Markdown(rs, o, conditions+fmt.Sprintf(". Wall time %s on %d workers.", wall.Round(time.Second), w))
	if *pooling {
		md += "\n" + matrix.PoolingMarkdown(rs, o.Handoff.Hop)
	}
	// Each file is written under a temporary name and renamed into place once
	// complete, all three only after the run: never a half-written results file.
	files := newAtomicFiles()
	defer files.discard()
	if err := files.write(filepath.Join(*out, "results.md"), func(w io.Writer) error { _, err := io.WriteString(w, md); return err }); err != nil {
		return err
	}
	eo := evaluateOutput{Conditions: conditions, Cells: len(rs), Workers: w, WallSeconds: wall.Seconds(),
		Headline: matrix.Headlines(rs, o), Results: rs}
	if g, ok := matrix.GoalsOf(rs, "qas"); ok {
		eo.Goals = &g
	}
	if *pooling {
		eo.Pooling = matrix.PoolingRows(rs)
	}
	b, err := json.MarshalIndent(eo, "", "  ")
	if err != nil {
		return err
	}
	if err := files.write(filepath.Join(*out, "results.json"), func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
		return err
	}
	var rc []report.Cell
	for _, r := range rs {
		rc = append(rc, report.Cell{Name: r.Name, Conditions: r.Conditions, Rates: r.Rates, Target: o.Target, Percentile: o.Percentile,
			Comparison: r.Comparison})
	}
	if err := files.write(filepath.Join(*out, "report.html"), func(w io.Writer) error {
		return report.WriteMatrix(w, report.MatrixInput{Title: "QAS evaluation", Description: conditions, Cells: rc, Detail: *detail})
	}); err != nil {
		return err
	}
	if err := files.commit(); err != nil {
		return err
	}
	// The headline table on stdout, as in results.md.
	head := md[strings.Index(md, "## Headline"):strings.Index(md, "## Cells")]
	fmt.Fprint(env.Stdout, head)
	fmt.Fprintf(env.Stdout, "wall time %s on %d workers; wrote %s/results.md, results.json and report.html\n", wall.Round(time.Second), w, *out)
	return nil
}

func defaultWorkers() int { return runtime.GOMAXPROCS(0) }

// evaluateFiles are what evaluate writes into its output directory.
var evaluateFiles = []string{"results.md", "results.json", "report.html"}

// earlierResults names, for a message, the result files already in dir: an
// earlier run's, which a stopped run leaves as they were.
func earlierResults(dir string) string {
	var found []string
	for _, name := range evaluateFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s there: from an earlier run)", strings.Join(found, ", "))
}
