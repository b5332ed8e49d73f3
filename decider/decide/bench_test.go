package decide

import (
	"fmt"
	"testing"
	"time"
)

// fullSpec turns every lever on, so one decision does all the work it can.
func fullSpec() Spec {
	s := baseSpec()
	s.Percentile = 95
	s.Target = 400 * time.Millisecond
	s.Vertical = Vertical{Enabled: true, MinCPU: 250, MaxCPU: 2000, PodOverheadCPU: 200}
	s.Migration = Migration{Enabled: true, NodeThreshold: 0.8}
	s.Predictive = Predictive{Enabled: true}
	s.Behavior = Behavior{}
	return s
}

func benchSnapshot(now time.Time, lambda float64) Snapshot {
	s := ramp(now, lambda, lambda/1000, 0.1, 12)
	cpuPods(&s, 12, 500, 2000)
	for i := 0; i < 20; i++ {
		s.InitTimes = append(s.InitTimes, time.Duration(20+i)*time.Second)
	}
	return s
}

func BenchmarkDecide(b *testing.B) {
	spec := fullSpec()
	e := NewEngine()
	i := 0
	for b.Loop() {
		now := t0.Add(time.Duration(i) * 15 * time.Second)
		if _, err := e.Decide(spec, benchSnapshot(now, 150)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDecide10000Workloads decides 10,000 workloads of different loads,
// each with its own Engine, per iteration: the decider's cycle at scale.
func BenchmarkDecide10000Workloads(b *testing.B) {
	const n = 10_000
	spec := fullSpec()
	engines := make([]*Engine, n)
	snaps := make([]Snapshot, n)
	for i := range engines {
		engines[i] = NewEngine()
		snaps[i] = benchSnapshot(t0, 20+float64(i%500))
	}
	cycle := 0
	for b.Loop() {
		now := t0.Add(time.Duration(cycle) * 15 * time.Second)
		for i, e := range engines {
			s := snaps[i]
			s.Now, s.DataTime = now, now
			if _, err := e.Decide(spec, s); err != nil {
				b.Fatal(fmt.Errorf("workload %d: %w", i, err))
			}
		}
		cycle++
	}
}
