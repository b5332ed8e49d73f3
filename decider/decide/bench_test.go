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
// BenchmarkDecideBatchArrivals is BenchmarkDecide with the per-second rate
// varying (cv² 2.5): every latency is averaged over the rate mixture's bins.
// Its ratio to BenchmarkDecide is the mixture's cost per decision.
func BenchmarkDecideBatchArrivals(b *testing.B) {
	spec := fullSpec()
	e := NewEngine()
	i := 0
	for b.Loop() {
		now := t0.Add(time.Duration(i) * 15 * time.Second)
		s := benchSnapshot(now, 150)
		s.RateCV2, s.RateCV2Pairs = 2.5, 15
		d, err := e.Decide(spec, s)
		if err != nil {
			b.Fatal(err)
		}
		if d.Explanation.RateCV2 == 0 {
			b.Fatal("the mixture was not used")
		}
		i++
	}
}

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

// BenchmarkScaleDownOverJumps is the costliest decision issue #15 added: a
// scale-down for 300 pods over an hour of λ history (240 jump ratios, the
// controller's window until 2026-11-29) and over six hours (1,440, its window
// since, measurement.DefaultWindow). "cold" is 8 minutes that started at
// twice the rate: fewer than the 20 leads a p95 quantile needs, so the margin
// also prices the rate the history started at (noRiseRatio, coldStart).
// Compare their ns/op in the same run.
func BenchmarkScaleDownOverJumps(b *testing.B) {
	spec := Spec{MinReplicas: 1, MaxReplicas: 500, Target: 250 * time.Millisecond, Percentile: 95, Tolerance: 0.1,
		Concurrency: 1, Behavior: Behavior{ScaleDown: &ScalingRules{}}}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		span  time.Duration
		start float64 // the rate over the history's first lead (0: the pattern's)
	}{{"1h0m0s", time.Hour, 0}, {"6h0m0s", 6 * time.Hour, 0}, {"cold", 8 * time.Minute, 3200}} {
		b.Run(c.name, func(b *testing.B) {
			s := Snapshot{Now: now, ServiceTime: 0.04, CurrentReplicas: 300, ReadyReplicas: 300, Complete: true, DataTime: now}
			first := now.Add(-c.span)
			for i := int(c.span / (15 * time.Second)); i >= 0; i-- {
				at := now.Add(-time.Duration(i) * 15 * time.Second)
				rate := 1000 + 200*float64(i%7)
				if c.start > 0 && at.Sub(first) <= DefaultLead {
					rate = c.start
				}
				s.ArrivalRates = append(s.ArrivalRates, Sample{Time: at, Rate: rate})
			}
			cold := c.start > 0
			b.ReportAllocs()
			for b.Loop() {
				d, err := NewEngine().Decide(spec, s)
				x := d.Explanation
				if err != nil || (x.JumpRatio == 0) != cold || (c.span > RecentHistory) != (x.RecentJumps > 0) ||
					cold != (x.UnseenRiseRatio > 0 && x.JumpRatioMax > 1) || x.DownJumpPeakHeld == cold {
					b.Fatal(err, x.Reason)
				}
			}
		})
	}
}

// BenchmarkRateMixture builds the rate mixture's bins, as every decision with
// batch arrivals does, at the smallest cv² that uses it (the most points of N)
// and at a batch trace's.
func BenchmarkRateMixture(b *testing.B) {
	for _, cv2 := range []float64{mixMinCV2, 2.5} {
		b.Run(fmt.Sprint(cv2), func(b *testing.B) {
			for b.Loop() {
				if rateMixture(cv2) == nil {
					b.Fatal("no bins")
				}
			}
		})
	}
}
