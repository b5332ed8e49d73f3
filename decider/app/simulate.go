package app

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/qas-dev/qas/decider/evaluate/policy"
	"github.com/qas-dev/qas/decider/evaluate/report"
	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/decider/evaluate/trace"
	"github.com/qas-dev/qas/internal/cli"
)

// simulateOutput is the JSON contract of `qas-decider simulate --json`.
type simulateOutput struct {
	Trace       string  `json:"trace"`
	Window      string  `json:"window"`
	Scale       float64 `json:"scale"`
	Compression int     `json:"compression"`
	// CompressionMode is "scaled" (every time constant scaled with the
	// trace: simulated as the equivalent real-time system, figures in trace
	// time) or "trace-only" (only the trace runs faster); empty without
	// compression.
	CompressionMode string `json:"compression_mode,omitempty"`
	// Scaling is how the trace's counts were scaled: "counts" or "poisson".
	Scaling string `json:"scaling"`
	// Routing is the data plane: random, leastRequest, pooled, peer or front.
	Routing string `json:"routing"`
	// Conditions is one line saying every condition the figures hold under.
	Conditions  string        `json:"conditions"`
	Seed        uint64        `json:"seed"`
	Description string        `json:"description"`
	SLOSeconds  float64       `json:"slo_seconds"`
	Percentile  float64       `json:"percentile"`
	Service     string        `json:"service"`
	Init        string        `json:"init"`
	Discipline  string        `json:"discipline"`
	Seconds     int           `json:"simulated_seconds"`
	Policies    []sim.Summary `json:"policies"`
	// Oracles tell how each oracle's schedule was found and which routing
	// it used (when oracle or oracle-pooled ran).
	Oracles []sim.OracleSearch `json:"oracles,omitempty"`
	// Seed000 is seed 000's statistic, when predictive-hpa and hpa-cooldown ran.
	Seed000 *sim.Seed000Stat `json:"seed000,omitempty"`
	// OnsetBound is what the run's largest unforeseeable rise costs any
	// policy that does not know the future (sim.OnsetBound); absent for a
	// mean target or a run shorter than a lead.
	OnsetBound *sim.OnsetBound `json:"onset_bound,omitempty"`
}

func runSimulate(args []string, env Env) error {
	fs := flag.NewFlagSet("qas-decider simulate", flag.ContinueOnError)
	fs.SetOutput(env.Stdout) // --help, as for model and run
	src := fs.String("trace", "", "trace file (.gz or plain) or "+strings.Join(trace.PatternNames(), " | ")+" (required)")
	win := fs.String("window", "", "part of the trace, in trace time, e.g. 2h:8h")
	history := fs.Duration("history", 0, "give qas this much of the trace before --window as the workload's past, as InfluxDB would hold it for a decider that has run a while (0: a cold start; the other policies read no history)")
	scale := fs.Float64("scale", 1, "multiply the trace's rates")
	scaling := fs.String("scaling", "counts", "how --scale applies: counts (each second's count × scale: a logged request becomes a correlated batch) or poisson (Poisson arrivals at scale × the count's centred mean over --poisson-window)")
	poissonWindow := fs.Duration("poisson-window", time.Minute, "with --scaling poisson, the centred window the trace's counts are averaged over")
	compress := fs.Int("compress", 1, "trace seconds per simulated second")
	compressMode := fs.String("compress-mode", "scaled", "with --compress N > 1: scaled (init times, periods and windows scale with the trace: simulated as the same system in trace time) or trace-only (only the trace runs faster, which favours some policies)")
	routingFlag := fs.String("routing", "random", "data plane in front of the pods: random (a Service), leastRequest (Envoy's two-choice least request), pooled (an activator's queue for every policy), peer (random, and a proxy with full slots hands a request to a peer advertising a free slot), front (a capacity-aware front in the path while spare capacity is short) or overflow (a full sidecar sends the request to a shared front, free pods pull from it; docs/pooling.md); the kpa is pooled while its activator is in the path")
	slo := fs.Duration("slo", 0, "latency target, e.g. 200ms (required)")
	pctFlag := fs.String("percentile", "95", "latency percentile the target applies to, in (0,100), or mean (seed 003's mean-latency target)")
	svc := fs.String("service", "lognormal:50ms,cv=1.5", "service-time distribution: exp:D, lognormal:D,cv=X, bimodal:D1,D2,p=X, const:D")
	initD := fs.String("init", "30s", "pod init-time distribution (same syntax)")
	pols := fs.String("policies", "qas,hpa,kpa,yardsticks", "comma-separated policies: "+strings.Join(policy.Names(), ", ")+
		"; the yardsticks: oracle (clairvoyant) and oracle-reactive (knows the present only) are the cheapest schedules that meet the SLO on the run's data plane (--routing), "+
		"lower-bound the pod-seconds of sizing each second at its true rate with no init cost; the -pooled ones may also use a pooled queue (an activator), the kpa's yardsticks; yardsticks lists all six")
	seed := fs.Uint64("seed", 1, "random seed")
	conc := fs.Int("concurrency", 1, "requests one pod serves at once, k")
	sharing := fs.Bool("sharing", false, "processor sharing: a pod's up to --concurrency requests share its CPU request at once (a request alone runs at full speed on --busy-cpu cores, default min(1, --cpu)), instead of k slots served first come first served")
	cpu := fs.Float64("cpu", 0.5, "CPU request per pod, cores")
	maxR := fs.Int("max-replicas", 200, "most replicas any policy may use")
	initial := fs.Int("initial-replicas", 0, "Ready replicas at the start; 0 means as many as the oracle needs over the first init time")
	busyCPU := fs.Float64("busy-cpu", 0, "cores one busy request slot uses (0: --cpu / --concurrency; with --sharing, cores one request uses at full speed, 0: min(1, --cpu))")
	vertical := fs.Bool("vertical", false, "let qas resize pods' CPU in place (service time scales by --cpu-bound)")
	minCPU := fs.Float64("min-cpu", 0.1, "smallest CPU request qas may set, cores (with --vertical)")
	maxCPU := fs.Float64("max-cpu", 2, "largest CPU request qas may set, cores (with --vertical)")
	cpuBound := fs.Float64("cpu-bound", 0, "share of the service time that scales with the CPU request, in [0,1]")
	theta := fs.Float64("theta", 0.1, "QAS tolerance θ: no horizontal change while latency/target is within [1−θ, 1+θ]")
	cpuTarget := fs.Float64("cpu-target", 0.7, "CPU utilisation target of hpa, hpa-nocooldown, hpa-cooldown and predictive-hpa, in (0,1]")
	burst := addBurstFlags(fs, "qas")
	handoffs := addHandoffFlags(fs, "with --routing peer, front or overflow")
	alg1Period := fs.Duration("alg1-period", time.Duration(policy.Alg1Period)*time.Second, "scaling period of seed 004's alg1 (its Table 4.1: 2m; Table 4.6 tries 1m to 5m)")
	nodes := fs.Int("nodes", 0, "nodes to place pods on (0: unlimited capacity, no contention)")
	nodeCPU := fs.Float64("node-cpu", 4, "cores per node (with --nodes)")
	background := fs.String("background", "0", "cores of other work wanting to run on each node (with --nodes): one value for all, or one per node, comma-separated; above --node-cpu a node is oversubscribed (hot)")
	migration := fs.Bool("migration", false, "let qas move a pod slowed on a hot node to a cooler one (surge a replacement, then remove the pod; needs --nodes)")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	htmlOut := fs.String("report", "", "write an HTML report to this file")
	if err := cli.Parse(fs, "QAS_SIMULATE", args, env.Getenv); err != nil {
		return err
	}
	if *src == "" {
		return cli.Usagef("trace", "is required")
	}
	if *slo <= 0 {
		return cli.Usagef("slo", "must be a positive duration such as 200ms")
	}
	pctV, err := parsePercentile(*pctFlag)
	if err != nil {
		return err
	}
	pct := &pctV
	routing, err := sim.ParseRouting(*routingFlag)
	if err != nil {
		return cli.Usagef("routing", "%v", err)
	}
	handoff, err := handoffs.handoff()
	if err != nil {
		return err
	}
	if *scaling != "counts" && *scaling != "poisson" {
		return cli.Usagef("scaling", "must be counts or poisson, got %q", *scaling)
	}
	if *scaling == "poisson" && *poissonWindow < time.Second {
		return cli.Usagef("poisson-window", "must be at least 1s, got %v", *poissonWindow)
	}
	if *compressMode != "scaled" && *compressMode != "trace-only" {
		return cli.Usagef("compress-mode", "must be scaled or trace-only, got %q", *compressMode)
	}
	if !(*scale > 0) {
		return cli.Usagef("scale", "must be positive, got %v", *scale)
	}
	if *compress < 1 {
		return cli.Usagef("compress", "must be at least 1, got %d", *compress)
	}
	if *conc < 1 {
		return cli.Usagef("concurrency", "must be at least 1")
	}
	if *sharing && *conc < 2 {
		return cli.Usagef("concurrency", "with --sharing it is the most requests a pod serves at once and must be at least 2 (1 is first come first served)")
	}
	if !(*cpu > 0) {
		return cli.Usagef("cpu", "must be positive cores")
	}
	if *maxR < 1 {
		return cli.Usagef("max-replicas", "must be at least 1")
	}
	if *initial < 0 || *initial > *maxR {
		return cli.Usagef("initial-replicas", "must be in [0, --max-replicas]")
	}
	if *busyCPU < 0 {
		return cli.Usagef("busy-cpu", "must not be negative")
	}
	if !(*cpuBound >= 0 && *cpuBound <= 1) {
		return cli.Usagef("cpu-bound", "must be in [0,1], got %v", *cpuBound)
	}
	if *vertical && *nodes == 0 {
		return cli.Usagef("vertical", "needs --nodes: the decision engine resizes only when it can see room on each pod's node")
	}
	if *vertical && !(*minCPU > 0 && *minCPU <= *cpu && *cpu <= *maxCPU) {
		return cli.Usagef("min-cpu", "need 0 < --min-cpu ≤ --cpu ≤ --max-cpu")
	}
	if !(*theta > 0 && *theta < 1) {
		return cli.Usagef("theta", "must be in (0,1), got %v", *theta)
	}
	if !(*cpuTarget > 0 && *cpuTarget <= 1) {
		return cli.Usagef("cpu-target", "must be in (0,1], got %v", *cpuTarget)
	}
	if *nodes < 0 {
		return cli.Usagef("nodes", "must not be negative")
	}
	if *nodes > 0 && !(*nodeCPU >= *cpu) {
		return cli.Usagef("node-cpu", "must hold at least one pod's --cpu")
	}
	backgrounds, err := parseBackgrounds(*background, *nodes)
	if err != nil {
		return cli.Usagef("background", "%v", err)
	}
	if *nodes == 0 {
		backgrounds = nil
	}
	if *migration && *nodes == 0 {
		return cli.Usagef("migration", "needs --nodes: pods move between nodes")
	}
	w, err := trace.ParseWindow(*win)
	if err != nil {
		return cli.Usagef("window", "%v", err)
	}
	service, err := sim.ParseDist(*svc)
	if err != nil {
		return cli.Usagef("service", "%v", err)
	}
	initDist, err := sim.ParseDist(*initD)
	if err != nil {
		return cli.Usagef("init", "%v", err)
	}
	declared, err := burst.burst(*pct)
	if err != nil {
		return err
	}
	if *alg1Period < time.Second {
		return cli.Usagef("alg1-period", "must be at least 1s, got %v", *alg1Period)
	}
	params := policy.Params{Target: slo.Seconds(), Percentile: *pct, Concurrency: *conc, CPU: *cpu, MinReplicas: 1, MaxReplicas: *maxR,
		Tolerance: *theta, CPUTarget: *cpuTarget, Vertical: *vertical, Migration: *migration, MinCPU: *minCPU, MaxCPU: *maxCPU,
		CPUBound: *cpuBound, Alg1Period: alg1Period.Seconds(), Burst: declared}
	names, err := parsePolicies(*pols, params)
	if err != nil {
		return cli.Usagef("policies", "%v", err)
	}
	smooth := 0
	if *scaling == "poisson" {
		smooth = int(poissonWindow.Seconds())
	}
	if *history < 0 {
		return cli.Usagef("history", "must not be negative, got %s", *history)
	}
	if *history > 0 && w.Start == 0 {
		return cli.Usagef("history", "needs a --window that starts after the trace's first second: the history is the trace before it")
	}
	opts := trace.Options{Source: *src, Window: w, Scale: *scale, Compress: *compress, Smooth: smooth, Seed: *seed, History: *history}
	target := slo.Seconds()
	mode := ""
	timeNote := "real time"
	if *compress > 1 {
		mode = *compressMode
		if mode == "scaled" {
			// Compressing the trace N× with every time constant (init times,
			// sync periods, windows) scaled by 1/N is the same system as the
			// real-time trace at scale/N with service times and the target
			// ×N, in trace time: simulated that way, so no policy constant
			// needs rewriting and none is left behind.
			n := float64(*compress)
			opts.Scale, opts.Compress = *scale/n, 1
			service = service.Scaled(n)
			target *= n
			timeNote = fmt.Sprintf("compression %d× with init times, periods and windows scaled with it, simulated as the same system in trace time: scale ×%g, service %s, target %s; every time below (latencies, pod-seconds) is in trace time, %d× the compressed run's",
				*compress, opts.Scale, service, time.Duration(target*float64(time.Second)), *compress)
		} else {
			timeNote = fmt.Sprintf("compression %d× of the trace only: init times, sync periods and windows stay in simulated seconds, which favours some policies (DESIGN §6: qas 1.10× the oracle compressed, 1.54× in real time)", *compress)
		}
	}
	params.Target = target
	prof, err := trace.Load(opts)
	if err != nil {
		if strings.HasPrefix(*src, "pattern:") {
			return cli.Usagef("trace", "%v", err)
		}
		return err
	}
	params.History = prof.History
	cfg := sim.Config{Rates: prof.Rates, Service: service, Init: initDist, Concurrency: *conc, CPU: *cpu,
		Target: target, Percentile: *pct, InitialReplicas: *initial, Seed: *seed, Routing: routing, Handoff: handoff,
		Nodes: *nodes, NodeCPU: *nodeCPU, Backgrounds: backgrounds, Sharing: *sharing, BusyCPU: *busyCPU, CPUBound: *cpuBound,
		Context: env.context()}
	pctName := "p" + strconv.FormatFloat(*pct, 'g', -1, 64)
	if *pct == 0 {
		pctName = "mean"
	}
	conditions := fmt.Sprintf("%s; %s; routing %s; %s ≤ %s; service %s; init %s; k = %d; seed %d",
		prof.Description, timeNote, routing, pctName, time.Duration(target*float64(time.Second)), service, initDist, *conc, *seed)
	if routing.HandsOff() {
		conditions += "; " + handoffs.describe()
	}
	fmt.Fprintf(env.Stdout, "trace: %s\n", prof.Description)
	fmt.Fprintf(env.Stdout, "conditions: %s\n", conditions)
	var progress func(string, int, int)
	if f, ok := env.Stderr.(*os.File); ok && isTerminal(f) {
		progress = func(name string, s, t int) {
			fmt.Fprintf(f, "\r%-14s [%-40s] %3d%%", name, strings.Repeat("#", 40*s/max(t, 1)), 100*s/max(t, 1))
		}
	}
	start := time.Now()
	cmp, err := sim.Compare(cfg, names, params, progress)
	if progress != nil {
		fmt.Fprintf(env.Stderr, "\r%s\r", strings.Repeat(" ", 70))
	}
	if err != nil && env.context().Err() != nil {
		// A signal: no table, and no --json or --html file (they are written only whole).
		return fmt.Errorf("%w; nothing written", err)
	}
	if err != nil {
		return cli.Usagef("policies", "%v", err)
	}
	fmt.Fprint(env.Stdout, sim.Table(cmp.Summaries))
	printOracles(env.Stdout, cmp.Oracles)
	if st := cmp.Seed000; st != nil {
		fmt.Fprintf(env.Stdout, "seed 000 statistic (%s − %s, %d minutes): mean %.3f, std_dev %.3f, z %.3f, one-sided p %.3f\n",
			st.Predictive, st.Reactive, st.Minutes, st.Mean, st.StdDev, st.Z, st.P)
	}
	var bound *sim.OnsetBound
	if *pct > 0 {
		b, err := sim.FindOnsetBound(cfg, prof.History, cmp.Capacity, max(*maxR, 1))
		switch {
		case err == nil:
			bound = &b
			fmt.Fprintf(env.Stdout, "onset bound: %s\n", b.Sentence())
		case !errors.Is(err, sim.ErrShortRun):
			return err
		}
	}
	total := 0
	for _, s := range cmp.Summaries {
		total += s.Requests
	}
	fmt.Fprintf(env.Stdout, "simulated %d requests in %s\n", total, time.Since(start).Round(time.Millisecond))
	out := simulateOutput{Trace: *src, Window: *win, Scale: *scale, Compression: *compress, CompressionMode: mode, Scaling: *scaling,
		Routing: routing.String(), Conditions: conditions, Seed: *seed,
		Description: prof.Description, SLOSeconds: target, Percentile: *pct, Service: service.String(),
		Init: initDist.String(), Discipline: discipline(*sharing), Seconds: len(prof.Rates), Policies: cmp.Summaries,
		Oracles: cmp.Oracles, Seed000: cmp.Seed000, OnsetBound: bound}
	files := newAtomicFiles() // written whole or not at all
	defer files.discard()
	if *jsonOut != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		if err := files.write(*jsonOut, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
			return err
		}
	}
	if *htmlOut != "" {
		if err := files.write(*htmlOut, func(w io.Writer) error {
			return report.Write(w, report.Input{Title: "QAS simulation", Description: conditions,
				Rates: prof.Rates, Target: target, Percentile: *pct, Comparison: cmp})
		}); err != nil {
			return err
		}
	}
	return files.commit()
}

// printOracles says, under the table, how each yardstick's schedule was
// found and through which data plane.
func printOracles(w io.Writer, oracles []sim.OracleSearch) {
	for _, o := range oracles {
		verdict := "meets"
		if !o.Met {
			verdict = "cannot meet (no schedule tried did; this one misses least)"
		}
		kind, window := "clairvoyant", "centred"
		switch {
		case o.Reactive:
			kind, window = "reactive (knows the present rate, not the future)", "trailing"
		case o.ZeroInit:
			kind = "lower bound (clairvoyant, pods Ready at once)"
		}
		fmt.Fprintf(w, "%s: %s, the cheapest of %d simulated schedules that %s the SLO, routed %s: %.3f × the true rate's %d s %s mean\n",
			o.Policy, kind, o.Runs, verdict, o.Routing, o.Headroom, o.Window, window)
	}
}

// parsePolicies reads --policies: comma-separated names, spaces around them
// ignored, each known to policy.New and given once.
func parsePolicies(v string, params policy.Params) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("%q has an empty name: want names separated by single commas", v)
		}
		if seen[n] {
			return nil, fmt.Errorf("%q is listed twice: each policy runs once", n)
		}
		seen[n] = true
		if policy.IsYardstick(n) || n == policy.YardsticksName {
			names = append(names, n)
			continue
		}
		if _, err := policy.New(n, params, policy.Future{}); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, nil
}

func discipline(sharing bool) string {
	if sharing {
		return "processor-sharing"
	}
	return "slots-fcfs"
}

// parseBackgrounds reads --background: one value for every node or one per node.
func parseBackgrounds(v string, nodes int) ([]float64, error) {
	parts := strings.Split(v, ",")
	if nodes == 0 {
		nodes = 1
	}
	if len(parts) != 1 && len(parts) != nodes {
		return nil, fmt.Errorf("want one value or one per node (%d), got %d", nodes, len(parts))
	}
	out := make([]float64, nodes)
	for i := range out {
		s := strings.TrimSpace(parts[min(i, len(parts)-1)])
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q is not a non-negative number of cores", s)
		}
		out[i] = x
	}
	return out, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parsePercentile reads --percentile: a percentile in (0,100), or mean (0).
func parsePercentile(s string) (float64, error) {
	if s == "mean" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0 && v < 100) {
		return 0, cli.Usagef("percentile", "must be in (0,100) or mean, got %q", s)
	}
	return v, nil
}
