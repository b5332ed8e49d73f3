package sim

import (
	"testing"
	"time"

	"github.com/qas-dev/qas/decider/policy"
)

// BenchmarkSimulate reports simulated requests per second of wall time, for a
// static policy (the simulator alone) and for qas and hpa (with their decision
// costs, and kpa), on 600 simulated seconds at 2,000 requests per second.
func BenchmarkSimulate(b *testing.B) {
	svc, _ := ParseDist("lognormal:20ms,cv=1.5")
	init, _ := ParseDist("30s")
	p := policy.Params{Target: 0.1, Percentile: 95, Concurrency: 4, CPU: 1, MinReplicas: 1, MaxReplicas: 500}
	for _, name := range []string{"static:20", "qas", "hpa", "kpa"} {
		b.Run(name, func(b *testing.B) {
			cfg := Config{Rates: constRates(2000, 600), Service: svc, Init: init, Concurrency: 4, CPU: 1,
				Target: 0.1, Percentile: 95, InitialReplicas: 20, Seed: 1}
			requests := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				pol, err := policy.New(name, p, policy.Future{})
				if err != nil {
					b.Fatal(err)
				}
				requests += Run(cfg, pol).Requests
			}
			b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "requests/s")
		})
	}
}
