// Package pipeline runs one collection cycle: scrape every proxy, compute per-pod
// deltas, aggregate per workload, and hand the points to the InfluxDB writer.
package pipeline

import (
	"math"

	"github.com/influxdata/influxdb-client-go/v2/api/write"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/proxy/stats"
)

// PodPoint is the qas_pod point of one pod's interval, timed by the collector's clock
// (m.Time). CPU fields are added by the CPU source when it has them.
func PodPoint(t scrape.Target, m aggregate.Metrics) *write.Point {
	return write.NewPoint(influx.Pod,
		map[string]string{"namespace": t.Namespace, "workload": t.Workload, "pod": t.Pod, "node": t.Node},
		map[string]any{
			"arrival_rate":            m.ArrivalRate,
			"service_mean_seconds":    m.ServiceMean,
			"service_scv":             m.ServiceSCV,
			"queue_wait_mean_seconds": m.QueueWaitMean,
			"in_flight_mean":          m.InFlightMean,
			"in_flight":               m.InFlight,
			"waiting":                 m.Waiting,
			"busy_ratio":              m.BusyRatio,
			"error_rate":              m.ErrorRate,
			"latency_p50_seconds":     m.LatencyP50,
			"latency_p95_seconds":     m.LatencyP95,
			"latency_p99_seconds":     m.LatencyP99,
			"proxy_time_seconds":      float64(m.ProxyTime.UnixNano()) / 1e9,
			"clock_offset_seconds":    m.ClockOffset,
		}, m.Time)
}

// WorkloadPoint is the qas_workload point of one workload's cycle.
func WorkloadPoint(namespace, workload string, m aggregate.Metrics) *write.Point {
	pt := workloadPoint(namespace, workload, m)
	if m.Pooled {
		for name, v := range map[string]float64{
			"overflow_rate": m.OverflowRate, influx.FieldOverflowShare: m.OverflowShare,
			"overflow_refused_rate": m.OverflowRefusedRate, "overflow_failed_rate": m.OverflowFailedRate,
			"pulled_rate": m.PulledRate, "front_failure_rate": m.FrontFailureRate,
			"drain_pushed_rate": m.DrainPushedRate, "drain_kept_rate": m.DrainKeptRate,
			influx.FieldExpiredRequeuedRate: m.ExpiredRequeuedRate, influx.FieldExpiredRelayedRate: m.ExpiredRelayedRate,
			influx.FieldFrontQueueLength: m.FrontQueueLength, "front_waiting_pulls": m.FrontWaitingPulls,
			"front_accepted_rate": m.FrontAcceptedRate, influx.FieldFrontRefusedFullRate: m.FrontRefusedFullRate,
			"front_unauthenticated_rate": m.FrontUnauthenticatedRate, "front_expired_rate": m.FrontExpiredRate,
			"overflow_decision_p50_seconds": m.OverflowDecisionP50, "overflow_decision_p95_seconds": m.OverflowDecisionP95,
			"front_queue_wait_p50_seconds": m.FrontQueueWaitP50, "front_queue_wait_p95_seconds": m.FrontQueueWaitP95,
		} {
			pt.AddField(name, v)
		}
		pt.AddField("fronts", int64(m.Fronts))
	}
	return pt
}

func workloadPoint(namespace, workload string, m aggregate.Metrics) *write.Point {
	fields := map[string]any{
		"arrival_rate":             m.ArrivalRate,
		"service_mean_seconds":     m.ServiceMean,
		"service_scv":              m.ServiceSCV,
		influx.FieldServiceSamples: float64(m.Served),
		"in_flight_mean":           m.InFlightMean,
		"error_rate":               m.ErrorRate,
		"latency_p50_seconds":      m.LatencyP50,
		"latency_p95_seconds":      m.LatencyP95,
		"latency_p99_seconds":      m.LatencyP99,
		"pods":                     int64(m.Pods),
		"clock_offset_seconds":     m.ClockOffset,
	}
	// The rate's variance only when estimated: no pair of seconds known at
	// every pod, or none with an arrival, says nothing about it (and 0 would
	// read as Poisson).
	if m.ArrivalRateCV2Valid() {
		fields[influx.FieldArrivalRateCV2] = m.ArrivalRateCV2
		// A float, as every field the decider reads in one query (InfluxDB 1.8
		// cannot group fields of different types).
		fields[influx.FieldArrivalRatePairs] = float64(m.ArrivalRateSums.Pairs)
	}
	// The service quantiles only when measured: an idle interval says nothing
	// about the shape (and 0 is no service time).
	if len(m.ServiceQuantiles) == len(influx.ServiceQuantileFields) {
		for i, f := range influx.ServiceQuantileFields {
			fields[f] = m.ServiceQuantiles[i]
		}
	}
	addBuckets(fields, influx.LatencyBucketPrefix, m.Latency)
	addBuckets(fields, influx.ServiceBucketPrefix, m.Service)
	return write.NewPoint(influx.Workload, map[string]string{"namespace": namespace, "workload": workload}, fields, m.Time)
}

// addBuckets adds a merged histogram's buckets (the latency histogram's, the
// service histogram's), one field per bucket named by its upper bound
// (influx.BucketField of prefix), when it counted a request: an idle interval
// has no distribution. An empty bucket whose next bucket is empty too is left
// out: read without it, the bucket above holds its interval as well, and
// still counts exactly what lies in it (nothing), so the share of requests
// over any bound of the proxies' histogram is what the full histogram gives,
// while the point carries the few buckets the traffic filled and the empty
// ones just below them (a point with every latency bucket is about 940 bytes
// longer). The +Inf bucket is always there. The counts are floats, as every
// field the decider reads (whole numbers, exact up to 2⁵³): InfluxDB 1.8
// cannot group fields of different types, and no count a validated /stats
// document holds overflows them.
func addBuckets(fields map[string]any, prefix string, h stats.Histogram) {
	if h.Total() == 0 || len(h.Counts) != len(h.Bounds)+1 {
		return
	}
	for i, c := range h.Counts {
		if i == len(h.Bounds) {
			fields[influx.BucketField(prefix, math.Inf(1))] = float64(c)
			break
		}
		if c > 0 || h.Counts[i+1] > 0 {
			fields[influx.BucketField(prefix, h.Bounds[i])] = float64(c)
		}
	}
}
