package decide

import (
	"math"
	"testing"
	"time"
)

// FuzzDecide feeds arbitrary loads, sizes and settings to the engine over two
// cycles: it must not panic, and any decision it returns must stay within the
// bounds (or hold the current count) with a finite, explained outcome.
func FuzzDecide(f *testing.F) {
	f.Add(95.0, 0.1, int32(12), int64(120), 95.0, 0.1, int32(1), int32(50), 1.0, true, 30.0, 150.0, 0.3, uint8(1), 2.5, 0.0, 0.0)
	f.Add(0.0, 0.0, int32(0), int64(0), 0.0, 0.0, int32(0), int32(0), 0.0, false, 0.0, 0.0, 0.0, uint8(0), 0.0, 0.0, 0.0)
	f.Add(1e9, 1e-9, int32(1), int64(1), 99.999, 0.99, int32(5), int32(5), 50.0, true, 1e12, 1e9, 1e6, uint8(2), 1e4, 1e12, 1e9)
	f.Add(math.NaN(), -1.0, int32(-3), int64(-5), 100.0, 2.0, int32(7), int32(3), math.Inf(1), true, -1.0, math.NaN(), -0.5, uint8(3), math.NaN(), math.NaN(), -1.0)
	f.Add(30.0, 0.05, int32(20), int64(200), 95.0, 0.1, int32(1), int32(200), 0.0, true, 0.0, 30.0, 0.18, uint8(1), 0.011, 0.0, 0.0)
	// The pooled fronts' expiries and refusals (issue #20): a finite rate on a
	// pooled workload, and non-finite ones.
	f.Add(60.0, 0.04, int32(5), int64(250), 95.0, 0.1, int32(1), int32(100), 0.0, true, 0.0, 60.0, 0.2, uint8(3), 0.0, 30.0, 5.0)
	f.Add(60.0, 0.04, int32(5), int64(250), 95.0, 0.1, int32(1), int32(100), 0.0, true, 0.0, 60.0, 0.2, uint8(3), 0.0, math.Inf(1), math.NaN())
	f.Fuzz(func(t *testing.T, lambda, es float64, current int32, targetMs int64, pct, tol float64, minR, maxR int32, slope float64, predictive bool,
		queued, short, p95 float64, routing uint8, cv2, expired, refused float64) {
		spec := Spec{
			MinReplicas: minR, MaxReplicas: maxR, Target: time.Duration(targetMs) * time.Millisecond,
			Percentile: pct, Tolerance: tol, Model: ModelPerPod,
			Vertical:   Vertical{Enabled: true, MinCPU: 100, MaxCPU: 4000, PodOverheadCPU: 100},
			Migration:  Migration{Enabled: true},
			Predictive: Predictive{Enabled: predictive, LeadOverride: time.Minute},
			Routing:    []Routing{"", RoutingRandom, RoutingLeastRequest, RoutingPooled}[routing%4],
		}
		if current > 100_000 || current < -1 {
			current %= 100_000
		}
		e := NewEngine()
		for cycle := 0; cycle < 2; cycle++ {
			now := t0.Add(time.Duration(cycle) * 15 * time.Second)
			s := ramp(now, lambda, slope, es, current)
			cpuPods(&s, int(min(max(current, 0), 50)), 500, 1000)
			// The queue signals (issue #15): a backlog on every pod, a short
			// window and measured quantiles around p95.
			for i := range s.Pods {
				s.Pods[i].InService, s.Pods[i].Queued = 1, queued
			}
			s.ShortArrivalRate, s.ShortWindow = short, 5*time.Second
			s.MeasuredQuantiles = []LatencyQuantile{{50, p95 / 3}, {95, p95}, {99, 2 * p95}}
			// The service-time quantiles (the calibrated tail), with a p99 as
			// heavy as the fuzzed latency p95 makes it.
			s.ServiceQuantiles = []LatencyQuantile{{50, 0.7 * es}, {95, 3 * es}, {99, max(3*es, p95)}}
			// Batch arrivals (the rate mixture) and the latency histogram the
			// closed loop reads (issue #15's third round).
			s.RateCV2, s.RateCV2Pairs = cv2, 15
			s.LatencyBuckets = []LatencyBucket{{0.1, 100}, {0.2, p95 * 100}, {math.Inf(1), 5}}
			// The service-time histogram the engine pools (eleventh round), its
			// bounds and counts from the fuzzed numbers.
			s.ServiceBuckets = []LatencyBucket{{es, 100}, {3 * es, queued}, {math.Inf(1), p95}}
			// The pooled fronts' expiries (a backlog and a floor under the
			// measured late share) and refusals (shown).
			s.FrontExpiredRate, s.FrontRefusedRate = expired, refused
			// The requests the interval's service time is over, and a service
			// time that moves between cycles (the pooled estimate, service.go).
			s.ServiceSamples = queued * 37
			s.ServiceTime = es * (1 + float64(cycle)*slope)
			d, err := e.Decide(spec, s)
			if err != nil {
				return
			}
			if d.Explanation.Reason == "" {
				t.Fatalf("decision without a reason: %+v", d)
			}
			if d.DesiredReplicas != current && (d.DesiredReplicas < spec.MinReplicas || d.DesiredReplicas > spec.MaxReplicas) {
				t.Fatalf("desired %d outside [%d, %d] (current %d)", d.DesiredReplicas, spec.MinReplicas, spec.MaxReplicas, current)
			}
			if math.IsNaN(d.Explanation.Latency) || math.IsNaN(d.Explanation.Normalized) || math.IsNaN(d.Explanation.SizingArrivalRate) ||
				math.IsNaN(d.Explanation.Backlog) || math.IsNaN(d.Explanation.MeasuredLateShare) || d.Explanation.MeasuredLateShare > 1 ||
				badFloat(d.Explanation.ServiceTime) || d.Explanation.ServiceTime < 0 || badFloat(d.Explanation.ServiceSamples) ||
				d.Explanation.ServiceSamples < 0 || badFloat(d.Explanation.ServiceSCV) || d.Explanation.ServiceSCV < 0 ||
				badFloat(d.Explanation.ServiceLateShare) || d.Explanation.ServiceLateShare < 0 || d.Explanation.ServiceLateShare > 1 ||
				badFloat(d.Explanation.ServiceShapeWeight) || d.Explanation.ServiceShapeWeight < 0 || d.Explanation.ServiceShapeWeight > 1 {
				t.Fatalf("NaN in explanation: %+v", d.Explanation)
			}
			for _, c := range d.Explanation.Candidates {
				if math.IsNaN(c.ModelledLatency) || math.IsNaN(c.Cost) {
					t.Fatalf("NaN candidate %+v", c)
				}
			}
			current = d.DesiredReplicas
		}
	})
}
