package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// BenchmarkSimulate reports simulated requests per second of wall time, for a
// static policy (the simulator alone), for qas, hpa and kpa (with their
// decision costs), and for the static policy with processor sharing, on 600
// simulated seconds at 2,000 requests per second.
func BenchmarkSimulate(b *testing.B) {
	svc := mustDist(b, "lognormal:20ms,cv=1.5")
	init := mustDist(b, "30s")
	p := policy.Params{Target: 0.1, Percentile: 95, Concurrency: 4, CPU: 1, MinReplicas: 1, MaxReplicas: 500}
	for _, tc := range []struct {
		name    string
		sharing bool
	}{{"static:20", false}, {"qas", false}, {"hpa", false}, {"kpa", false}, {"static:20", true}} {
		name := tc.name
		label := name
		if tc.sharing {
			label += "/processor-sharing"
		}
		b.Run(label, func(b *testing.B) {
			cfg := Config{Rates: constRates(2000, 600), Service: svc, Init: init, Concurrency: 4, CPU: 1,
				Target: 0.1, Percentile: 95, InitialReplicas: 20, Seed: 1, Sharing: tc.sharing, BusyCPU: 0.25}
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

// BenchmarkOracleSearch reports the oracle search's cost: the simulated
// requests of all its runs per second of wall time, and the runs per search,
// on 600 simulated seconds of a sine load around 200 requests per second;
// for the oracle alone (Service routing) and with oracle-pooled too (the
// activator's runs added).
func BenchmarkOracleSearch(b *testing.B) {
	svc := mustDist(b, "lognormal:20ms,cv=1.5")
	init := mustDist(b, "30s")
	rates := sineRates(200, 100, 60, 600)
	cfg := Config{Rates: rates, Service: svc, Init: init, Concurrency: 4, CPU: 1, Target: 0.1, Percentile: 95, Seed: 1}
	p := policy.Params{Target: 0.1, Percentile: 95, Concurrency: 4, CPU: 1, MinReplicas: 1, MaxReplicas: 500}
	for _, names := range [][]string{{"oracle"}, {"oracle", "oracle-pooled"}} {
		b.Run(strings.Join(names, ","), func(b *testing.B) {
			requests, runs := 0, 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				c, err := Compare(cfg, names, p, nil)
				if err != nil {
					b.Fatal(err)
				}
				// The last oracle's candidates cover the whole search.
				o := c.Oracles[len(c.Oracles)-1]
				runs += o.Runs
				requests += o.Runs * c.Results[0].Requests
			}
			b.ReportMetric(float64(requests)/time.Since(start).Seconds(), "requests/s")
			b.ReportMetric(float64(runs)/float64(b.N), "runs/search")
		})
	}
}
