package sim

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

func TestNodes(t *testing.T) {
	svc := mustDist(t, "exp:100ms")
	init := mustDist(t, "10s")
	base := Config{Rates: constRates(30, 600), Service: svc, Init: init, Concurrency: 2, CPU: 1, Target: 0.5, Percentile: 95,
		InitialReplicas: 4, Seed: 2, Nodes: 2, NodeCPU: 4}
	for _, tc := range []struct {
		name       string
		background float64
		nodes      int
		nodeCPU    float64
		static     int
		wantReady  int
		slower     bool
	}{
		{name: "room and no other work: no contention", nodes: 2, nodeCPU: 4, static: 4, wantReady: 4},
		{name: "busy neighbours stretch service times", background: 3.5, nodes: 2, nodeCPU: 4, static: 4, wantReady: 4, slower: true},
		{name: "pods beyond the nodes' room stay Pending", nodes: 1, nodeCPU: 2, static: 6, wantReady: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Background, cfg.Nodes, cfg.NodeCPU = tc.background, tc.nodes, tc.nodeCPU
			cfg.InitialReplicas = min(tc.static, 2)
			r := Run(cfg, policy.Static{N: tc.static})
			require.Equal(t, tc.wantReady, r.Ready[len(r.Ready)-1])
			free := base
			free.Nodes = 0
			free.InitialReplicas = cfg.InitialReplicas
			ref := Run(free, policy.Static{N: tc.static})
			if tc.slower {
				require.Greater(t, r.MeanLatency, 1.3*ref.MeanLatency, "contended %.3f s vs free %.3f s", r.MeanLatency, ref.MeanLatency)
			} else if tc.wantReady == tc.static {
				require.Equal(t, ref.Requests, r.Requests, "without contention the node model changes nothing")
				require.InDelta(t, ref.MeanLatency, r.MeanLatency, 1e-12)
			}
		})
	}
}

// resizer asks for a CPU request per pod from a given time on.
type resizer struct {
	at, cpu float64
}

func (r resizer) Name() string    { return "resizer" }
func (r resizer) Period() float64 { return 1 }
func (r resizer) Decide(o *policy.Observation) policy.Decision {
	d := policy.Decision{Replicas: 2}
	if o.Now >= r.at {
		d.CPU = r.cpu
	}
	return d
}

func TestVerticalResizeChangesServiceRate(t *testing.T) {
	svc := mustDist(t, "const:100ms")
	init := mustDist(t, "1s")
	for _, tc := range []struct {
		name     string
		cpuBound float64
		newCPU   float64
		want     float64 // mean service time after the resize
	}{
		{name: "fully CPU-bound, double CPU: half the time", cpuBound: 1, newCPU: 2, want: 0.05},
		{name: "half CPU-bound, double CPU: three quarters", cpuBound: 0.5, newCPU: 2, want: 0.075},
		{name: "not CPU-bound: unchanged", cpuBound: 0, newCPU: 2, want: 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Rates: constRates(2, 200), Service: svc, Init: init, Concurrency: 1, CPU: 1, CPUBound: tc.cpuBound,
				Target: 1, Percentile: 95, InitialReplicas: 2, Seed: 4}
			r := Run(cfg, resizer{at: 100, cpu: tc.newCPU})
			var n int
			var sum float64
			for _, s := range r.Seconds()[110:] {
				n += s.Completions
				sum += s.ServiceSum
			}
			require.InDelta(t, tc.want, sum/float64(n), 1e-9)
			require.Equal(t, 1, r.Resizes)
			// CPU requested: 2 pods × 1 core for ~100 s, then 2 × newCPU.
			require.InDelta(t, 2*100+2*tc.newCPU*100, r.CPURequested, 2*tc.newCPU+2)
		})
	}
}

// TestMigrationOffHotNode: node-0 runs other work wanting 8 of its 4 cores, so
// the workload's pods placed there serve 2–3× slower. qas with migration moves
// them (surge a replacement on a cool node, remove the old pod once it is
// Ready); without migration they stay, and their requests stay slow. Six
// seeds, compared in total: one run's trajectory turns on where a scale-up's
// pods land (seed 5 with migration cost 10,665 pod-seconds until the count
// dispersion lost its bias, 2026-11-29, and 14,317 since, as one scale-up
// landed on the hot node), and both runs aim at the same budget.
func TestMigrationOffHotNode(t *testing.T) {
	svc := mustDist(t, "exp:100ms")
	init := mustDist(t, "lognormal:20s,cv=0.3")
	p := policy.Params{Target: 0.5, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 30}
	run := func(seed uint64, migrate bool) *Result {
		cfg := Config{Rates: constRates(20, 1200), Service: svc, Init: init, Concurrency: 1, CPU: 0.5,
			Target: 0.5, Percentile: 95, InitialReplicas: 6, Seed: seed, Nodes: 3, NodeCPU: 8, Backgrounds: []float64{13, 0, 0}}
		pp := p
		pp.Migration = migrate
		return Run(cfg, policy.NewQAS("qas", pp, true))
	}
	type totals struct {
		requests, late, hot, completions, pods int
		service                                float64 // seconds, summed over the completions
	}
	var sum [2]totals // off, on
	var on *Result    // seed 5's, whose moves are checked below
	for seed := uint64(1); seed <= 6; seed++ {
		for i, migrate := range []bool{false, true} {
			r := run(seed, migrate)
			if migrate && seed == 5 {
				on = r
			}
			if migrate {
				require.GreaterOrEqual(t, r.Migrations, 2, "seed %d: migrations carried out with migration on", seed)
			} else {
				require.Zero(t, r.Migrations, "seed %d: none with migration off", seed)
			}
			sum[i].requests += r.Requests
			sum[i].late += r.OverTarget
			sum[i].hot += r.NodeServed[0]
			sum[i].pods += int(r.PodSeconds)
			for _, s := range r.Seconds() {
				sum[i].completions += s.Completions
				sum[i].service += s.ServiceSum
			}
		}
	}
	off, onSum := sum[0], sum[1]
	share := func(x totals) float64 { return float64(x.hot) / float64(x.requests) }
	late := func(x totals) float64 { return 100 * float64(x.late) / float64(x.requests) }
	service := func(x totals) float64 { return x.service / float64(x.completions) }
	t.Logf("six seeds, off: %.2f%% over target, service %.1f ms, hot-node share %.2f, pod-s %d; on: %.2f%%, %.1f ms, %.2f, %d",
		late(off), 1000*service(off), share(off), off.pods, late(onSum), 1000*service(onSum), share(onSum), onSum.pods)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		// A quarter fewer, not half: since issue #15 qas decides every 5 s and
		// scales more often, and the scheduler (LeastAllocated) puts some new
		// pods on the hot node, emptied of ours, before they are moved off.
		// (With the transient budget, which kept more pods, 0.34 → 0.19 in 11
		// moves; without it, since the second round, 0.36 → 0.24 in 7, with
		// 24 % fewer pod-seconds and the lower latency checked below; since
		// the move's E[S] is the pooled one scaled, 0.33 → 0.15 in 11, with 26 %
		// fewer: sized with the not-slowed pods' raw means of one interval, a
		// spike ordered a scale-up whose pods landed on the hot node, and the
		// share stayed at 0.30.)
		{name: "fewer requests served on the hot node", ok: share(onSum) < share(off)*3/4},
		// Requests are served faster (fewer on the slowed node). The engine
		// turns that into fewer pods at the same target, and fewer requests
		// over it.
		{name: "shorter mean service time", ok: service(onSum) < service(off)},
		{name: "fewer requests over the target", ok: late(onSum) < late(off)},
		// Without migration the engine sizes for the slowed pods' inflated E[S].
		{name: "fewer pod-seconds", ok: onSum.pods < off.pods},
	} {
		require.True(t, tc.ok, tc.name)
	}
	// The engine hears of each move's end, as from the controller. The own mover
	// moves the next slowed pod at once when the last move reduced the
	// workload's pods on its node; otherwise (a scale-up landed there, or the
	// move did not complete) it cools down for the default 5 min.
	atOnce := 0
	for i := 1; i < len(on.Moves); i++ {
		prev, next := on.Moves[i-1], on.Moves[i]
		gap := next.Start - prev.End
		progress := prev.Moved && next.PodsOnNodes[prev.From] < prev.PodsOnNodes[prev.From]
		if gap < 300 {
			require.True(t, progress, "move %d followed move %d after %.0f s, but the workload's pods on node %d went %d → %d: %+v",
				i, i-1, gap, prev.From, prev.PodsOnNodes[prev.From], next.PodsOnNodes[prev.From], on.Moves)
			atOnce++
		}
	}
	require.Positive(t, atOnce, "moves that make progress follow at once: %+v", on.Moves)
}

// mover asks once, at 10 s, to move pod 0 to node 1 and, with abandon, scales
// to one pod at 20 s, before the replacement is Ready; it records the ends the
// simulator reports.
type mover struct {
	abandon bool
	asked   bool
	ends    []string
}

func (*mover) Name() string    { return "mover" }
func (*mover) Period() float64 { return 5 }
func (m *mover) Decide(o *policy.Observation) policy.Decision {
	d := policy.Decision{Replicas: 2}
	if o.Now >= 10 && !m.asked {
		m.asked = true
		d.Migrate = &policy.Move{Pod: 0, ToNode: 1}
	}
	if m.abandon && o.Now >= 20 {
		d.Replicas = 1
	}
	return d
}

func (m *mover) MigrationEnded(mv policy.Move, from int, now float64, moved bool) {
	m.ends = append(m.ends, fmt.Sprintf("pod %d off node %d at %.0f s, moved %v", mv.Pod, from, now, moved))
}

// TestMigrationEndsAreReported: the policy hears of each move's end with the
// Move it asked for and the node the pod left, also when a scale-down removes
// the pod being moved (and its replacement) first, which is no completed move;
// the result records each move, with the workload's pods per node when it was
// asked for.
func TestMigrationEndsAreReported(t *testing.T) {
	cfg := Config{Rates: constRates(0, 120), Service: mustDist(t, "exp:100ms"), Init: mustDist(t, "30s"), Concurrency: 1, CPU: 1, Target: 0.5, Percentile: 95,
		InitialReplicas: 2, Seed: 1, Nodes: 2, NodeCPU: 4}
	for _, tc := range []struct {
		name       string
		abandon    bool
		end        string
		endAt      float64
		moved      bool
		migrations int
	}{
		{name: "the replacement takes over", end: "pod 0 off node 0 at 40 s, moved true", endAt: 40, moved: true, migrations: 1},
		{name: "a scale-down removes the pod first", abandon: true, end: "pod 0 off node 0 at 20 s, moved false", endAt: 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mover{abandon: tc.abandon}
			r := Run(cfg, m)
			require.Equal(t, []string{tc.end}, m.ends)
			require.Equal(t, tc.migrations, r.Migrations)
			require.Len(t, r.Moves, 1)
			require.Equal(t, MoveRecord{Start: 10, End: tc.endAt, From: 0, To: 1, Moved: tc.moved, PodsOnNodes: []int{1, 1}}, r.Moves[0])
		})
	}
}
