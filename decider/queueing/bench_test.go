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

// BenchmarkCalibratedPercentile is the p95 of one M/G/1 pod at ρ = 0.3 with
// exponential service, from the closed form and from the calibrated tail with
// eight exponential quantiles (the same answer), and with a lognormal cv 1.2
// shape: the calibrated tail's cost over the closed form's, in the same run.
func BenchmarkCalibratedPercentile(b *testing.B) {
	exp, err := NewServiceShape(expQuantiles(0.05, 50, 75, 90, 95, 97.5, 99, 99.5, 99.9), 0.05)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := NewServiceShape(newLognormal(0.05, 1.2).quantiles(50, 75, 90, 95, 97.5, 99, 99.5, 99.9), 0.05)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		shape *ServiceShape
	}{{"closed form", nil}, {"exponential quantiles", exp}, {"lognormal quantiles", ln}} {
		b.Run(tc.name, func(b *testing.B) {
			l := Load{ArrivalRate: 6, ServiceTime: 0.05, AllenCunneen: true, ArrivalSCV: 1, ServiceSCV: 1.44, Shape: tc.shape}
			for b.Loop() {
				m, err := l.At(1)
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
