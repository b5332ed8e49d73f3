package queueing

import (
	"fmt"
	"math"
	"testing"
)

// BenchmarkErlangCAndPercentile is one model evaluation as a decision uses it:
// Erlang C (through the B recursion) plus a p95 solve, at ρ = 0.9.
func BenchmarkErlangCAndPercentile(b *testing.B) {
	for _, c := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			l := Load{ArrivalRate: 0.9 * float64(c) / 0.1, ServiceTime: 0.1}
			for b.Loop() {
				m, err := l.At(c)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.LatencyPercentile(95); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMinServers is the search for the fewest servers meeting a p95
// target 0.1 % above the latency floor, so that the exponential and binary
// search both run.
func BenchmarkMinServers(b *testing.B) {
	for _, c := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("c≈%d", c), func(b *testing.B) {
			l := Load{ArrivalRate: 0.9 * float64(c) / 0.1, ServiceTime: 0.1}
			for b.Loop() {
				if _, err := l.MinServers(1.001*-math.Log(0.05)*0.1, 95); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
